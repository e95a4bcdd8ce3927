from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # `qwen-triage run` saves logs under the user's state directory by default: keep tests out of $HOME.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(scope="session")
def live_compiled():
    """The bundled pack plus fixtures/live/rules."""
    from qwen_triage.engine.scanner import compile_pack
    from tests.live.helpers import RULES

    return compile_pack([str(RULES)])


@pytest.fixture(scope="session")
def only_live_rules():
    """fixtures/live/rules alone: results that do not move when the bundled pack grows."""
    from qwen_triage.engine.scanner import cache_dir
    from qwen_triage.engine.compiled import CompiledPack
    from qwen_triage.rulepack.pack import load_pack
    from tests.live.helpers import RULES

    return CompiledPack.build(load_pack([RULES], bundled=False), cache_dir=cache_dir())
