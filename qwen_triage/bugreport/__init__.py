"""``qwen-triage report``: one short, redacted file to attach to a bug report.

Unlike ``vllm collect-env`` (every package and variable, untriaged) or
``nvidia-bug-report.sh`` (megabytes of raw driver state), it holds the versions
that matter, the doctor summary and the *triage* of the logs — the root causes
the rules found, with a few lines of evidence each — every section capped, and
everything passed through :mod:`qwen_triage.redact` before it is written.
"""
