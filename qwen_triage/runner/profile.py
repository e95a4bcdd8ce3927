"""A relaunch profile: the vLLM command, its environment, the machine it expects, the limits.

A profile is a small YAML file, loaded with the same strict loader as rule
files (no tags, anchors or duplicate keys; errors point at ``file:line:col``)::

    command: vllm serve /models/Qwen2.5-32B-Instruct --tensor-parallel-size 6 --port 8000
    env: {NCCL_DEBUG: WARN}
    expected_gpus: 6
    health_url: http://127.0.0.1:8000/health
    attempts: 3

``command`` may be a list (an argv) or a string; a string is split like a
shell would split it (``shlex``), but nothing is ever run through a shell, and
leading ``VAR=value`` words become environment settings.

Command-line options override the profile; :class:`RunSettings` is the merged
result the runner works from.

Environment names are checked (``[A-Za-z_][A-Za-z0-9_]*``): the working command
is printed for the user to paste, and a "name" such as ``X=1 touch …; Y`` would
run as a command.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from qwen_triage.runner.vllm.argv import VllmArgsError, VllmLaunch
from qwen_triage.runner.vllm.probe import parse_launch, parse_launch_line

DEFAULT_ATTEMPTS = 3
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def valid_env_name(name: str) -> bool:
    """Whether ``name`` is a variable name a shell (and ``env``) takes as one."""
    return ENV_NAME.fullmatch(name) is not None and len(name) <= 256


class Limits(BaseModel):
    """Bounds on the run. Times are seconds."""

    model_config = ConfigDict(extra="forbid")

    attempts: int = Field(default=DEFAULT_ATTEMPTS, ge=1, le=20, description="launches in all, restarts included")
    # A 32B model on six cards takes minutes to load; a CPU test model 20-40 s.
    ready_timeout: float = Field(default=1200.0, gt=0, description="from start to a proven-ready server")
    stall: float | None = Field(default=300.0, ge=0, description="silence that counts as a hang (0/null: never)")
    backoff: float = Field(default=5.0, ge=0, description="wait before relaunch n is backoff x 2^(n-2), at most 60 s")
    grace: float = Field(default=15.0, ge=0, description="SIGTERM to SIGKILL when stopping the server")
    release_timeout: float = Field(default=60.0, gt=0, description="for the process group, port and GPU memory to be freed")
    wait_timeout: float = Field(default=3600.0, gt=0, description="--wait-for-fix gives up after this long")
    health_interval: float = Field(default=5.0, gt=0, description="how often a ready server's /health is polled")
    request_timeout: float = Field(default=10.0, gt=0, description="each /health and /v1/models request")
    completion_timeout: float = Field(default=120.0, gt=0, description="the one test completion")


class Profile(Limits):
    model_config = ConfigDict(extra="forbid")

    command: list[str] | str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    expected_gpus: int | None = Field(default=None, ge=1, description="GPUs the server should run on")
    gpu_memory_gib: float | None = Field(default=None, gt=0, description="per device, when NVML cannot tell")
    health_url: str | None = None
    preflight: bool = True
    completion: bool = Field(default=True, description="prove readiness with one tiny completion")
    wait_for_fix: bool = False
    journal: str | None = None
    log_dir: str | None = None

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, value: Any) -> Any:
        # YAML turns `NCCL_P2P_DISABLE: 1` into an int; the environment only holds strings.
        if isinstance(value, dict):
            bad = [str(k) for k in value if not valid_env_name(str(k))]
            if bad:
                raise ValueError(f"not an environment variable name: {bad[0][:80]!r} (letters, digits and _)")
            return {str(k): _env_value(v) for k, v in value.items()}
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _command_words(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [str(v) for v in value]
        return value

    @field_validator("health_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("health_url must be an http(s) URL with a host, e.g. http://127.0.0.1:8000/health")
        return value


def _env_value(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


class ProfileError(ValueError):
    """The profile or the command is unusable; the CLI exits 2."""


def load_profile(path: str | Path) -> Profile:
    from qwen_triage.rulepack.errors import RuleFileError
    from qwen_triage.rulepack.yamlload import load_yaml

    try:
        loaded = load_yaml(path)
        if loaded.data is None:
            return Profile()
        if not isinstance(loaded.data, dict):
            raise ProfileError(f"{path}: a profile is a mapping (command:, env:, …)")
        return loaded.validate(Profile)
    except RuleFileError as exc:
        raise ProfileError(str(exc).replace("rule files", "profiles")) from None


class RunSettings(Limits):
    """Everything a run needs, after the profile and the options are merged."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    launch: VllmLaunch
    env: dict[str, str] = Field(default_factory=dict, description="set for the server on top of ours")
    expected_gpus: int | None = None
    gpus: int | None = Field(default=None, description="--gpus: devices to plan for when NVML sees none")
    gpu_memory_gib: float | None = None
    health_url: str | None = None
    preflight: bool = True
    completion: bool = True
    wait_for_fix: bool = False
    apply: bool = False
    detach: bool = False
    stop_when_ready: bool = False
    journal: Path
    log_dir: Path
    show_output: bool = False


def command_from(profile_command: list[str] | str | None, cli_command: list[str]) -> tuple[VllmLaunch, dict[str, str]]:
    """The launch to work from: the command after ``--`` wins over the profile's."""
    try:
        if cli_command:
            if len(cli_command) == 1 and " " in cli_command[0]:
                return parse_launch_line(cli_command[0])
            env: dict[str, str] = {}
            words = list(cli_command)
            while words and "=" in words[0] and valid_env_name(words[0].split("=", 1)[0]):
                k, v = words.pop(0).split("=", 1)
                env[k] = v
            return parse_launch(words, env), env
        if profile_command is None:
            raise ProfileError("no command: give one after `--`, or `command:` in the profile")
        if isinstance(profile_command, str):
            return parse_launch_line(profile_command)
        return parse_launch(profile_command), {}
    except VllmArgsError as exc:
        raise ProfileError(str(exc)) from None


def default_state_dir() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("qwen-triage")) / "relaunch"
