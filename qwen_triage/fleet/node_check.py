"""`qwen-triage check` as one call: :func:`run` (:class:`CheckOptions`) -> :class:`~qwen_triage.fleet.check.CheckResult`.

What the command line used to wire by hand: the readers built by name (inputs/registry), the state
directory prepared and locked, the rule pack compiled within the run's deadline, the check run (or
only ``--clear``), and, when another check holds the lock, the stored state answered instead of
waiting. What reads the result - node-problem-detector's line, the node_exporter textfile, the
Slurm drain - is a channel (fleet/channels.py). A check that cannot run raises :class:`CheckFailed`
with the reason; every channel then says "unknown" its own way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from qwen_triage.deadline import Deadline, DeadlinePassed, armed, pause
from qwen_triage.fleet.check import DEFAULT_HOLD, DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT, CheckConfig, CheckResult
from qwen_triage.fleet.policy import NodePolicy
from qwen_triage.fleet.state import ActiveDiagnosis, State

RESERVE = 0.5  # seconds of the run kept for merging, saving the state and printing the answer
STATE_ENV = "QWEN_TRIAGE_STATE"  # the state directory, as the Slurm wrapper's setting of the same name


class CheckFailed(Exception):
    """The check could not run (nothing to read, the state or the rules unusable): the channels answer unknown."""


@dataclass(frozen=True)
class CheckOptions:
    """One check: what to read, where the state is kept, how long and how much."""

    started: float  # time.perf_counter() at the process start: --timeout counts from there, imports included
    now: float  # time.time() of this check
    kernel: bool = False
    units: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    from_end: bool = False  # a file never read before is read from its end
    state_dir: str | None = None
    hold: float = DEFAULT_HOLD
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT
    rule_dirs: tuple[str, ...] = ()
    clear: tuple[str, ...] = ()  # class globs to let go of by hand (a repair without a reboot)


def default_state_dir() -> str:
    if os.environ.get(STATE_ENV):
        return os.environ[STATE_ENV]
    if os.geteuid() == 0:
        return "/var/lib/qwen-triage"
    from platformdirs import user_state_dir

    return user_state_dir("qwen-triage")


def clear_by_hand(state: State, patterns: tuple[str, ...]) -> list[ActiveDiagnosis]:
    """Drop the active diagnoses whose class matches one of ``patterns``; the dropped ones.

    For a node repaired without a reboot (a GPU reset, a reseated cable): hardware classes are
    otherwise held until the boot id changes. Positions are kept, so the evidence already read
    is not read again; a new Xid raises the class again.
    """
    dropped = []
    for key, d in list(state.active.items()):
        if any(fnmatchcase(d.class_, p) for p in patterns):
            dropped.append(state.active.pop(key))
    return dropped


def _readers(options: CheckOptions) -> list:
    from qwen_triage.inputs.registry import build

    readers = [build("kernel")] if options.kernel else []
    readers += [build("journal", u) for u in options.units]
    readers += [build("file", f, from_end=options.from_end) for f in options.files]
    return readers


def _cache_beside(state_path: str) -> None:
    if not os.environ.get("XDG_CACHE_HOME"):
        # The compiled rule pack (Hyperscan database) is cached beside the state: a check compiles it once
        # (seconds), not on every run, even where the home directory is read-only or absent (containers).
        os.environ["XDG_CACHE_HOME"] = os.path.join(state_path, "cache")


def _hand_over_load(options: CheckOptions, state_path: str) -> None:
    """A run its deadline cut before the rules were loaded (a slow start, one long rule file) leaves a
    detached child to load them and build the database, so the next run on this node is warm however slow
    this one was; a child already at it (a load cut by its own deadline) holds the lock and is left alone."""
    from qwen_triage.engine.detached import start_pack_load
    from qwen_triage.rulepack.cache import user_cache_path
    from qwen_triage.rulepack.paths import extra_rule_dirs

    _cache_beside(state_path)
    start_pack_load(user_cache_path(), extra_rule_dirs(list(options.rule_dirs)), bundled=True)


def _compile(options: CheckOptions, deadline: Deadline):
    from qwen_triage.engine.scanner import compile_pack

    # a fresh node's first checks answer "unknown" in time, keep what they validated in the cache and leave a
    # detached child to finish, so a check under node-problem-detector warms up; the last second (half the
    # run, when shorter) is kept for reading, the state and the answer
    try:
        return compile_pack(options.rule_dirs, deadline=deadline.at - min(1.0, options.timeout / 2))
    except Exception as exc:  # a broken rule pack must still answer "unknown", not crash the plugin
        raise CheckFailed(f"cannot load the rules: {exc}") from exc


def run(options: CheckOptions) -> CheckResult:
    """One check, over by ``options.started + options.timeout`` whatever step is slow; raises
    :class:`CheckFailed` when it cannot run or cannot say anything by then."""
    deadline = Deadline.after(options.started, options.timeout)
    progress = _Progress(state_path=options.state_dir or default_state_dir())
    try:
        with armed(deadline):
            return _run(options, deadline, progress)
    except DeadlinePassed:
        if progress.compiled is None:
            _hand_over_load(options, progress.state_path)
        if progress.state is not None and progress.state.active:
            # cut while reading: what the stored state holds is still true (a held Xid stays visible)
            return progress.answer_stored(f"the --timeout of {options.timeout:g} s passed while {progress.step}; "
                                          "reported the stored state, the rest is read next run")
        raise CheckFailed(f"the --timeout of {options.timeout:g} s passed while {progress.step}") from None


@dataclass
class _Progress:
    """Where a run is, so a run its deadline cuts can say where and answer from what it has."""

    state_path: str
    step: str = "starting"
    compiled: object | None = None  # the rule pack, once loaded
    state: State | None = None
    answer: Callable[[State, str], CheckResult] | None = None

    def answer_stored(self, note: str) -> CheckResult:
        assert self.state is not None and self.answer is not None
        result = self.answer(self.state, note)
        result.stored = True  # nothing of this run was saved: the channels do not publish it as a new reading
        return result


def _run(options: CheckOptions, deadline: Deadline, progress: _Progress) -> CheckResult:
    from qwen_triage.fleet.check import run_check, stored_result
    from qwen_triage.fleet.state import StateError, StateLocked, StateStore, read_boot_id

    reserve = min(RESERVE, options.timeout / 4)  # merging, saving the state and the answer
    readers = _readers(options)
    if not readers and not options.clear:
        raise CheckFailed("nothing to check: give --kernel, --journal UNIT or --file PATH")
    state_path = progress.state_path
    store = StateStore(state_path)
    progress.step = "preparing the state directory"
    try:
        store.prepare()
    except StateError as exc:
        raise CheckFailed(str(exc)) from exc
    _cache_beside(state_path)
    progress.step = "loading the rules"
    pause("load")
    progress.compiled = compiled = _compile(options, deadline)
    policy = NodePolicy.of(compiled.pack.classes)
    boot_id = read_boot_id()
    config = CheckConfig(hold=options.hold, max_bytes=options.max_bytes, timeout=options.timeout)
    progress.step = "waiting for the state lock"
    try:
        with store.locked(timeout=min(1.5, max(deadline.left() - reserve, 0.0) / 2)):
            state = store.load()
            by_hand = clear_by_hand(state, options.clear)
            progress.step, progress.state = "reading", state
            progress.answer = lambda s, note: _with_policy(
                stored_result(s, config, boot_id, note, options.now), policy)
            if readers:
                result = run_check(readers, state, compiled, config, boot_id, now=options.now,
                                   started=options.started, deadline=deadline.monotonic(reserve))
            else:  # `--clear` alone: let go, and say (and write to --textfile) what is still active
                result = stored_result(state, config, boot_id, "no source read: --clear only", options.now)
            result.notes[:0] = store.notes
            result.cleared[:0] = by_hand
            result.notes += [f"cleared by hand: {d.class_} from {d.source}" for d in by_hand]
            progress.step = "saving the state"
            store.save(state)
    except StateLocked as exc:
        # another check (an NPD condition of its own, the Slurm health check) is reading right now: answer
        # from the state it last saved instead of waiting past the caller's timeout
        result = stored_result(store.load(), config, boot_id, f"{exc}; reported the stored state")
        result.stored = True
    except StateError as exc:
        raise CheckFailed(str(exc)) from exc
    except OSError as exc:
        raise CheckFailed(f"state directory {store.dir}: {exc.strerror or exc}") from exc
    return _with_policy(result, policy)


def _with_policy(result: CheckResult, policy: NodePolicy) -> CheckResult:
    result.policy = policy
    return result
