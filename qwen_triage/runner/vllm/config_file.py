"""The options a ``--config FILE`` sets, read here when vLLM cannot be asked.

vLLM's ``FlexibleArgumentParser.load_config_file`` turns a YAML mapping of
options into argv words, and inserts them before the command line's own (so
the command line wins). Where vLLM is installed the probe runs vLLM's own
function; this module is the fallback and follows it (0.32.0): ``key: true``
→ ``--key``, ``key: false`` → ``--no-key`` for a negatable flag (else
nothing), a list → ``--key a b``, a mapping → ``--key '<json>'``, anything
else → ``--key value``. The file is read with ruamel's safe loader: nothing in
it can build a Python object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qwen_triage.runner.vllm.options import OptionTable

MAX_CONFIG_BYTES = 1 * 2**20


class ConfigFileError(ValueError):
    """The --config file cannot be read, or is not a mapping of options."""


def config_words(config: Any, table: OptionTable, path: str = "") -> list[str]:
    """vLLM's argv words for a loaded config mapping."""
    if config is None:
        return []
    if not isinstance(config, dict):
        raise ConfigFileError(f"--config {path}: not a mapping of options")
    out: list[str] = []
    for key, value in config.items():
        flag = f"--{key}"
        if isinstance(value, bool):
            if value:
                out.append(flag)
            else:
                name = table.canonical(flag)
                spec = table.spec(name)
                negatable = spec.negatable if spec is not None else name in table.bool_flags
                if negatable:
                    out.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                out += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            out += [flag, json.dumps(value)]
        else:
            out += [flag, str(value)]
    return out


def read_config_args(path: str, table: OptionTable) -> list[str]:
    """The argv words the YAML file at ``path`` stands for."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if path.split(".")[-1] not in ("yaml", "yml"):
        raise ConfigFileError(f"--config {path}: vLLM reads only .yaml/.yml config files")
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigFileError(f"--config {path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigFileError(f"--config {path}: {len(raw)} bytes is too large for a config file")
    try:
        data = YAML(typ="safe", pure=True).load(raw.decode("utf-8"))
    except (YAMLError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"--config {path}: not valid YAML: {exc}") from None
    return config_words(data, table, path)
