"""Read-only probes of the machine: who holds a port, how big /dev/shm is, whether the model files are whole.

They back the read-only actions of the vocabulary (``check_port``,
``check_shm``, ``verify_file``) and let ``--wait-for-fix`` tell when a step the
user does by hand (freeing a port, re-downloading a shard, a bigger
``--shm-size``) has been done. None of them changes anything.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from pydantic import BaseModel


class PortHolder(BaseModel):
    pid: int | None
    name: str | None = None
    cmdline: str | None = None

    def describe(self) -> str:
        """One line, whatever the holder's arguments hold: any user who holds the port chooses its command line,
        and a line feed in it would print as lines of relaunch's own."""
        from qwen_triage.textsafe import clean

        if self.pid is None:
            return "a process this user cannot see (another user's, or another container's)"
        what = clean(self.cmdline or self.name or "") or "?"
        if len(what) > 160:
            what = what[:157] + "..."
        return f"pid {self.pid} ({what})"


def bind_host(host: str | None) -> str:
    """The address vLLM binds for ``--host`` (none: every interface)."""
    return "" if host in (None, "", "0.0.0.0") else host


def port_in_use(host: str | None, port: int) -> bool:
    """True when binding (host, port) the way a server does fails with 'address in use'."""
    h = bind_host(host)
    family = socket.AF_INET6 if ":" in h else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # Like uvicorn: SO_REUSEADDR, so a socket of a stopped server in TIME_WAIT does not count.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((h, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def port_holders(port: int) -> list[PortHolder]:
    """Processes listening on ``port`` (any address); a holder with pid None when it is not ours to see."""
    try:
        import psutil

        conns = psutil.net_connections(kind="inet")
    except Exception:  # noqa: BLE001 - psutil.AccessDenied and platforms without it
        return []
    out: list[PortHolder] = []
    seen: set[int | None] = set()
    for c in conns:
        if not c.laddr or c.laddr.port != port or c.status != "LISTEN" or c.pid in seen:
            continue
        seen.add(c.pid)
        out.append(_holder(c.pid))
    return out


def _holder(pid: int | None) -> PortHolder:
    if pid is None:
        return PortHolder(pid=None)
    try:
        import psutil

        p = psutil.Process(pid)
        return PortHolder(pid=pid, name=p.name(), cmdline=" ".join(p.cmdline()) or None)
    except Exception:  # noqa: BLE001 - gone, or not ours
        return PortHolder(pid=pid)


def shm_bytes(path: str = "/dev/shm") -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_frsize * st.f_blocks


class ModelFilesProblem(BaseModel):
    class_: str
    title: str
    summary: str


def model_file_problems(path: str | Path) -> list[ModelFilesProblem] | None:
    """Errors ``check-model`` finds in a model directory (None: not a local path)."""
    p = Path(path).expanduser()
    if not p.exists():
        return None
    from qwen_triage.preflight.model.check import ModelPathError, check_model

    try:
        diags = check_model(p)
    except ModelPathError:
        return None
    return [
        ModelFilesProblem(class_=d.class_, title=d.title, summary=d.summary)
        for d in diags
        if d.severity.rank <= 1
    ]


def local_model_dir(model: str | None) -> Path | None:
    """The model's directory when it is a path on this machine (not a hub name)."""
    if not model:
        return None
    p = Path(model).expanduser()
    return p if p.exists() else None
