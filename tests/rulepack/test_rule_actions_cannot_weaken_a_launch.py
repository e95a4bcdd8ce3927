"""Issue 10, item 1: a contributed rule pack must not weaken a relaunched server.

The attack: one log line and a five-rule pack whose fix steps add
``--trust-remote-code``, drop ``--api-key``, set ``LD_PRELOAD`` to a path taken
from the log, swap the model for another repository, and bind the server to
every interface. Before the fix ``set_arg``/``remove_arg``/``set_env`` were
``safe`` whatever they named, so ``relaunch --apply`` made all five edits and
``rules lint`` was clean. Now none is applied — not even with
``--allow-rule-actions`` — and lint reports all five as errors.
"""

from __future__ import annotations

from qwen_triage.report.model import validate

from pathlib import Path

import pytest

from qwen_triage.authoring.lint.run import lint_paths
from qwen_triage.engine.scanner import compile_pack
from qwen_triage.engine.scanner import scan_paths
from qwen_triage.rulepack.actions import SetArg, SetEnv, arg_edit_reason
from qwen_triage.rulepack.pack import load_pack
from qwen_triage.runner.fixplan import PlanContext, build_fix_plan
from qwen_triage.runner.vllm.argv import parse_vllm_argv

LINE = ("ERROR 01-23 21:46:38 engine.py:88] preload /tmp/evil/libhook.so failed; "
        "see attacker/qwen-backdoor for a working model\n")

_RULE = """
  - id: contrib.{n}
    class: {cls}
    title: hostile rule {n}
    severity: error
    sources: [vllm]
    match:
      any:
        - 'preload (?P<lib>\\S{{1,200}}) failed; see (?P<repo>\\S{{1,200}}) for'
    extract:
      lib: str
      repo: str
    fix:
      - step: "do it"
        action: {action}
    examples:
      match: ["{example}"]
      no_match: ["INFO nothing to see"]
"""

ATTACK = [
    ("config.dtype_unsupported", '{type: set_arg, arg: "--trust-remote-code"}'),
    ("runtime.cpu_isa_unsupported", '{type: remove_arg, arg: "--api-key"}'),
    ("hardware.bar_space", '{type: set_env, name: LD_PRELOAD, value: "{lib}"}'),
    ("runtime.gpu_share_shim", '{type: set_arg, arg: "--model", value: "{repo}"}'),
    ("server.port_in_use", '{type: set_arg, arg: "--host", value: "0.0.0.0"}'),
]

COMMAND = ["vllm", "serve", "./qwen", "--api-key", "sk-real-key-123456789", "--host", "127.0.0.1",
           "--max-model-len", "4096"]


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    rules = tmp_path / "rules"
    rules.mkdir()
    body = "rules:" + "".join(
        _RULE.format(n=i, cls=cls, action=action, example=LINE.strip().replace('"', '\\"'))
        for i, (cls, action) in enumerate(ATTACK, 1)
    )
    (rules / "contrib.yaml").write_text(body)
    log = tmp_path / "server.log"
    log.write_text(LINE)
    return rules, log


def _plan(rules: Path, log: Path, untrusted: bool):  # type: ignore[no-untyped-def]
    pack = load_pack([rules])
    report = scan_paths([str(log)], compile_pack(pack=pack))
    diags = [d for d in report.diagnoses if d.rule.startswith("contrib.")]
    assert sorted(d.rule for d in diags) == [f"contrib.{i}" for i in range(1, 6)]
    ids = frozenset(d.rule for d in diags) if untrusted else frozenset()
    launch = parse_vllm_argv(COMMAND)
    return build_fix_plan(report.diagnoses, launch, {}, PlanContext(untrusted_rules=ids))


@pytest.mark.parametrize("allow_rule_actions", [False, True])
def test_relaunch_applies_none_of_the_five(hostile, allow_rule_actions: bool) -> None:
    plan = _plan(*hostile, untrusted=not allow_rule_actions)
    argv = plan.launch.to_argv()
    assert "--trust-remote-code" not in argv
    assert argv[argv.index("--api-key") + 1] == "sk-real-key-123456789"
    assert "LD_PRELOAD" not in plan.env
    assert plan.launch.model == "./qwen"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert not plan.changed
    # each is printed for the user instead, and the run stops for them
    assert plan.needs_user
    assert {i.diagnosis.split("]")[0][1:] for i in plan.instructions} >= {f"contrib.{i}" for i in range(1, 6)}
    assert all(i.safety != "safe" for i in plan.instructions if i.diagnosis.startswith("[contrib."))


def test_untrusted_rules_change_nothing_even_when_safe(tmp_path: Path) -> None:
    """A contributed rule with an allow-listed edit is still only printed without --allow-rule-actions."""
    from qwen_triage.report.model import Diagnosis, FixOut
    from qwen_triage.rulepack.severity import Severity

    d = validate(Diagnosis, {
        "class": "memory.gpu_oom", "rule": "contrib.mem", "title": "t", "severity": Severity.error, "summary": "",
        "facts": {}, "evidence": [], "count": 1,
        "fix": [FixOut(step="lower", action={"type": "set_arg", "arg": "--gpu-memory-utilization", "value": "0.5"})],
    })
    launch = parse_vllm_argv(["vllm", "serve", "./m"])
    plan = build_fix_plan([d], launch, {}, PlanContext(untrusted_rules=frozenset({"contrib.mem"})))
    assert not plan.changed and plan.needs_user
    assert "--allow-rule-actions" in plan.instructions[0].step
    plan = build_fix_plan([d], launch, {}, PlanContext())
    assert [c.name for c in plan.changes] == ["--gpu-memory-utilization"]


def test_lint_flags_all_five(hostile) -> None:
    rules, _ = hostile
    problems = [p for p in lint_paths([rules]) if p.level == "error"]
    flagged = {p.rule for p in problems if "never" in p.message}
    assert flagged == {f"contrib.{i}" for i in range(1, 6)}, [str(p) for p in problems]


@pytest.mark.parametrize("value", ["../../etc/passwd", "1e400", "4096; rm -rf /", "-1", "9" * 400])
def test_facts_are_values_of_the_right_type_only(value: str) -> None:
    assert SetArg(type="set_arg", arg="--max-model-len", value=value).safety.value == "caution"
    assert arg_edit_reason("--max-model-len", value)
    assert SetEnv(type="set_env", name="NCCL_P2P_DISABLE", value=value).safety.value == "caution"


def test_allow_listed_edits_stay_safe() -> None:
    assert SetArg(type="set_arg", arg="-tp", value="4").safety.value == "safe"
    assert SetArg(type="set_arg", arg="--max-num-batched-tokens", value="{max_len}").safety.value == "safe"
    assert SetEnv(type="set_env", name="NCCL_P2P_DISABLE", value="1").safety.value == "safe"
    assert SetArg(type="set_arg", arg="--tokenizer", value="x/y").safety.value == "caution"
    assert SetEnv(type="set_env", name="HTTPS_PROXY", value="http://x").safety.value == "caution"


# -- issue 29 §2: which GPUs a relaunch runs on -----------------------------------------------------------------

def _devices_rule(value: str) -> str:
    return "rules:" + _RULE.format(n=9, cls="hardware.xid_app", example=LINE.strip().replace('"', '\\"'),
                                   action=f'{{type: set_env, name: CUDA_VISIBLE_DEVICES, value: "{value}"}}')


def test_a_pack_that_fills_cuda_visible_devices_from_a_fact_is_refused(tmp_path: Path) -> None:
    from qwen_triage.rulepack.errors import RuleFileError

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "contrib.yaml").write_text(_devices_rule("{lib}").replace("\\S{1,200}", "[0-9,]{1,20}"))
    with pytest.raises(RuleFileError, match="never filled from a log fact"):
        load_pack([rules])


@pytest.mark.parametrize(("value", "applied"), [("6,7", False), ("0,1,9", False), ("1,2", True), ("1,1", False)])
def test_allowed_rule_actions_only_narrow_the_launchs_own_gpus(value: str, applied: bool) -> None:
    from qwen_triage.report.model import Diagnosis, FixOut
    from qwen_triage.rulepack.severity import Severity

    d = validate(Diagnosis, {
        "class": "hardware.xid_app", "rule": "contrib.gpus", "title": "t", "severity": Severity.error,
        "summary": "", "facts": {}, "evidence": [], "count": 1,
        "fix": [FixOut(step="move", action={"type": "set_env", "name": "CUDA_VISIBLE_DEVICES", "value": value})],
    })
    launch = parse_vllm_argv(["vllm", "serve", "./m"])
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    plan = build_fix_plan([d], launch, env, PlanContext(gpu_count=8))  # --allow-rule-actions: rules are trusted
    assert (plan.env.get("CUDA_VISIBLE_DEVICES") == value) is applied
    if not applied:
        assert plan.env.get("CUDA_VISIBLE_DEVICES") == "0,1,2,3" and plan.needs_user
