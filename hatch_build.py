"""Wheel build hook: the bundled pack validated once, at build time (qwen_triage.rulepack.prebuild).

An installed package then loads its bundled rules from that JSON instead of parsing the YAML on the
first run of every user and node (~2 s of CPU). Where the hook cannot validate (its dependencies
absent), the wheel is built without the artefact and the package parses on first use, as a checkout does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ARTEFACT = "qwen_triage/rulepack/bundled-pack.json"


class PrebuiltPackHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        sys.path.insert(0, self.root)
        try:
            from qwen_triage.rulepack.prebuild import build_artefact

            out = build_artefact(Path(self.root) / ARTEFACT)
        except ImportError as exc:
            self.app.display_warning(f"bundled pack not prebuilt ({exc}); installs will parse it on first use")
            return
        finally:
            sys.path.remove(self.root)
        build_data["force_include"][str(out)] = ARTEFACT
