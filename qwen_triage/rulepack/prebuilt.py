"""The bundled pack validated ahead of time: a generated artefact, so no first run parses YAML.

Parsing the bundled YAML in pure Python (ruamel.yaml has no C loader here) and validating it
costs ~2 s of CPU, ten times a whole warm scan; a fresh node, a new user or an upgrade paid it
on the first run. The wheel's build hook (``hatch_build.py``), an image build, or
``python -m qwen_triage.rulepack.prebuild`` writes the validated pack once, as JSON, beside
this module (:data:`ARTEFACT`); a load (rulepack.pack) then takes the bundled part from it.
This module reads it; rulepack.prebuild writes it.

It is as safe as the private cache: JSON of the plain specs (no pickle); keyed by the contents
of every bundled data and rule file and by the validating code (the same prefix as the cache's
keys), so a changed rule, schema or version is never served from it (that load parses, as
without it); used only when no other user can write it (a regular file, owned by us or root,
not group/world-writable: the trust of the package's own code). ``QWEN_TRIAGE_PREBUILT``:
``off`` ignores it (a run that must be cold), a path reads that file instead (the test suite
shares one it built).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

ARTEFACT = Path(__file__).resolve().parent / "bundled-pack.json"
PREBUILT_ENV = "QWEN_TRIAGE_PREBUILT"
MAX_ARTEFACT_BYTES = 64 * 2**20


def artefact_path() -> Path | None:
    """Where the artefact is read from, or None when ``QWEN_TRIAGE_PREBUILT=off``."""
    chosen = os.environ.get(PREBUILT_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    return Path(chosen) if chosen else ARTEFACT


def artefact_key(base: Path, contents: dict[Path, bytes], prefix: list[bytes]) -> str:
    """The digest an artefact of these bundled files carries: ``prefix`` (the pack cache's: version, format,
    validating code), then names relative to ``base``, so the key is the same in the build tree and in the
    installed package."""
    from qwen_triage.rulepack.cache import digest

    parts = list(prefix)
    for path in sorted(contents, key=lambda p: str(p.relative_to(base))):
        parts += [str(path.relative_to(base)).encode(), contents[path]]
    return digest(*parts)[:40]


def _read_trusted(path: Path) -> bytes | None:
    """The file's bytes when nobody but us (or root) can have written it; else None (never trusted)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022
                or st.st_size > MAX_ARTEFACT_BYTES):
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_ARTEFACT_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _relative(value: str, base: Path) -> str:
    return str(Path(value).relative_to(base))


def prebuilt_data(base: Path, contents: dict[Path, bytes], prefix: list[bytes],
                  path: Path | None = None) -> dict[str, Any] | None:
    """The pack the artefact holds (rulepack.pack's JSON form, paths under ``base``) when its key is that of
    ``contents`` (every bundled file under ``base``, read); None when there is none, it is stale or not trusted."""
    path = path or artefact_path()
    blob = _read_trusted(path) if path is not None else None
    if blob is None:
        return None
    try:
        data: Any = json.loads(blob)
        if not isinstance(data, dict) or data.get("key") != artefact_key(base, contents, prefix):
            return None
        pack = data["pack"]
        under = {f: str(base / f) for f in pack["files"]}  # one path join per file, not per rule
        pack["files"] = list(under.values())
        for rule in pack["rules"]:
            rule["path"] = under[rule["path"]]
        return pack if isinstance(pack, dict) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def artefact_bytes(base: Path, contents: dict[Path, bytes], prefix: list[bytes], pack: dict[str, Any]) -> bytes:
    """The artefact of ``pack`` (rulepack.pack's JSON form), loaded from the files in ``contents`` under ``base``."""
    data = dict(pack)
    data["files"] = [_relative(f, base) for f in data["files"]]
    data["rules"] = [dict(rule, path=_relative(rule["path"], base)) for rule in data["rules"]]
    return json.dumps({"format": data.get("format"), "key": artefact_key(base, contents, prefix), "pack": data},
                      separators=(",", ":")).encode()
