"""PyTorch Flight Recorder dumps as an input: each rank's last collectives, for engine.hang.

A job run with ``TORCH_FR_BUFFER_SIZE`` (formerly ``TORCH_NCCL_TRACE_BUFFER_SIZE``) keeps a ring buffer of its
collectives per rank; ProcessGroupNCCL's watchdog writes it on a timeout to ``TORCH_FR_DUMP_TEMP_FILE<rank>``
(torch.csrc.distributed.c10d.FlightRecorder), and ``torch._C._distributed_c10d._dump_fr_trace()`` gives the same
bytes on demand (the gloo backend records but does not dump by itself in torch 2.13). The dump is a pickled dict
(``version``, ``pg_config``, ``pg_status``, ``entries``: one dict per collective with ``collective_seq_id``,
``profiling_name`` such as ``nccl:all_reduce``, ``state``, ``input_sizes``…), or the same as JSON
(``_dump_fr_trace_json``).

What this reads of it is only each rank's place: the last collective of the default process group it entered,
which it completed (where the backend says so), the op and shape. Telling the culprit from those is engine.hang's
:func:`~qwen_triage.engine.hang.decide`, the same as for the ranks' log lines. torch's own analyzer
(``torchfrtrace``) reads dumps with ``pickle.load``, which runs whatever a file asks: a dump here is never unpickled.
Its opcodes are read (pickletools) and only plain values built (the format holds dicts, lists, tuples, strings and
numbers only); torch is never imported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable

from qwen_triage.inputs.source import MAX_WHOLE

MAX_WORLD = 65536
_RANK_OF_NAME = re.compile(r"(\d{1,6})(?:\.json|\.pkl|\.pickle)?$")  # torch's loader: the rank ends the file name
_RANKS = re.compile(r"\d{1,6}")


@dataclass
class FlightState:
    """One rank's place, from its dump."""

    rank: int
    entered: int | None = None  # the default process group's last collective sequence number it enqueued
    completed: int | None = None  # the last it completed, where the backend's status can be trusted (NCCL)
    op: str | None = None  # all_reduce, broadcast…
    shape: str | None = None  # the last collective's first input size, [4]
    world: tuple[int, ...] = ()  # the default process group's ranks


class DumpError(ValueError):
    """Not a Flight Recorder dump this reader understands."""


_MARK = object()
_PUSH: dict[str, Callable[[object], object]] = {"NONE": lambda a: None, "NEWTRUE": lambda a: True, "NEWFALSE": lambda a: False,
         "EMPTY_DICT": lambda a: {}, "EMPTY_LIST": lambda a: [], "EMPTY_TUPLE": lambda a: ()}
_VALUES = ("BININT", "BININT1", "BININT2", "LONG1", "LONG4", "INT", "LONG", "BINFLOAT", "FLOAT", "BINUNICODE",
           "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BINSTRING",
           "SHORT_BINSTRING", "STRING")
_TUPLES = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
_IGNORED = ("PROTO", "FRAME", "STOP")
MAX_ITEMS = 50_000_000  # values one dump may hold


def _plain_values(data: bytes) -> object:
    """The value a pickle holds, read by its opcodes (pickletools) without unpickling: only dicts, lists, tuples,
    strings, bytes, numbers, booleans and None are built; any other opcode (a class, a function call, a
    persistent id) refuses the file. So a hostile dump cannot run code, and the package never unpickles."""
    import pickletools

    stack: list[object] = []
    memo: dict[int, object] = {}
    made = 0
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        made += 1
        if made > MAX_ITEMS:
            raise DumpError("too many values")
        if name in _PUSH:
            stack.append(_PUSH[name](arg))
        elif name in _VALUES:
            stack.append(arg)
        elif name == "MARK":
            stack.append(_MARK)
        elif name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            memo[len(memo) if name == "MEMOIZE" or not isinstance(arg, int) else arg] = stack[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo[arg if isinstance(arg, int) else -1])
        elif name in ("APPEND", "APPENDS", "SETITEM", "SETITEMS", "TUPLE"):
            _collect(name, stack)
        elif name in _TUPLES:
            n = _TUPLES[name]
            stack[-n:] = [tuple(stack[-n:])]
        elif name not in _IGNORED:
            raise DumpError(f"a Flight Recorder dump holds plain values; this one has {name}")
    if len(stack) != 1:
        raise DumpError("not one value")
    return stack[0]


def _collect(name: str, stack: list[object]) -> None:
    """APPEND(S) to a list, SETITEM(S) into a dict, TUPLE from the items since the last MARK."""
    if name in ("APPEND", "SETITEM"):
        items = stack[-2 if name == "SETITEM" else -1:]
        del stack[-len(items):]
    else:
        at = len(stack) - 1 - stack[::-1].index(_MARK)
        items = stack[at + 1:]
        del stack[at:]
    if name == "TUPLE":
        stack.append(tuple(items))
        return
    target = stack[-1]
    if name.startswith("APPEND") and isinstance(target, list):
        target.extend(items)
    elif name.startswith("SETITEM") and isinstance(target, dict) and len(items) % 2 == 0:
        for k in range(0, len(items), 2):
            key = items[k]
            if not isinstance(key, (str, int, float, bool, tuple, bytes)) and key is not None:
                raise DumpError("a key that is not a plain value")
            target[key] = items[k + 1]
    else:
        raise DumpError(f"{name} on a {type(target).__name__}")


def load(data: bytes) -> dict:
    """The dump's dict; :class:`DumpError` when it is not one (or is too large)."""
    if len(data) > MAX_WHOLE:
        raise DumpError(f"larger than {MAX_WHOLE >> 20} MiB")
    try:
        obj = _plain_values(data) if data[:1] == b"\x80" else json.loads(data)
    except DumpError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed pickle or JSON is not a dump
        raise DumpError(f"unreadable ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("entries"), list):
        raise DumpError("no entries")
    return obj


def rank_of(path: str) -> int | None:
    """The rank a dump belongs to: the digits that end its file name (TORCH_FR_DUMP_TEMP_FILE<rank>)."""
    m = _RANK_OF_NAME.search(path.replace("\\", "/").rsplit("/", 1)[-1])
    return int(m[1]) if m else None


def _default_pg(entry: dict) -> bool:
    pg = entry.get("process_group")
    return entry.get("pg_id") == 0 or (isinstance(pg, (list, tuple)) and len(pg) > 1 and pg[1] == "default_pg")


def _world(dump: dict) -> tuple[int, ...]:
    config = dump.get("pg_config")
    if not isinstance(config, dict):
        return ()
    default = config.get("0") or config.get("") or next(iter(config.values()), None)
    ranks = default.get("ranks") if isinstance(default, dict) else None
    if not isinstance(ranks, str):
        return ()
    return tuple(r for r in (int(x) for x in _RANKS.findall(ranks[: 8 * MAX_WORLD])) if r < MAX_WORLD)


def state_of(dump: dict, rank: int) -> FlightState:
    """One rank's place: its last collective of the default process group (p2p sends and receives left out)."""
    st = FlightState(rank=rank, world=_world(dump))
    last: dict | None = None
    for e in dump["entries"]:
        if isinstance(e, dict) and _default_pg(e) and not e.get("is_p2p") \
                and isinstance(e.get("collective_seq_id"), int) \
                and (last is None or e["collective_seq_id"] >= last["collective_seq_id"]):
            last = e
    if last is None:
        return st
    st.entered = last["collective_seq_id"]
    name = str(last.get("profiling_name") or "")
    st.op = name.rsplit(":", 1)[-1][:60] or None
    sizes = last.get("input_sizes")
    if isinstance(sizes, list) and sizes and isinstance(sizes[0], list):
        st.shape = "[" + ", ".join(str(x) for x in sizes[0][:8] if isinstance(x, int)) + "]"
    status = dump.get("pg_status")
    pg0 = status.get("0") if isinstance(status, dict) else None
    done = pg0.get("last_completed_collective") if isinstance(pg0, dict) else None
    # gloo's status marks a collective that failed as completed (recorded here): only NCCL's is taken
    if name.startswith("nccl:") and isinstance(done, int):
        st.completed = done
    return st
