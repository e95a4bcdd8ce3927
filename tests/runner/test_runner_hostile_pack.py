"""Issue 10, item 1, end to end: `relaunch --apply` with a hostile contributed rule pack.

The fake vLLM fails on `--max-model-len 4096` with vLLM's real message; five contributed rules
match that line and ask to add `--trust-remote-code`, drop `--api-key`, set `LD_PRELOAD` to text
from the log, swap the model, and bind every interface. No attempt may run with any of them —
with or without `--allow-rule-actions`.
"""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import pytest

from qwen_triage.engine.scanner import compile_pack
from qwen_triage.rulepack.pack import load_pack
from qwen_triage.runner.deps import Deps
from qwen_triage.runner.loop import Run
from qwen_triage.runner.profile import RunSettings
from qwen_triage.runner.render import Printer
from qwen_triage.runner.vllm.argv import parse_vllm_argv
from tests.runner.helpers import FAKE_VLLM, free_port, kill_marked, make_model, wait_no_marked

PATTERN = r"User-specified max_model_len \((?P<n>\d{1,9})\) is greater than the derived max_model_len \((?P<what>[^)]{1,200})\)"
ACTIONS = [
    ("config.dtype_unsupported", '{type: set_arg, arg: "--trust-remote-code"}'),
    ("runtime.cpu_isa_unsupported", '{type: remove_arg, arg: "--api-key"}'),
    ("hardware.bar_space", '{type: set_env, name: LD_PRELOAD, value: "/tmp/{what}.so"}'),
    ("runtime.gpu_share_shim", '{type: set_arg, arg: "--model", value: "attacker/{what}"}'),
    ("server.port_in_use", '{type: set_arg, arg: "--host", value: "0.0.0.0"}'),
]
EXAMPLE = ("Value error, User-specified max_model_len (4096) is greater than the derived max_model_len "
           "(max_position_embeddings=512.0 or model_max_length=None in model's config.json).")


def _pack_dir(tmp: Path) -> Path:
    d = tmp / "contrib"
    d.mkdir()
    body = ["rules:"]
    for i, (cls, action) in enumerate(ACTIONS, 1):
        body += [
            f"  - id: contrib.evil{i}", f"    class: {cls}", f"    title: hostile rule {i}", "    severity: error",
            "    sources: [vllm]", "    match:", "      any:", f"        - '{PATTERN}'",
            "    extract: {n: int, what: str}", "    fix:", '      - step: "apply it"', f"        action: {action}",
            "    examples:", f'      match: ["{EXAMPLE}"]', '      no_match: ["INFO all is well"]',
        ]
    (d / "evil.yaml").write_text("\n".join(body) + "\n")
    return d


@pytest.mark.parametrize("allow", [False, True])
def test_hostile_pack_changes_nothing_in_any_attempt(tmp_path: Path, allow: bool) -> None:
    compiled = compile_pack(pack=load_pack([_pack_dir(tmp_path)]))
    model = make_model(tmp_path / "m")
    marker = uuid.uuid4().hex
    port = free_port()
    settings = RunSettings(
        launch=parse_vllm_argv([str(FAKE_VLLM), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                                "--api-key", "sk-real-key-0123456789", "--max-model-len", "4096"]),
        env={"VLLM_TARGET_DEVICE": "cpu"}, journal=tmp_path / "journal.jsonl", log_dir=tmp_path / "runs",
        apply=True, preflight=False, gpus=2, stop_when_ready=True, backoff=0, grace=2, release_timeout=10,
        ready_timeout=20, stall=30, health_interval=0.3, request_timeout=2, attempts=3,
    )
    out = io.StringIO()
    deps = Deps(compiled=lambda: compiled, printer=Printer(out), kernel_log=False, wait_poll=0.2,
                base_env={**os.environ, "QWEN_TRIAGE_TEST_MARK": marker}, allow_rule_actions=allow)
    try:
        res = Run(settings, deps).go()
    finally:
        left = wait_no_marked(marker, timeout=10)
        kill_marked(marker)
    assert left == []
    text = out.getvalue()
    assert res.attempts, text
    assert any(d.rule.startswith("contrib.evil") for d in res.attempts[0].diagnoses), text
    for a in res.attempts:
        assert "--trust-remote-code" not in a.argv
        assert a.argv[a.argv.index("--api-key") + 1] == "sk-real-key-0123456789"
        assert a.argv[a.argv.index("--host") + 1] == "127.0.0.1"
        assert str(model) in a.argv and not any("attacker/" in t for t in a.argv)
        assert "LD_PRELOAD" not in a.env
    assert res.exit_status == 3, text  # the five steps are the user's to take: printed, not applied
    assert text.count("apply it") >= 5, text  # ... and shown
    if not allow:
        assert "--allow-rule-actions" in text
    print(text)
