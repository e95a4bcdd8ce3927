"""Checks that run before the server starts: ``plan``, ``check-model`` and ``doctor``.

Their findings are the same :class:`qwen_triage.report.model.Diagnosis` objects that
``scan`` produces, with class ids from ``rules/classes.yaml``, so a report
from before the launch reads like one from after it and the remediation runner
can act on both.

Importing this package is cheap: pynvml, gguf and safetensors are imported
inside the functions that need them.
"""

PREFLIGHT_SCHEMA_VERSION = 1
