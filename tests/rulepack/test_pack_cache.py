"""The private cache: no code from it (a pickle of the pack's own classes only), content keys, 0700/0600 and ours or ignored, a tampered database rebuilt."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from qwen_triage.engine.compiled import CompiledPack
from qwen_triage.engine.scanner import Scanner
from qwen_triage.inputs.file import open_source
from qwen_triage.rulepack.cache import KEEP_PER_KIND, Cache
from qwen_triage.rulepack.pack import load_pack
from tests.conftest import ROOT
from tests.rulepack.test_rule_files import GOOD_RULE

SEGFAULT_LINE = "worker 3: Segmentation fault (core dumped)\n"


def _pack_dir(tmp_path: Path) -> Path:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "r.yaml").write_text(GOOD_RULE)
    return rules


def test_pickle_only_where_the_pack_is_cached() -> None:
    import ast

    for path in (ROOT / "qwen_triage").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = {n.split(".")[0] for n in [a.name for a in node.names] + [getattr(node, "module", None) or ""]}
                assert not names & {"marshal", "shelve", "dill"}, path
                if "pickle" in names:
                    assert path == ROOT / "qwen_triage" / "rulepack" / "pack.py", path


class _Planted:
    """What a planted entry would hold: a call of anything at all (here: a file written)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.write_text, (self.marker, "ran"))


def test_a_pack_entry_naming_anything_but_the_packs_classes_runs_nothing(tmp_path: Path) -> None:
    import pickle

    rules = _pack_dir(tmp_path)
    cache_dir = tmp_path / "cache"
    load_pack([rules], bundled=False, cache_dir=cache_dir)
    (entry,) = cache_dir.glob("pack-*")
    marker = tmp_path / "marker"
    entry.write_bytes(pickle.dumps(_Planted(marker)))
    again = load_pack([rules], bundled=False, cache_dir=cache_dir)
    assert not marker.exists()  # the entry's call was refused, not made
    assert [r.rule.id for r in again.rules] == ["x.one"]  # and the pack loaded from its files


def test_cache_dir_and_files_are_private(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    load_pack([_pack_dir(tmp_path)], bundled=False, cache_dir=cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    entries = list(cache.iterdir())
    assert entries and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in entries)


def test_an_open_directory_of_ours_is_closed_before_use(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chmod(cache, 0o755)
    assert Cache.open(cache) is not None
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_a_world_readable_or_planted_entry_is_ignored(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    cache = Cache.open(cache_dir)
    assert cache is not None
    (cache_dir / "planted").write_bytes(b"evil")
    os.chmod(cache_dir / "planted", 0o644)
    assert cache.read("planted") is None
    os.symlink(cache_dir / "planted", cache_dir / "link")
    assert cache.read("link") is None
    assert cache.read("../planted") is None


def test_a_replaced_pack_entry_does_not_hide_the_rules(tmp_path: Path) -> None:
    rules = _pack_dir(tmp_path)
    cache_dir = tmp_path / "cache"
    load_pack([rules], bundled=False, cache_dir=cache_dir)
    (entry,) = cache_dir.glob("pack-*")
    entry.write_bytes(entry.read_bytes()[:-40])  # truncated
    again = load_pack([rules], bundled=False, cache_dir=cache_dir)
    assert [r.rule.id for r in again.rules] == ["x.one"]


def test_an_edit_that_keeps_size_and_mtime_is_seen(tmp_path: Path) -> None:
    rules = _pack_dir(tmp_path)
    f = rules / "r.yaml"
    cache_dir = tmp_path / "cache"
    load_pack([rules], bundled=False, cache_dir=cache_dir)
    st = f.stat()
    f.write_text(GOOD_RULE.replace("title: one", "title: ONE"))  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size
    assert [r.rule.title for r in load_pack([rules], bundled=False, cache_dir=cache_dir).rules] == ["ONE"]


def test_a_settled_pack_loads_without_reading_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm load names the pack by the files' stat (a memo written once they settled): no file is read."""
    from qwen_triage.rulepack import pack

    rules = _pack_dir(tmp_path)
    cache_dir = tmp_path / "cache"
    load_pack([rules], bundled=False, cache_dir=cache_dir)
    assert not list(cache_dir.glob("keys-*"))  # just written: its stat proves nothing yet (racy)
    monkeypatch.setattr(pack, "RACY_NS", 0)
    load_pack([rules], bundled=False, cache_dir=cache_dir)
    assert len(list(cache_dir.glob("keys-*"))) == 1

    def no_reads(files):  # type: ignore[no-untyped-def]
        raise AssertionError(f"read {files}")

    monkeypatch.setattr(pack, "read_all", no_reads)
    assert [r.rule.id for r in load_pack([rules], bundled=False, cache_dir=cache_dir).rules] == ["x.one"]


def _memoised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A pack loaded once with its files taken as settled: its rules and cache directories, the memo written."""
    from qwen_triage.rulepack import pack

    monkeypatch.setattr(pack, "RACY_NS", 0)
    rules = _pack_dir(tmp_path)
    cache_dir = tmp_path / "cache"
    load_pack([rules], bundled=False, cache_dir=cache_dir)
    return rules, cache_dir


def test_a_file_replaced_after_the_memo_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules, cache_dir = _memoised(tmp_path, monkeypatch)
    new = rules / "r.yaml.new"
    new.write_text(GOOD_RULE.replace("title: one", "title: ONE"))  # same size, another inode
    os.replace(new, rules / "r.yaml")
    assert [r.rule.title for r in load_pack([rules], bundled=False, cache_dir=cache_dir).rules] == ["ONE"]


def test_a_memo_that_is_not_a_key_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules, cache_dir = _memoised(tmp_path, monkeypatch)
    (memo,) = cache_dir.glob("keys-*")
    for planted in (b"../../etc/passwd", b"0" * 39, b"z" * 40, b""):
        memo.write_bytes(planted)
        assert [r.rule.id for r in load_pack([rules], bundled=False, cache_dir=cache_dir).rules] == ["x.one"]


def test_a_tampered_hyperscan_database_is_rebuilt(tmp_path: Path) -> None:
    pytest.importorskip("hyperscan")
    cache_dir = tmp_path / "cache"
    pack = load_pack([_pack_dir(tmp_path)], bundled=False)  # one rule: compiling it costs nothing
    CompiledPack.build(pack, engine="hyperscan", cache_dir=cache_dir)
    (db,) = cache_dir.glob("hs-*")
    assert len(list(cache_dir.glob("hsmeta-*"))) == 1  # what is known of it, beside it
    import hyperscan

    other = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    other.compile(expressions=[b"zzz-nothing-matches-this"], ids=[0], elements=1)
    db.write_bytes(hyperscan.dumpb(other))  # a valid database of other patterns
    os.chmod(db, 0o600)
    log = tmp_path / "k.log"
    log.write_text(SEGFAULT_LINE)
    scanner = Scanner(CompiledPack.build(pack, engine="hyperscan", cache_dir=cache_dir))
    for _ in scanner.scan_source(open_source(str(log))):
        pass
    assert [d.class_ for d in scanner.report().diagnoses] == ["process.segfault"]


def test_the_database_in_daily_use_outlives_many_other_packs(tmp_path: Path) -> None:
    """Pruning keeps the entries used last, not the ones written last: a node's own pack stays cached
    while a rule author compiles draft after draft into the same cache."""
    cache = Cache.open(tmp_path / "cache")
    assert cache is not None
    cache.write("hs-daily", b"the pack scanned with every day")
    first = time.time() - 1000
    os.utime(tmp_path / "cache" / "hs-daily", (first, first))  # written before any draft ...
    for n in range(10):
        cache.write(f"hs-draft{n}", b"a draft")
        os.utime(tmp_path / "cache" / f"hs-draft{n}", (first + 1 + n, first + 1 + n))
        cache.prune("hs-", keep=f"hs-draft{n}")
        assert cache.read("hs-daily") is not None  # ... and read at every scan since
    names = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert "hs-daily" in names
    assert len(names) == 1 + KEEP_PER_KIND and "hs-draft0" not in names  # the unused drafts went


def test_the_cache_key_covers_every_module_of_rulepack() -> None:
    """An edit to any module that validates rules (severity, templates, trust, checks… not only a hand list)
    expires the cached packs and the prebuilt artefact: each module's content is part of the key."""
    from qwen_triage.rulepack import pack

    prefix = pack._key_prefix()
    modules = sorted((ROOT / "qwen_triage" / "rulepack").glob("*.py"))
    assert len(modules) > 10
    missing = [m.name for m in modules if not any(part.endswith(m.read_bytes()) for part in prefix)]
    assert missing == []
