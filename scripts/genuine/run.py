#!/usr/bin/env python3
"""Record what real programs print when they fail: the genuine-output harness.

Each ``scripts/genuine/programs/<name>.py`` defines ``PROGRAM: Program`` (see ``case.py``). For every
release of a program this script keeps one venv under ``~/.cache/qwen-triage/genuine/<program>-<label>/``
(rebuilt only when its stamp no longer matches the requirements; pip runs with the machine's own config, so
``torch==2.13.0`` takes the CPU wheel in /opt/wheels), runs each case in a fresh work directory with stdout and
stderr through one pipe, in its own process group (killed at the end, so no rank outlives its case), and
writes ``fixtures/genuine/<program>/<case>-<label>.log`` plus that folder's ``cases.yaml``. The output is kept
as printed except for paths and host names, which would otherwise leak this machine into the fixtures and make
a rerun differ for no reason. The new logs are then scanned with the installed ``qwen-triage`` and the script
prints, per case, what was expected and what the pack said, and for a case recorded for another release the
error lines whose wording changed.

Usage::

    python scripts/genuine/run.py --list
    python scripts/genuine/run.py --program torch --release 2.13.0 --only gloo-allreduce-ok
    python scripts/genuine/run.py --program torch --requirement 'torch==2.15.0' --no-record

Stdlib only (python3.11+): it must run before any venv exists.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

import case as _case  # noqa: E402  (the dataclasses the program modules use)

# one class object whichever way a program module imports it (``from case import`` or the dotted path)
sys.modules.setdefault("scripts.genuine.case", _case)
Case, Program, Release = _case.Case, _case.Program, _case.Release

CACHE = Path(os.environ.get("QWEN_TRIAGE_GENUINE_CACHE", Path.home() / ".cache" / "qwen-triage" / "genuine"))
FIXTURES = ROOT / "fixtures" / "genuine"
PROGRAMS = HERE / "programs"

MAX_HEAD = 96 * 1024  # bytes of output kept from the start of a run ...
MAX_TAIL = 96 * 1024  # ... and from its end; a chatty failure keeps its first and last words
STAMP = ".genuine-stamp"

# neutral stand-ins: the same on every machine, so a rerun differs only where the program changed
N_VENV = "/venv"
N_WORK = "/work/case"
N_HOME = "/home/user"
N_HOST = "host1"
N_PYBASE = "/usr"

FIELD_ORDER = ("id", "file", "input", "expect", "also", "note", "program", "command", "case", "release")


# --------------------------------------------------------------------------------------------- programs


def load_programs(names: list[str] | None) -> list[Program]:
    """Import each ``programs/<name>.py`` (all of them, or the ones named) and return its PROGRAM."""
    files = sorted(p for p in PROGRAMS.glob("*.py") if not p.name.startswith("_"))
    by_stem = {p.stem: p for p in files}
    if names:
        missing = [n for n in names if n not in by_stem]
        if missing:
            sys.exit(f"no program module for {missing}; have {sorted(by_stem)}")
        files = [by_stem[n] for n in names]
    out = []
    for path in files:
        spec = importlib.util.spec_from_file_location(f"genuine_program_{path.stem}", path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        prog = getattr(mod, "PROGRAM", None)
        if prog is None:
            print(f"skip {path.name}: no PROGRAM", file=sys.stderr)
            continue
        out.append(prog)
    return out


def req_name(req: str) -> str:
    """The distribution name of a requirement string ('torch==2.13.0' -> 'torch')."""
    return re.split(r"[<>=!~\[; @]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def extra_release(prog: Program, requirement: str) -> tuple[Release, str]:
    """A release not listed in the program: the newest release's requirements with one pin swapped."""
    base = prog.releases[-1]
    name = req_name(requirement)
    reqs = [r for r in base.requirements if req_name(r) != name] + [requirement]
    m = re.search(r"==\s*([^\s;,]+)", requirement)
    label = m.group(1) if m else re.sub(r"[^A-Za-z0-9.]+", "_", requirement)
    # the new release runs the cases its base release runs
    return Release(label=label, requirements=reqs), base.label


def program_dist(prog: Program) -> str:
    """Which distribution's version names the program in ``program: NAME VERSION``."""
    dist = getattr(prog, "dist", None)
    if dist:
        return dist
    for rel in prog.releases:
        if rel.requirements:
            return req_name(rel.requirements[0])
    return prog.name


# ------------------------------------------------------------------------------------------------ venvs


def venv_dir(prog: Program, rel: Release) -> Path:
    return CACHE / f"{prog.name}-{rel.label}"


def stamp_of(rel: Release) -> str:
    stamp = {"requirements": list(rel.requirements), "python": sys.version_info[:2]}
    # the install options count only when a release sets them, so older stamps stay valid
    for key in ("first", "pip_args", "pip_env"):
        if getattr(rel, key, None):
            stamp[key] = getattr(rel, key)
    return json.dumps(stamp, sort_keys=True)


def ensure_venv(prog: Program, rel: Release) -> Path | None:
    """The release's venv, built if its stamp is missing or differs; None when pip failed."""
    vdir = venv_dir(prog, rel)
    stamp = vdir / STAMP
    want = stamp_of(rel)
    if stamp.is_file() and stamp.read_text() == want and (vdir / "bin" / "python").exists():
        return vdir
    if vdir.exists():
        if CACHE not in vdir.parents:
            sys.exit(f"refusing to remove {vdir}: not under {CACHE}")
        shutil.rmtree(vdir)
    vdir.parent.mkdir(parents=True, exist_ok=True)
    print(f"[venv] {vdir.name}: {' '.join(rel.requirements) or '(no requirements)'}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(vdir)], check=True)
    log = vdir / "pip-install.log"
    env = {**os.environ, **getattr(rel, "pip_env", {})}
    for step in (list(getattr(rel, "first", [])), list(rel.requirements)):
        if not step:
            continue
        with log.open("a") as fh:
            proc = subprocess.run(
                [str(vdir / "bin" / "python"), "-m", "pip", "install", *getattr(rel, "pip_args", []), *step],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
            )
        if proc.returncode != 0:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print(f"[venv] pip failed for {vdir.name} (log {log}):\n  " + "\n  ".join(tail), flush=True)
            return None
    stamp.write_text(want)
    return vdir


def ensure_after(vdir: Path, rel: Release) -> bool:
    """Run the release's ``after`` commands once (again when they change); False when one failed."""
    steps = list(getattr(rel, "after", []))
    stamp = vdir / ".genuine-after"
    want = json.dumps(steps)
    if not steps or (stamp.is_file() and stamp.read_text() == want):
        return True
    values = {"python": str(vdir / "bin" / "python"), "bin": str(vdir / "bin"), "venv": str(vdir)}
    env = {**os.environ, **getattr(rel, "pip_env", {})}
    with (vdir / "after.log").open("w") as fh:
        for step in steps:
            print(f"[venv] {vdir.name}: after-step {' '.join(step)[:100]}", flush=True)
            if subprocess.run([fill(a, values) for a in step], stdout=fh, stderr=subprocess.STDOUT, env=env).returncode:
                print(f"[venv] after-step failed (log {vdir / 'after.log'})", flush=True)
                return False
    stamp.write_text(want)
    return True


def installed_version(vdir: Path, dist: str, fallback: str) -> str:
    proc = subprocess.run(
        [str(vdir / "bin" / "python"), "-c", "import importlib.metadata as m,sys; print(m.version(sys.argv[1]))", dist],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else fallback


# --------------------------------------------------------------------------------------------- running


def fill(text: str, values: dict[str, str]) -> str:
    """Replace only the harness placeholders; every other brace (JSON, f-strings) stays as written."""
    for key, val in values.items():
        text = text.replace("{" + key + "}", val)
    return text


class Neutraliser:
    """Replaces this machine's paths and host name by neutral ones; nothing else in the output changes."""

    def __init__(self, vdir: Path, work: Path, home: Path):
        pairs: list[tuple[str, str]] = []
        for real, neutral in (
            (work / "home", N_HOME),
            (home, N_HOME),
            (work, N_WORK),
            (vdir, N_VENV),
            (Path(sys.base_prefix), N_PYBASE),
            (Path.home(), N_HOME),
            (Path(tempfile.gettempdir()).resolve() / "genuine-work", "/tmp"),
            (CACHE, "/cache"),
        ):
            for form in {str(real), os.path.realpath(real)}:
                if form and form != "/":
                    pairs.append((form, neutral))
        pairs.sort(key=lambda p: -len(p[0]))
        self.pairs = pairs
        names = {socket.gethostname(), socket.getfqdn()}
        names = {n for n in names if n and n not in ("localhost", "localhost.localdomain")}
        # a short host name ("vm") is also an ordinary word: only replace it where a host name stands
        alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        self.host = (
            re.compile(rf"(?<![\w.-])(?:{alts})(?![\w-])") if alts and min(map(len, names)) >= 6 else
            re.compile(rf"(?:(?<=[=@'\"\[/])|(?<=: )|(?<=host )|(?<=hostname )|(?<=on ))(?:{alts})(?![\w-])")
            if alts
            else None
        )

    def __call__(self, text: str) -> str:
        for real, neutral in self.pairs:
            text = text.replace(real, neutral)
        if self.host:
            text = self.host.sub(N_HOST, text)
        return text


def pump(stream, head: bytearray, tail: deque, counter: list[int]) -> None:
    """Read the child's single pipe to EOF, keeping a bounded head and tail."""
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            return
        counter[0] += len(chunk)
        room = MAX_HEAD - len(head)
        if room > 0:
            head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            tail.append(chunk)
            while sum(len(c) for c in tail) - len(tail[0]) >= MAX_TAIL:
                tail.popleft()


PORT_RANGE = range(29400, 30000)


def free_ports(count: int) -> list[str]:
    """Ports in 29400-29999 that nothing listens on now, for the ranks of one case (127.0.0.1 only)."""
    import random

    out: list[str] = []
    for port in random.sample(PORT_RANGE, len(PORT_RANGE)):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        out.append(str(port))
        if len(out) == count:
            return out
    sys.exit("no free port in 29400-29999")


def run_case(case: Case, vdir: Path, base_env: dict[str, str]) -> dict:
    """Run one case in a fresh work dir; return its neutralised output, exit status and command line."""
    root = Path(tempfile.gettempdir()) / "genuine-work"
    root.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{case.id[:40]}-", dir=root)).resolve()
    home = work / "home"
    home.mkdir()
    port, port2 = free_ports(2)
    values = {
        "python": str(vdir / "bin" / "python"), "bin": str(vdir / "bin"), "work": str(work),
        "port": port, "port2": port2,
    }
    neutral_values = {**values, "python": f"{N_VENV}/bin/python", "bin": f"{N_VENV}/bin", "work": N_WORK}
    for name, content in case.files.items():
        target = work / fill(name, values)
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(fill(content, values))
    env = dict(base_env)
    env.update(
        HOME=str(home),
        PATH=f"{vdir / 'bin'}:{base_env.get('PATH', '/usr/bin:/bin')}",
        VIRTUAL_ENV=str(vdir),
        XDG_CACHE_HOME=str(home / ".cache"),
        HF_HOME=str(home / ".cache" / "huggingface"),
        TMPDIR=str(work / "tmp"),
    )
    (work / "tmp").mkdir()
    for key, val in case.env.items():
        env[key] = fill(val, values)
    tag = os.urandom(8).hex()
    env["QWEN_GENUINE_CASE"] = tag
    argv = [fill(a, values) for a in case.argv]
    command = " ".join(
        [f"{k}={shlex.quote(fill(v, neutral_values))}" for k, v in case.env.items()]
        + [shlex.quote(fill(a, neutral_values)) for a in case.argv]
    )
    head, tail, counter = bytearray(), deque(), [0]
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    reader = threading.Thread(target=pump, args=(proc.stdout, head, tail, counter), daemon=True)
    reader.start()
    timed_out = False
    try:
        rc = proc.wait(timeout=case.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _killpg(proc.pid, signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
    # whatever the command left behind in its group (ranks, agents, stores) goes with it
    reader.join(timeout=3)
    _killpg(proc.pid, signal.SIGTERM)
    reader.join(timeout=3)
    _killpg(proc.pid, signal.SIGKILL)
    _kill_tagged(tag)
    reader.join(timeout=5)
    elapsed = time.monotonic() - started
    data = bytes(head)
    tail_bytes = b"".join(tail)
    kept = len(head) + len(tail_bytes)
    if counter[0] > kept:
        # cut at line boundaries so no line is half kept
        data = data[: data.rfind(b"\n") + 1] if b"\n" in data else data
        cut = tail_bytes.find(b"\n")
        tail_bytes = tail_bytes[cut + 1 :] if cut >= 0 else tail_bytes
        data += f"[... {counter[0] - len(data) - len(tail_bytes)} bytes left out by the harness ...]\n".encode()
    data += tail_bytes
    text = data.decode("utf-8", errors="replace")
    text = Neutraliser(vdir, work, home)(text)
    if text and not text.endswith("\n"):
        text += "\n"
    shutil.rmtree(work, ignore_errors=True)
    return {"text": text, "rc": rc, "timed_out": timed_out, "command": command, "seconds": elapsed}


def _kill_tagged(tag: str) -> None:
    """Kill every process that still carries this case's tag in its environment.

    A case's process group goes at its end, but a server or rank that called setsid() left the group;
    the tag (inherited by every descendant) still finds it. Linux /proc only; elsewhere a no-op.
    """
    needle = f"QWEN_GENUINE_CASE={tag}".encode()
    for _round in range(2):
        found = False
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
                    found = True
            except (OSError, ValueError):
                continue
        if not found:
            return
        time.sleep(0.2)


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def exit_ok(case: Case, result: dict) -> bool:
    if case.exit == "timeout":
        return result["timed_out"]
    if result["timed_out"]:
        return False
    if case.exit == "ok":
        return result["rc"] == 0
    if case.exit == "fail":
        return result["rc"] != 0
    return True


def base_environment() -> dict[str, str]:
    """What every case starts from: the machine's PATH and locale, no user settings that change output."""
    keep = ("PATH", "LANG", "LC_ALL", "PIP_CONFIG_FILE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        TERM="dumb",
        COLUMNS="120",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        DO_NOT_TRACK="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


# ------------------------------------------------------------------------------------------ cases.yaml


def _dump_value(val) -> str:
    # JSON scalars and flow lists are valid YAML and read back with json alone (stdlib only)
    return json.dumps(val, ensure_ascii=False)


def write_manifest(folder: Path, entries: list[dict]) -> None:
    lines = [
        "# Genuine output recorded by scripts/genuine/run.py: rerun it rather than editing logs by hand.",
        "# Format: the shared corpus FORMAT.md, plus `program: NAME VERSION` and `command:`.",
    ]
    for entry in sorted(entries, key=lambda e: e["id"]):
        keys = [k for k in FIELD_ORDER if k in entry] + sorted(k for k in entry if k not in FIELD_ORDER)
        for i, key in enumerate(keys):
            lines.append(f"{'- ' if i == 0 else '  '}{key}: {_dump_value(entry[key])}")
    tmp = folder / "cases.yaml.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(folder / "cases.yaml")


def read_manifest(folder: Path) -> list[dict]:
    """Entries of a cases.yaml this script wrote (one ``key: <JSON>`` per line)."""
    path = folder / "cases.yaml"
    if not path.is_file():
        return []
    entries: list[dict] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^(- |  )([A-Za-z_]+): (.*)$", line)
        if not m:
            sys.exit(f"{path}:{n}: not a line this script writes; fix it or remove the file")
        if m.group(1) == "- ":
            entries.append({})
        try:
            val = json.loads(m.group(3))
        except json.JSONDecodeError:
            val = m.group(3)  # a plain YAML scalar written by hand
        entries[-1][m.group(2)] = val
    return entries


# ---------------------------------------------------------------------------------------------- scanning


def scan(log: Path) -> list[str] | None:
    """Classes the installed qwen-triage gives the log, root cause first; None if it could not run."""
    exe = shutil.which("qwen-triage")
    argv = [exe] if exe else [sys.executable, "-m", "qwen_triage"]
    proc = subprocess.run([*argv, "scan", "--format", "json", str(log)], capture_output=True, text=True)
    try:
        return [d["class"] for d in json.loads(proc.stdout)["diagnoses"]]
    except (json.JSONDecodeError, KeyError, TypeError):
        print(f"  scan failed (rc {proc.returncode}): {proc.stderr.strip()[-300:]}")
        return None


ERRORISH = re.compile(
    r"(?:Error|Exception|error:|ERROR|FAILED|Failed|failed|Timeout|timed out|refused|[Ww]arning|WARNING|"
    r"Traceback|Killed|Signal|signal)"
)


def error_lines(text: str) -> list[str]:
    """The lines that carry a message's wording, numbers masked, for comparing two releases."""
    out = []
    for line in text.splitlines():
        if ERRORISH.search(line) and not line.startswith("  File "):
            out.append(re.sub(r"\d+", "N", line.strip())[:300])
    return out


def reworded(new_text: str, others: list[tuple[str, Path]]) -> list[str]:
    """Error lines that differ between this release's log and each other recorded release's log."""
    report = []
    new = error_lines(new_text)
    for label, path in others:
        old = error_lines(path.read_text(errors="replace"))
        diff = [
            d
            for d in difflib.unified_diff(old, new, lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))
        ]
        if diff:
            report.append(f"    vs {label}:")
            report.extend(f"      {d}" for d in diff[:30])
            if len(diff) > 30:
                report.append(f"      ... {len(diff) - 30} more")
    return report


# -------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", action="append", help="program module name (repeatable; default: all)")
    ap.add_argument("--release", action="append", help="release label (repeatable; default: every release)")
    ap.add_argument("--only", help="comma-separated case ids")
    ap.add_argument("--list", action="store_true", help="list programs, releases and cases, run nothing")
    ap.add_argument("--requirement", help="try an unlisted release: the newest release with this pin swapped in")
    ap.add_argument("--no-record", action="store_true", help="run and compare, but write no fixtures")
    args = ap.parse_args(argv)

    programs = load_programs(args.program)
    only = {s.strip() for s in args.only.split(",")} if args.only else None

    if args.list:
        for prog in programs:
            print(f"{prog.name}  (fixtures/genuine/{prog.name}/)")
            for rel in prog.releases:
                state = "ready" if (venv_dir(prog, rel) / STAMP).is_file() else "no venv yet"
                print(f"  release {rel.label}: {' '.join(rel.requirements)}  [{state}]")
            for case in prog.cases:
                rels = ",".join(case.releases) if case.releases else "all"
                by = f" expect_by={case.expect_by}" if case.expect_by else ""
                print(f"    {case.id:40s} expect={case.expect}{by} exit={case.exit} releases={rels}")
        return 0

    base_env = base_environment()
    misses = 0
    ran = 0
    for prog in programs:
        releases: list[tuple[Release, str]] = [(r, r.label) for r in prog.releases]
        if args.requirement:
            rel, base_label = extra_release(prog, args.requirement)
            releases = [(rel, base_label)]
        elif args.release:
            releases = [(r, lab) for r, lab in releases if r.label in args.release]
        cases = [c for c in prog.cases if only is None or c.id in only]
        if not releases or not cases:
            continue
        folder = FIXTURES / prog.name
        known = {c.id for c in prog.cases}
        # entries of cases the program no longer has go; those of cases not rerun now stay
        entries = {e["id"]: e for e in read_manifest(folder) if e.get("case", "") in known or "case" not in e}
        dist = program_dist(prog)
        for rel, as_label in releases:
            todo = [c for c in cases if c.releases is None or as_label in c.releases]
            if not todo:
                continue
            vdir = ensure_venv(prog, rel)
            if vdir is not None and not ensure_after(vdir, rel):
                vdir = None
            if vdir is None:
                misses += len(todo)
                continue
            version = installed_version(vdir, dist, rel.label)
            for case in todo:
                ran += 1
                fid = f"{case.id}-{rel.label}"
                print(f"[{prog.name} {version}] {case.id} ...", flush=True)
                result = run_case(case, vdir, base_env)
                status = "timeout" if result["timed_out"] else f"rc={result['rc']}"
                print(f"  {status} in {result['seconds']:.1f}s, {len(result['text'])} chars")
                if not exit_ok(case, result):
                    misses += 1
                    print(f"  NOT RECORDED: wanted exit '{case.exit}', got {status}; last lines:")
                    for line in result["text"].splitlines()[-8:]:
                        print(f"    | {line[:200]}")
                    continue
                if args.no_record:
                    log = Path(tempfile.gettempdir()) / f"genuine-{prog.name}-{fid}.log"
                else:
                    folder.mkdir(parents=True, exist_ok=True)
                    log = folder / f"{fid}.log"
                log.write_text(result["text"])
                expect = list(case.expect_by.get(as_label, case.expect))
                entry = {
                    "id": fid,
                    "file": log.name,
                    "input": case.input,
                    "expect": expect,
                    "also": list(case.also),
                    "note": case.note,
                    "program": f"{dist} {version}",
                    "command": result["command"],
                    "case": case.id,
                    "release": rel.label,
                }
                others = [
                    (e["release"], folder / e["file"])
                    for e in entries.values()
                    if e.get("case") == case.id and e.get("release") != rel.label and (folder / e["file"]).is_file()
                ]
                if not args.no_record:
                    entries[fid] = entry
                    write_manifest(folder, list(entries.values()))
                got = scan(log)
                verdict = "ok " if got == expect else "MISS"
                if got != expect:
                    misses += 1
                print(f"  {verdict} expect {expect} got {got}")
                for line in reworded(result["text"], others):
                    print(line)
    print(f"{ran} case runs, {misses} not as expected (exit or diagnosis)")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
