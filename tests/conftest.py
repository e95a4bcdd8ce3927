from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The Hyperscan database cache must not leak between test runs and users.
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def compiled():
    from qwen_triage.engine.scanner import compile_pack

    return compile_pack()


@pytest.fixture(scope="session")
def compiled_literal():
    from qwen_triage.engine.scanner import compile_pack

    return compile_pack(engine="literal")
