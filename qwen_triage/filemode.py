"""Files that hold a server's output or a run's journal are private to their owner.

A leaf: the supervisor's log and the relaunch journal both make an existing
file 0600 (a file created 0644 by an older version, or by ``O_TRUNC`` reuse).
"""

from __future__ import annotations

import os
import stat


def make_private(fd: int) -> None:
    """A regular file of ours made 0600 (never a device or a pipe named as the file, never another user's)."""
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 and st.st_uid == os.geteuid():
            os.fchmod(fd, 0o600)
    except OSError:
        pass
