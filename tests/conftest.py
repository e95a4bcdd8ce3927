from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"
CORPUS = ROOT.parent / "shared" / "corpus"


# What a site configures and the product (or the Slurm wrapper) reads: never the host's in a test.
SITE_ENV = (
    "QWEN_TRIAGE", "QWEN_TRIAGE_RULES", "QWEN_TRIAGE_RESUME", "QWEN_TRIAGE_UNITS", "QWEN_TRIAGE_TEXTFILE",
    "QWEN_TRIAGE_HOLD", "QWEN_TRIAGE_LOG", "QWEN_TRIAGE_JOURNALCTL", "SLURMD_NODENAME", "SLURM_CONF",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR",
)


def _isolate_from_the_host() -> None:
    """Every test and every process it starts sees a host of its own, set up before anything is collected.

    A host configured as docs/fleet.md says (``/etc/default/qwen-triage`` with a node name and
    ``--slurm-drain``, ``QWEN_TRIAGE_RULES`` in the environment, a Slurm cluster, a journal)
    must not change what a test does, nor be touched by one:

    * home and XDG directories are temporary (caches, state, run logs);
    * the Slurm wrapper reads no ``/etc/default/qwen-triage`` (``QWEN_TRIAGE_DEFAULTS``);
    * ``check`` keeps its state in a temporary directory unless told otherwise (``QWEN_TRIAGE_STATE``),
      and ``--kernel`` reads an empty kernel log (``QWEN_TRIAGE_KMSG``) and a boot id of its own;
    * a stray ``scontrol`` reads an empty ``SLURM_CONF`` and fails at once: it can reach no controller;
    * no scan leaves a detached child compiling a Hyperscan database for its next run
      (``QWEN_TRIAGE_HS_BUILD=off``): a cold scan runs on the literal prefilter, with the same findings,
      and a test does not share the CPU with compiles it never uses. Tests of that child set it back;
      tests that want Hyperscan take the session's database (the ``warm_cache`` fixture).

    The real vLLM that scripts/setup-vllm.sh installs under the real home is still found (its paths
    are taken before the home directory moves). Tests that need a source of their own set it.
    """
    real_home = Path.home()
    os.environ.setdefault("QWEN_TRIAGE_VLLM_VENV", str(real_home / ".cache/qwen-triage/vllm-venv"))
    os.environ.setdefault("QWEN_TRIAGE_TINY_MODEL", str(real_home / ".cache/qwen-triage/tiny-qwen2"))
    root = Path(tempfile.mkdtemp(prefix="qwen-triage-tests-"))
    atexit.register(shutil.rmtree, root, True)
    for name in SITE_ENV:
        os.environ.pop(name, None)
    for name, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"),
                      ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data")):
        (root / sub).mkdir()
        os.environ[name] = str(root / sub)
    (root / "kmsg").write_bytes(b"")
    (root / "boot_id").write_text("00000000-0000-4000-8000-000000000000\n")
    (root / "slurm.conf").write_bytes(b"")
    os.environ.update({
        "QWEN_TRIAGE_DEFAULTS": os.devnull,
        "QWEN_TRIAGE_STATE": str(root / "check-state"),
        "QWEN_TRIAGE_KMSG": str(root / "kmsg"),
        "QWEN_TRIAGE_BOOT_ID_FILE": str(root / "boot_id"),
        "SLURM_CONF": str(root / "slurm.conf"),
        "QWEN_TRIAGE_HS_BUILD": "off",
    })


_isolate_from_the_host()


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The Hyperscan database cache must not leak between test runs and users.
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session", autouse=True)
def prebuilt_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled pack validated once, as a wheel build leaves it (rulepack.prebuilt): every load and every
    process a test starts takes the bundled part from it instead of parsing the YAML again.

    The checkout's own artefact (gitignored), rebuilt only when the YAML or the validating code changed
    since, so the test sessions of one checkout share one parse; a session's own copy where the checkout
    cannot be written. A test of cold loading on purpose sets ``QWEN_TRIAGE_PREBUILT=off``.
    """
    from qwen_triage.rulepack.pack import bundled_files, read_all
    from qwen_triage.rulepack.paths import bundled_rules_dir
    from qwen_triage.rulepack.prebuild import build_artefact, load_prebuilt
    from qwen_triage.rulepack.prebuilt import ARTEFACT, PREBUILT_ENV

    out = ARTEFACT
    base = bundled_rules_dir()
    if load_prebuilt(base, read_all(bundled_files(base)) or {}, ARTEFACT) is None:
        try:
            build_artefact(ARTEFACT)
        except OSError:
            out = build_artefact(tmp_path_factory.mktemp("prebuilt") / "bundled-pack.json")
    os.environ[PREBUILT_ENV] = str(out)
    return out


@pytest.fixture()
def prebuilt_now(prebuilt_pack: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An artefact that is that of the files as they are now: the session's, or a new one when a rule file or
    the validating code changed since the session began (a shared checkout is edited while tests run)."""
    from qwen_triage.rulepack.pack import bundled_files, read_all
    from qwen_triage.rulepack.paths import bundled_rules_dir
    from qwen_triage.rulepack.prebuild import build_artefact, load_prebuilt

    base = bundled_rules_dir()
    if load_prebuilt(base, read_all(bundled_files(base)) or {}, prebuilt_pack) is not None:
        return prebuilt_pack
    return build_artefact(tmp_path_factory.mktemp("prebuilt-now") / "bundled-pack.json")


@pytest.fixture(scope="session")
def compiled():
    from qwen_triage.engine.scanner import compile_pack

    return compile_pack()


# Hyperscan databases shared by the test sessions of this checkout and their xdist workers (gitignored):
# compiling the bundled pack costs ~8 s of CPU on a quiet machine and minutes on a loaded one, once per worker.
SHARED_HS = ROOT / ".test-cache"


@contextlib.contextmanager
def _shared_hyperscan_databases() -> Iterator[None]:
    """The checkout's compiled databases in this session's cache while the body runs, and what the body
    compiled back into the checkout's: the first worker compiles, the others wait on the lock and load it.

    Entries go through ``rulepack.cache.Cache`` both ways (private files, read only when ours and 0600), and a
    database is used only when the digest stored beside it checks out, as with any cache entry.
    """
    from qwen_triage.engine.scanner import cache_dir
    from qwen_triage.rulepack.cache import Cache

    shared, session = Cache.open(SHARED_HS), Cache.open(cache_dir())
    if shared is None or session is None:
        yield
        return

    def copy(src: Cache, dst: Cache) -> None:
        for entry in sorted([*src.path.glob("hs-*"), *src.path.glob("hsmeta-*")]):
            if not (dst.path / entry.name).exists():
                data = src.read(entry.name)
                if data is not None:
                    dst.write(entry.name, data)

    with open(shared.path / "lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if the body raises
        copy(shared, session)
        yield
        copy(session, shared)
        newest = max(shared.path.glob("hs-*"), key=lambda p: p.stat().st_mtime, default=None)
        if newest is not None:
            shared.prune("hs-", keep=newest.name)
            shared.prune("hsmeta-", keep="hsmeta-" + newest.name.removeprefix("hs-"))


@pytest.fixture(scope="session")
def warm_cache():
    """The session's cache with the bundled pack's Hyperscan database in it (compiled once, inline): scans in
    process, and in the processes tests start, then run as a user's second run does, not on the literal
    prefilter while a background child is still compiling (which would make their stats depend on timing).
    The database is compiled once per checkout and rule set, not once per session and worker."""
    from qwen_triage.engine.prefilter import hyperscan_available
    from qwen_triage.engine.scanner import compile_pack

    if not hyperscan_available():
        return compile_pack(engine="literal")
    with _shared_hyperscan_databases():
        return compile_pack(engine="hyperscan")


@pytest.fixture(scope="session")
def compiled_literal():
    from qwen_triage.engine.scanner import compile_pack

    return compile_pack(engine="literal")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real-vLLM tests first. Their servers (``xdist_group("vllm-server")``: one worker, one at a time)
    take both cores for 20-40 s each and are the longest part of the suite, so with ``-n`` they start at
    once while the other worker, and this one when they are done, take the rest."""
    first = [item for item in items if item.get_closest_marker("vllm")]
    items[:] = first + [item for item in items if not item.get_closest_marker("vllm")]
