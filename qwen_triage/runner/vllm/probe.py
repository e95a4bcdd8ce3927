"""Ask the launch's own vLLM for its option table, in the launch's own interpreter.

vLLM usually lives in another environment than this tool, and its options
change between releases (a flag becomes boolean, one gains ``nargs='+'``), so
the parser is most exact with vLLM's own table. This package never imports
vLLM: :data:`PROBE_SOURCE` runs in a child process of the interpreter the
launch would run — the python the ``vllm`` entry point's shebang names, or the
``python`` of ``python -m vllm…`` — and prints JSON: vLLM's version, each
option of ``make_arg_parser(FlexibleArgumentParser())`` (flags, dest, arity,
choices, default) and, for ``--config FILE``, the options vLLM's own
``load_config_file`` reads from it.

Importing vLLM takes 20–30 s (it imports torch), so the table is cached per
interpreter and vLLM version (JSON under the user cache dir, directory 0700,
files 0600; never pickle), and the version is asked first with a cheap
``importlib.metadata`` lookup. On a cache hit the ``--config`` file is read
here (``config_file.py``, which follows vLLM's reader) rather than importing
vLLM again. Anything that goes wrong — no interpreter, no vLLM, a layout the
probe does not know, a timeout — leaves the built-in table of ``options.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from qwen_triage.atomicfile import write_atomic
from qwen_triage.runner.vllm.argv import (
    API_SERVER_MODULE,
    CLI_MODULES,
    CONFIG_FLAG,
    VllmLaunch,
    parse_vllm_argv,
    split_env_assignments,
)
from qwen_triage.runner.vllm.options import OptionSpec, OptionTable

MARK = "@@QWEN_TRIAGE_VLLM_PROBE@@"
VERSION_TIMEOUT = 30.0
PROBE_TIMEOUT = 300.0
CACHE_SCHEMA = 1

# Runs in the launch's interpreter; reads a JSON request on stdin, prints MARK + JSON.
PROBE_SOURCE = r'''
import argparse, importlib, json, sys

MARK = "@@QWEN_TRIAGE_VLLM_PROBE@@"
req = json.loads(sys.stdin.read() or "{}")
out = {}


def jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def first(*candidates):
    for module, name in candidates:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError("no " + " / ".join(m + "." + n for m, n in candidates))


try:
    from importlib.metadata import version
    out["version"] = version("vllm")
except Exception as exc:
    out["error"] = "vLLM is not installed for this interpreter (%s)" % type(exc).__name__

if req.get("mode") == "table" and "version" in out:
    try:
        parser_cls = first(("vllm.utils.argparse_utils", "FlexibleArgumentParser"), ("vllm.utils", "FlexibleArgumentParser"))
        make = first(("vllm.entrypoints.launchers.cli_args", "make_arg_parser"),
                     ("vllm.entrypoints.openai.cli_args", "make_arg_parser"))
        parser = make(parser_cls())
        boolean = getattr(argparse, "BooleanOptionalAction", ())
        options = []
        for a in parser._actions:
            if not a.option_strings or isinstance(a, argparse._HelpAction):
                continue
            n = a.nargs
            if n == 0:
                takes = "none"
            elif n in ("+", "*", argparse.REMAINDER) or (isinstance(n, int) and n > 1):
                takes = "multi"
            elif n == "?":
                takes = "optional"
            else:
                takes = "one"
            try:
                choices = None if a.choices is None else [str(c) for c in list(a.choices)[:200]]
            except TypeError:
                choices = None
            options.append({
                "flags": list(a.option_strings), "dest": a.dest, "takes": takes,
                "append": isinstance(a, argparse._AppendAction),
                "negatable": bool(boolean) and isinstance(a, boolean),
                "choices": choices, "default": jsonable(a.default),
            })
        out["options"] = options
        loader = getattr(parser, "load_config_file", None) or getattr(parser, "_load_config_file", None)
        if req.get("config") and loader is not None:
            try:
                out["config_args"] = [str(x) for x in loader(req["config"])]
            except Exception as exc:  # read here instead, which names the problem
                out["config_error"] = "%s: %s" % (type(exc).__name__, exc)
    except BaseException as exc:  # a probe must answer, whatever vLLM does
        out.pop("options", None)
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
print(MARK + json.dumps(out))
'''


class ProbeError(Exception):
    """The probe could not run, or found no usable vLLM; the built-in table applies."""


class ProbeResult(BaseModel):
    """What the launch's vLLM says of its options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    interpreter: str
    vllm_version: str
    table: OptionTable
    config_args: tuple[str, ...] | None = Field(
        default=None, description="the --config file's options as vLLM lists them; None: read here"
    )
    cached: bool = False


class CachedTable(BaseModel):
    """The cache file's shape: the probed table of one interpreter's vLLM."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = CACHE_SCHEMA
    interpreter: str
    vllm_version: str
    options: tuple[OptionSpec, ...]


# --- which interpreter the launch runs ---------------------------------------------------

_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_PIP_SH_EXEC = re.compile(r"""^'''exec' "?([^"\s]+)"? """)


def _which(name: str, env: Mapping[str, str]) -> str | None:
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def _shebang_python(script: str, env: Mapping[str, str]) -> str | None:
    """The interpreter a console script's shebang names (pip's ``/bin/sh`` trampoline too)."""
    try:
        with open(script, "rb") as fh:
            head = fh.read(1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return _which(words[0], env) if words else None
    if os.path.basename(words[0]) == "sh" and len(head) > 1:
        m = _PIP_SH_EXEC.match(head[1])
        return m.group(1) if m else None
    return words[0]


def launch_interpreter(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The python that runs this launch: ``vllm``'s shebang, or ``python -m …``'s python.

    None when the command starts with something else (``uv run``, a wrapper):
    what that runs cannot be told without running it."""
    if not argv:
        return None
    first = os.path.basename(argv[0])
    if first == "vllm" and len(argv) > 1 and argv[1] == "serve":
        script = _which(argv[0], env)
        return _shebang_python(script, env) if script else None
    if _PYTHON.match(first):
        rest = list(argv[1:])
        mods = (API_SERVER_MODULE, *CLI_MODULES)
        if (len(rest) >= 2 and rest[0] == "-m" and rest[1] in mods) or (rest and rest[0][2:] in mods and rest[0].startswith("-m")):
            return _which(argv[0], env)
    return None


def config_path(argv: Sequence[str]) -> str | None:
    """The ``--config FILE`` of an argv (the last one), before it is parsed."""
    found = None
    for i, tok in enumerate(argv):
        if tok == CONFIG_FLAG and i + 1 < len(argv):
            found = argv[i + 1]
        elif tok.startswith(CONFIG_FLAG + "="):
            found = tok.split("=", 1)[1]
    return found


# --- the child process -----------------------------------------------------------------


def _run_probe(python: str, request: dict, env: Mapping[str, str], timeout: float) -> dict:
    try:
        proc = subprocess.run(
            [python, "-c", PROBE_SOURCE],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ProbeError(f"{python}: {exc}") from None
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise ProbeError(f"{python}: the probe gave no answer ({tail[0][:300]})")
    try:
        answer = json.loads(line[len(MARK):])
    except ValueError:
        raise ProbeError(f"{python}: the probe's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise ProbeError(f"{python}: the probe's answer is not an object")
    return answer


def table_from(answer: Mapping, interpreter: str) -> OptionTable:
    """The option table of a probe's answer (also used for recorded answers in tests)."""
    if "options" not in answer:
        raise ProbeError(str(answer.get("error") or "the probe listed no options"))
    try:
        specs = [OptionSpec.model_validate(o) for o in answer["options"]]
    except ValidationError as exc:
        raise ProbeError(f"unexpected option in the probe's answer: {exc.errors()[0]['msg']}") from None
    return OptionTable.from_specs(specs, vllm_version=str(answer["version"]), source=f"probed: {interpreter}")


# --- the cache ------------------------------------------------------------------------


def default_cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("qwen-triage")) / "vllm-options"


def _cache_file(cache_dir: Path, interpreter: str, version: str) -> Path:
    key = hashlib.sha256(f"{interpreter}\0{version}\0{CACHE_SCHEMA}".encode()).hexdigest()[:32]
    return cache_dir / f"options-{key}.json"


def _read_cache(path: Path, interpreter: str, version: str) -> OptionTable | None:
    try:
        cached = CachedTable.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    if (cached.schema_version, cached.interpreter, cached.vllm_version) != (CACHE_SCHEMA, interpreter, version):
        return None
    return OptionTable.from_specs(cached.options, vllm_version=version, source=f"probed: {interpreter}")


def _write_cache(path: Path, interpreter: str, table: OptionTable) -> None:
    """Written 0600 in a 0700 directory, atomically; a cache that cannot be written only costs a probe."""
    data = CachedTable(interpreter=interpreter, vllm_version=table.vllm_version, options=table.options)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path.parent, 0o700)
        write_atomic(path, data.model_dump_json(), mode=0o600)
    except OSError:
        pass


# --- the entry points ------------------------------------------------------------------


def probe_launch(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    cache_dir: Path | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> ProbeResult:
    """vLLM's option table for this launch, from the cache or the launch's interpreter.

    ``env``: what the runner sets for the server, on top of ours. Raises
    :class:`ProbeError` when there is no vLLM to ask."""
    full_env = {**os.environ, **(env or {})}
    python = launch_interpreter(argv, full_env)
    if python is None:
        raise ProbeError("the command does not name its python (vllm serve, or python -m vllm…)")
    answer = _run_probe(python, {"mode": "version"}, full_env, min(timeout, VERSION_TIMEOUT))
    version = answer.get("version")
    if not isinstance(version, str):
        raise ProbeError(str(answer.get("error") or "no vLLM version"))
    cache = _cache_file(cache_dir or default_cache_dir(), python, version)
    table = _read_cache(cache, python, version)
    if table is not None:
        return ProbeResult(interpreter=python, vllm_version=version, table=table, cached=True)
    answer = _run_probe(python, {"mode": "table", "config": config_path(argv)}, full_env, timeout)
    table = table_from(answer, python)
    _write_cache(cache, python, table)
    config = answer.get("config_args")
    return ProbeResult(
        interpreter=python,
        vllm_version=table.vllm_version,
        table=table,
        config_args=tuple(config) if isinstance(config, list) else None,
    )


def parse_launch(argv: Sequence[str], env: Mapping[str, str] | None = None, **probe: Any) -> VllmLaunch:
    """:func:`~.argv.parse_vllm_argv` with the launch's own vLLM table where it has one,
    the built-in table otherwise. ``probe``: :func:`probe_launch`'s keywords (``cache_dir``, ``timeout``)."""
    try:
        found = probe_launch(argv, env, **probe)
    except ProbeError:
        return parse_vllm_argv(argv)
    return parse_vllm_argv(argv, options=found.table, config_args=found.config_args)


def parse_launch_line(cmd: str, *, cache_dir: Path | None = None) -> tuple[VllmLaunch, dict[str, str]]:
    """:func:`~.argv.parse_command_line`, probing the launch's vLLM as :func:`parse_launch` does."""
    argv, env = split_env_assignments(shlex.split(cmd))
    return parse_launch(argv, env, cache_dir=cache_dir), env
