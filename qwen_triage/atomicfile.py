"""The one way the package replaces a file: a reader sees the old file or the new one, never a part.

A leaf (no package imports): caches (the rule pack's, vLLM's option table),
the fleet state file, node_exporter's textfile and the prebuilt artefact all
write through :func:`write_atomic`, so all get the same safety:

* the temporary file sits beside the target (same filesystem, so the rename is
  atomic), named ``.<name>.<random>.tmp``: a dot name that ends in neither
  ``.prom`` nor the target's suffix, so collectors and globs skip it;
* it is created with ``O_EXCL | O_NOFOLLOW``: a file or a symlink planted under
  that name is never written through;
* mode 0600 unless the caller asks otherwise (0644 for files others read),
  set exactly, whatever the umask;
* the data is fsynced before the rename and the directory after it, so a crash
  leaves the old file or the whole new one;
* on any error (a full disk, an interrupt) the temporary file is removed and
  the error raised.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _token() -> str:
    """A temporary name's random part: what ``secrets.token_hex(6)`` gives, without importing ``secrets``
    (its ``hmac`` loads OpenSSL's bindings: ~3 ms of every scan that writes its cache)."""
    return os.urandom(6).hex()


def _create_temp(target: Path, mode: int) -> tuple[int, Path]:
    """A new, exclusive temporary file beside ``target``."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{_token()}.tmp")
        try:
            return os.open(tmp, _FLAGS, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; a filesystem that cannot sync a directory only loses that."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` (``str`` is written as UTF-8) atomically; raises ``OSError``."""
    target = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = _create_temp(target, mode)
    try:
        try:
            os.fchmod(fd, mode)  # exactly what was asked: the umask only ever narrows os.open's mode
            _write_all(fd, blob)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)
