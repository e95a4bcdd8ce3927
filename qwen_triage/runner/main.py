"""`qwen-triage relaunch` wired to the terminal: options and profile merged, signals, exit status."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from qwen_triage.exits import EXIT_USAGE
from qwen_triage.interrupts import deliver_pending
from qwen_triage.runner.deps import Deps
from qwen_triage.runner.loop import Run, default_paths
from qwen_triage.runner.profile import (
    Profile,
    ProfileError,
    RunSettings,
    command_from,
    load_profile,
    valid_env_name,
)
from qwen_triage.runner.render import Printer

# Options that override the profile field of the same name when given.
LIMITS = ("attempts", "ready_timeout", "stall", "backoff", "grace", "release_timeout", "health_interval",
           "wait_timeout")


@dataclass(frozen=True)
class RelaunchOptions:
    """``qwen-triage relaunch``'s options, as the command line gives them (None: the profile's value)."""

    command: tuple[str, ...] = ()
    """the vLLM launch, ``NAME=VALUE`` words first for its environment (else the profile's command)"""
    profile_path: str | None = None
    env_pairs: tuple[str, ...] = ()
    """``NAME=VALUE`` for the server's environment"""
    limits: Mapping[str, float] = field(default_factory=dict)
    """the profile's limits the command line sets, by :class:`~qwen_triage.runner.profile.Limits`' names"""
    health_url: str | None = None
    apply: bool = False
    """launch and fix for real; without it: preflight and the plan only"""
    no_preflight: bool = False
    """launch the command as given; fix only what the launch shows"""
    no_completion: bool = False
    """readiness without the test completion (/health and /v1/models only)"""
    wait_for_fix: bool | None = None
    """when a manual step can be checked (port, model files, /dev/shm): wait for it, then go on"""
    detach: bool = False
    """once ready, leave the server running in its own session"""
    stop_when_ready: bool = False
    """once proven ready, stop the server (a check of a profile)"""
    gpus: int | None = None
    """devices to plan for when NVML sees none"""
    gpu_mem: float | None = None
    """GiB per device when NVML cannot tell"""
    gpu_snapshot: str | None = None
    """plan against this recording instead of this machine (dry runs only)"""
    journal_path: str | None = None
    log_dir: str | None = None
    show_output: bool = False
    no_kernel_log: bool = False
    allow_rule_actions: bool = False
    """let rules from --rules / QWEN_TRIAGE_RULES edit the launch too (default: their steps are printed)"""
    rule_dirs: tuple[str, ...] = ()
    engine: str = "auto"


def settings_from(o: RelaunchOptions) -> RunSettings:
    """The run's settings: the profile's, the command line's options and command over them."""
    profile = load_profile(o.profile_path) if o.profile_path else Profile()
    launch, cmd_env = command_from(profile.command, list(o.command))
    env = {**profile.env, **cmd_env}
    for pair in o.env_pairs:
        name, eq, value = pair.partition("=")
        if not eq or not valid_env_name(name):
            raise ProfileError(f"--env {pair!r}: give NAME=VALUE")
        env[name] = value
    limits = {k: getattr(profile, k) for k in LIMITS}
    limits.update({k: v for k, v in o.limits.items() if v is not None})
    journal, log_dir = default_paths(o.journal_path or profile.journal, o.log_dir or profile.log_dir)
    if o.detach and o.stop_when_ready:
        raise ProfileError("--detach and --stop-when-ready exclude each other")
    if o.gpu_snapshot and o.apply:
        raise ProfileError("--gpu-snapshot describes another machine: it is for dry runs, not --apply")
    return RunSettings(
        launch=launch, env=env, expected_gpus=profile.expected_gpus, gpus=o.gpus,
        gpu_memory_gib=o.gpu_mem or profile.gpu_memory_gib, health_url=o.health_url or profile.health_url,
        preflight=profile.preflight and not o.no_preflight, completion=profile.completion and not o.no_completion,
        wait_for_fix=o.wait_for_fix if o.wait_for_fix is not None else profile.wait_for_fix, apply=o.apply,
        detach=o.detach, stop_when_ready=o.stop_when_ready, journal=journal, log_dir=log_dir,
        show_output=o.show_output, **limits,
    )


def _gpu_probe(o: RelaunchOptions, env: Mapping[str, str]):
    from qwen_triage.runner.layout import is_cpu_build

    if o.gpu_snapshot:
        from qwen_triage.preflight.machine.nvml import ReplayProbe

        return ReplayProbe(o.gpu_snapshot)
    if is_cpu_build(env):
        return None  # no GPUs to ask about; devices are worker processes
    from qwen_triage.preflight.machine.nvml import PynvmlProbe

    return PynvmlProbe()


def run(options: RelaunchOptions) -> int:
    """``qwen-triage relaunch``: preflight, the fix plan, and (with ``apply``) bounded relaunches until the server
    is proven ready; Ctrl-C stops the server (twice: kills it). The exit status of the run."""
    out = Printer()
    stop, kill = threading.Event(), threading.Event()
    runs: list[Run] = []

    def on_signal(signum: int, _frame: object) -> None:
        if not stop.is_set():
            stop.set()
            out.say(f"{signal.Signals(signum).name}: stopping the server (again: kill it now)")
        else:
            kill.set()
            for r in runs:
                r.kill_now()

    # First thing: a Ctrl-C while the rule pack compiles must not kill us halfway.
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, on_signal)
        deliver_pending(on_signal)  # a Ctrl-C during the imports that Python swallowed
    try:
        return _main(options, out, stop, kill, runs)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main(o: RelaunchOptions, out: Printer, stop: threading.Event, kill: threading.Event, runs: list[Run]) -> int:
    try:
        settings = settings_from(o)
    except ProfileError as exc:
        out.say(f"error: {exc}")
        return EXIT_USAGE
    except ValueError as exc:  # pydantic: a limit out of range
        out.say(f"error: {str(exc).splitlines()[0]}")
        return EXIT_USAGE

    from qwen_triage.runner.launch_checks import missing_local_model

    missing = missing_local_model(settings.launch)
    if missing:
        out.say(f"error: {missing}")
        return EXIT_USAGE

    rule_dirs, engine = o.rule_dirs, o.engine

    def compiled():
        from qwen_triage.engine.scanner import load_compiled

        return load_compiled(rule_dirs, engine)  # exits 2 on a broken rule pack

    env = {**os.environ, **settings.env}
    deps = Deps(compiled=compiled, gpu_probe=_gpu_probe(o, env), printer=out, kernel_log=not o.no_kernel_log,
                stop=stop, kill=kill, allow_rule_actions=o.allow_rule_actions)
    if settings.apply:
        compiled()  # a broken rule pack stops the run before anything starts
    run = Run(settings, deps)
    runs.append(run)
    result = run.go()
    if result.detached_pid is not None:
        # Machine-readable last lines, for scripts that start a server this way.
        print(f"PID={result.detached_pid}")
        print(f"LOG={result.attempts[-1].log}")
    elif result.final_command and result.exit_status == 0:
        print(result.final_command)
    sys.stdout.flush()
    return result.exit_status
