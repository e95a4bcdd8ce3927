"""`qwen-triage relaunch` wired to the terminal: options and profile merged, signals, exit status."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from qwen_triage.interrupts import deliver_pending
from qwen_triage.exits import EXIT_USAGE
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
_LIMITS = ("attempts", "ready_timeout", "stall", "backoff", "grace", "release_timeout", "health_interval",
           "wait_timeout")


def settings_from(command: list[str], opts: Mapping[str, Any]) -> RunSettings:
    profile = load_profile(opts["profile_path"]) if opts.get("profile_path") else Profile()
    launch, cmd_env = command_from(profile.command, command)
    env = {**profile.env, **cmd_env}
    for pair in opts.get("env_pairs") or ():
        name, eq, value = pair.partition("=")
        if not eq or not valid_env_name(name):
            raise ProfileError(f"--env {pair!r}: give NAME=VALUE")
        env[name] = value
    limits = {k: getattr(profile, k) for k in _LIMITS}
    limits.update({k: opts[k] for k in _LIMITS if opts.get(k) is not None})
    journal, log_dir = default_paths(opts.get("journal_path") or profile.journal, opts.get("log_dir") or profile.log_dir)
    if opts.get("detach") and opts.get("stop_when_ready"):
        raise ProfileError("--detach and --stop-when-ready exclude each other")
    if opts.get("gpu_snapshot") and opts.get("apply"):
        raise ProfileError("--gpu-snapshot describes another machine: it is for dry runs, not --apply")
    return RunSettings(
        launch=launch,
        env=env,
        expected_gpus=profile.expected_gpus,
        gpus=opts.get("gpus"),
        gpu_memory_gib=opts.get("gpu_mem") or profile.gpu_memory_gib,
        health_url=opts.get("health_url") or profile.health_url,
        preflight=profile.preflight and not opts.get("no_preflight"),
        completion=profile.completion and not opts.get("no_completion"),
        wait_for_fix=bool(opts["wait_for_fix"]) if opts.get("wait_for_fix") is not None else profile.wait_for_fix,
        apply=bool(opts.get("apply")),
        detach=bool(opts.get("detach")),
        stop_when_ready=bool(opts.get("stop_when_ready")),
        journal=journal,
        log_dir=log_dir,
        show_output=bool(opts.get("show_output")),
        **limits,
    )


def _gpu_probe(opts: Mapping[str, Any], env: Mapping[str, str]):
    from qwen_triage.runner.layout import is_cpu_build

    if opts.get("gpu_snapshot"):
        from qwen_triage.preflight.machine.nvml import ReplayProbe

        return ReplayProbe(opts["gpu_snapshot"])
    if is_cpu_build(env):
        return None  # no GPUs to ask about; devices are worker processes
    from qwen_triage.preflight.machine.nvml import PynvmlProbe

    return PynvmlProbe()


def relaunch_main(command: list[str], opts: Mapping[str, Any]) -> int:
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
        return _main(command, opts, out, stop, kill, runs)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main(command: list[str], opts: Mapping[str, Any], out: Printer, stop: threading.Event, kill: threading.Event,
          runs: list[Run]) -> int:
    try:
        settings = settings_from(command, opts)
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

    rule_dirs, engine = tuple(opts.get("rule_dirs") or ()), str(opts.get("engine") or "auto")

    def compiled():
        from qwen_triage.engine.scanner import load_compiled

        return load_compiled(rule_dirs, engine)  # exits 2 on a broken rule pack

    env = {**os.environ, **settings.env}
    deps = Deps(compiled=compiled, gpu_probe=_gpu_probe(opts, env), printer=out,
                kernel_log=not opts.get("no_kernel_log"), stop=stop, kill=kill,
                allow_rule_actions=bool(opts.get("allow_rule_actions")))
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
