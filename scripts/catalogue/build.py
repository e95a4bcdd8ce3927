"""Build rules/catalogue/ from the pinned released sources of scripts/catalogue/pinned.yaml.

    python scripts/catalogue/build.py                 # every program
    python scripts/catalogue/build.py --only vllm     # one program (the others' files are kept)
    python scripts/catalogue/build.py --update-pins   # record the sha256 of archives newly pinned

Package-index sources are downloaded with `pip download NAME==VERSION --no-deps` (a wheel for pure-Python
code, the sdist where the source is C/C++), checked against the pinned sha256, and unpacked (only the
paths the pins name). The Python standard library is read from Debian's packages of it (downloaded from the
archive's pool, QWEN_TRIAGE_DEBIAN, checked the same way, unpacked with `dpkg-deb`): no package index carries
it. Repository sources are read with `git archive` from a local mirror of the public repository at the pinned commit (QWEN_TRIAGE_MIRRORS, default /work/.mirror/<owner>+<name>/repo); where no
mirror holds that commit, the release's entries already in the committed catalogue are kept, so one
command rebuilds everything it can reach and never loses what it cannot.

Each release's tree goes through the same extractors as `rules coverage`
(qwen_triage.authoring.catalogue_build), each template's rendered example through the bundled pack
for its class, and the releases of a program are merged into one entry per distinct template.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ruamel.yaml import YAML  # noqa: E402

from qwen_triage.authoring.catalogue_build import merge_releases, tree_entries  # noqa: E402
from qwen_triage.authoring.coverage import Classifier, Coverage  # noqa: E402
from qwen_triage.rulepack.catalogue import (  # noqa: E402
    MANIFEST,
    Catalogue,
    Manifest,
    ProgramInfo,
    ReleaseInfo,
    TemplateEntry,
    write_program,
)

BUILDER = "scripts/catalogue/build.py 1"
PINS = Path(__file__).resolve().parent / "pinned.yaml"
OUT = ROOT / "rules" / "catalogue"
SOURCE_EXT = (".py", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".go", ".m", ".mm")
MAX_MEMBER_BYTES = 4 * 2**20


def log(msg: str) -> None:
    print(f"catalogue: {msg}", file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def wanted(name: str, roots: list[str], exclude: list[str]) -> str | None:
    """The member's path below the archive's top (sdists have one top directory), if a root holds it."""
    if not name.endswith(SOURCE_EXT):
        return None
    for root in roots:
        if name == root or name.startswith(root.rstrip("/") + "/"):
            if any(fnmatch.fnmatch(name, pat) for pat in exclude):
                return None
            return name
    return None


def pip_fetch(rel: dict, cache: Path) -> tuple[Path, str]:
    """The pinned archive in the download cache (downloaded once), and its sha256."""
    spec = rel["pip"]
    kind = rel.get("archive", "wheel")
    dest = cache / "pip" / spec.replace("==", "-")
    dest.mkdir(parents=True, exist_ok=True)
    found = [p for p in dest.iterdir() if p.suffix in (".whl", ".gz", ".zip")]
    if not found:
        name = spec.split("==", 1)[0]
        flags = ["--only-binary", ":all:"] if kind == "wheel" else ["--no-binary", name]
        cmd = [sys.executable, "-m", "pip", "download", spec, "--no-deps", "-d", str(dest), "-q", *flags]
        log(f"pip download {spec} ({kind})")
        subprocess.run(cmd, check=True)
        found = [p for p in dest.iterdir() if p.suffix in (".whl", ".gz", ".zip")]
    archive = found[0]
    return archive, sha256_of(archive)


DEBIAN_ARCHIVE = os.environ.get("QWEN_TRIAGE_DEBIAN", "http://deb.debian.org/debian")


def deb_fetch(rel: dict, cache: Path) -> tuple[Path, str]:
    """The pinned Debian package (its path in the archive's pool) in the download cache, once, and its sha256."""
    import urllib.request

    pool = rel["deb"]
    dest = cache / "deb" / pool.rsplit("/", 1)[-1]
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        log(f"download {DEBIAN_ARCHIVE}/{pool}")
        with urllib.request.urlopen(f"{DEBIAN_ARCHIVE}/{pool}", timeout=120) as r, open(dest.with_suffix(".part"), "wb") as f:
            f.write(r.read())
        dest.with_suffix(".part").rename(dest)
    return dest, sha256_of(dest)


def deb_tree(deb: Path, cache: Path) -> Path:
    """A Debian package's files as a tar archive (``dpkg-deb --fsys-tarfile``), beside the package in the cache."""
    tar = cache / (deb.name + ".tar")
    if not tar.is_file():
        with open(tar, "wb") as out:
            subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True, stdout=out)
    return tar


def unpack(archive: Path, roots: list[str], exclude: list[str], into: Path, base: str = "") -> int:
    """The source files under ``roots`` (paths below the archive's top directory for an sdist; below ``base``
    where the pin names one: a Debian package's ``usr/lib/python3.11``)."""
    count = 0
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                name = wanted(info.filename, roots, exclude)
                if name and info.file_size <= MAX_MEMBER_BYTES:
                    out = into / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(z.read(info))
                    count += 1
        return count
    with tarfile.open(archive) as t:
        for m in t:
            if not m.isfile() or m.size > MAX_MEMBER_BYTES:
                continue
            below = m.name.split("/", 1)[1] if "/" in m.name else m.name
            if base:
                if not below.startswith(base + "/"):
                    continue
                below = below[len(base) + 1:]
            name = wanted(below, roots, exclude)
            if name:
                data = t.extractfile(m)
                if data is not None:
                    out = into / name
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(data.read())
                    count += 1
    return count


def git_unpack(rel: dict, into: Path) -> bool:
    """The pinned commit's files under its roots, from the local mirror; False when it is not there."""
    base = Path(os.environ.get("QWEN_TRIAGE_MIRRORS", "/work/.mirror"))
    repo = base / rel["github"].replace("/", "+") / "repo"
    if not repo.is_dir():
        return False
    probe = subprocess.run(["git", "--git-dir", str(repo), "cat-file", "-e", rel["commit"] + "^{commit}"],
                           capture_output=True)
    if probe.returncode != 0:
        return False
    listing = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "-z", "--long", rel["commit"], "--",
                              *rel["roots"]], capture_output=True, text=True, check=True).stdout
    blobs: list[tuple[str, str]] = []
    for row in filter(None, listing.split("\0")):
        meta, path = row.split("\t", 1)
        mode, kind, sha, size = meta.split()
        if kind == "blob" and mode != "120000" and wanted(path, rel["roots"], rel.get("exclude", [])) \
                and size != "-" and int(size) <= MAX_MEMBER_BYTES:
            blobs.append((sha, path))
    # blob by blob (git cat-file --batch): a mirror may lack a large file no root needs, which git archive refuses
    batch = subprocess.run(["git", "--git-dir", str(repo), "cat-file", "--batch"], capture_output=True, check=True,
                           input="".join(sha + "\n" for sha, _ in blobs).encode()).stdout
    pos = 0
    for _sha, path in blobs:
        end = batch.index(b"\n", pos)
        header = batch[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] != b"blob":
            log(f"{rel['github']}@{rel['commit'][:12]}: {path} missing from the mirror")
            continue
        size = int(header[2])
        out = into / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(batch[pos:pos + size])
        pos += size + 1
    return True


def _class_of(e: TemplateEntry, classifier: Classifier) -> dict[str, object]:
    """A kept entry classed again by today's pack, from its example."""
    if not e.example:
        return {}
    class_ = classifier.classify(e.example)[0]
    return {"class_": class_, "class_from": "rule" if class_ else None}


def _pinned(key: str, rel: dict, archive: Path, digest: str) -> tuple[Path, str]:
    """The downloaded archive, refused when its sha256 is not the pinned one (recorded where none is pinned yet)."""
    if rel.get("sha256") and rel["sha256"] != digest:
        raise SystemExit(f"{key} {rel['version']}: {archive.name} has sha256 {digest}, pinned {rel['sha256']}")
    rel["sha256"] = digest
    return archive, digest


def release_entries(key: str, rel: dict, cache: Path, classifier: Classifier, old: Catalogue) -> tuple[
        list[TemplateEntry], ReleaseInfo]:
    version = str(rel["version"])
    exclude = rel.get("exclude", [])
    with tempfile.TemporaryDirectory(prefix=f"cat-{key}-") as tmp:
        tree = Path(tmp)
        if "pip" in rel:
            archive, digest = _pinned(key, rel, *pip_fetch(rel, cache))
            n = unpack(archive, rel["roots"], exclude, tree)
            info = ReleaseInfo(version=version, source=f"pypi:{rel['pip']} ({archive.name})", sha256=digest)
        elif "deb" in rel:
            deb, digest = _pinned(key, rel, *deb_fetch(rel, cache))
            n = unpack(deb_tree(deb, deb.parent), rel["roots"], exclude, tree, base=rel.get("base", ""))
            info = ReleaseInfo(version=version, source=f"debian:{rel['deb']}", sha256=digest)
        else:
            info = ReleaseInfo(version=version, source=f"github:{rel['github']}@{rel['commit']}",
                               commit=rel["commit"])
            if not git_unpack(rel, tree):
                kept = [e for e in old.entries(key) if version in e.releases] if key in old.programs() else []
                log(f"{key} {version}: no mirror holds {rel['github']}@{rel['commit'][:12]}; "
                    f"keeping its {len(kept)} committed entries")
                kept = [e.model_copy(update={"releases": [version], **_class_of(e, classifier)}) for e in kept]
                return kept, info.model_copy(update={"templates": len(kept)})
            n = sum(1 for _ in tree.rglob("*") if _.is_file())
        cov = Coverage()
        entries: list[TemplateEntry] = []
        for root in rel["roots"]:
            path = tree / root
            if not path.exists():
                log(f"{key} {version}: {root} is not in the release")
                continue
            parent = Path(root).parent.as_posix()
            prefix = "" if parent == "." else parent + "/"
            entries += tree_entries([path], key, version, classifier, prefix=prefix, cov=cov)
        log(f"{key} {version}: {n} files, {len(entries)} templates ({len(cov.skipped)} files skipped)")
        return entries, info.model_copy(update={"templates": len(entries)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--only", action="append", default=[], help="build only these programs (repeatable)")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                    / "qwen-triage-catalogue", help="where downloaded archives are kept")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--update-pins", action="store_true", help="write the sha256 of archives not yet pinned")
    args = ap.parse_args(argv)

    from qwen_triage.engine.scanner import load_compiled

    yaml = YAML()
    yaml.width = 4096
    pins = yaml.load(PINS.read_text())
    started = time.monotonic()
    classifier = Classifier(load_compiled((), "auto"))
    args.out.mkdir(parents=True, exist_ok=True)
    old = Catalogue(args.out)
    programs: dict[str, ProgramInfo] = dict(old.programs()) if (args.out / MANIFEST).is_file() else {}
    for key, spec in pins["programs"].items():
        if args.only and key not in args.only:
            continue
        t0 = time.monotonic()
        by_release = []
        infos = []
        for rel in spec["releases"]:
            if ("pip" in rel or "deb" in rel) and not rel.get("sha256") and not args.update_pins:
                raise SystemExit(f"{key} {rel['version']}: no sha256 pinned (run once with --update-pins)")
            entries, info = release_entries(key, rel, args.cache, classifier, old)
            by_release.append((info.version, entries))
            infos.append(info)
        merged = merge_releases(key, by_release)
        write_program(args.out / f"{key}.jsonl.gz", merged)
        programs[key] = ProgramInfo(display=spec["display"], parts=spec.get("parts"), releases=infos,
                                    templates=len(merged))
        log(f"{key}: {len(merged)} distinct templates in {time.monotonic() - t0:.0f} s")
        if args.update_pins:
            with open(PINS, "w") as f:
                yaml.dump(pins, f)
    order = [k for k in pins["programs"] if k in programs]
    seconds = round(time.monotonic() - started, 1)
    if args.only and (args.out / MANIFEST).is_file():  # a partial build says nothing of the whole one's time
        seconds = old.manifest.build_seconds or seconds
    manifest = Manifest(builder=BUILDER, built=datetime.date.today().isoformat(), build_seconds=seconds,
                        programs={k: programs[k] for k in order})
    out = io.StringIO()
    writer = YAML()
    writer.width = 4096
    writer.dump(manifest.model_dump(exclude_none=True), out)
    (args.out / MANIFEST).write_text("# Written by scripts/catalogue/build.py from scripts/catalogue/pinned.yaml; "
                                     "do not edit.\n" + out.getvalue())
    size = sum(p.stat().st_size for p in args.out.glob("*.jsonl.gz"))
    log(f"done in {time.monotonic() - started:.0f} s; {size / 2**20:.2f} MiB in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
