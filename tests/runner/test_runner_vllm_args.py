"""qwen_triage.runner.vllm: parse, edit and diff vLLM launch argv (no vLLM needed)."""

from __future__ import annotations

import pytest

from qwen_triage.rulepack.actions import CheckPort, RemoveArg, SetArg, SetEnv, UnsetEnv
from qwen_triage.runner.vllm.argv import (
    ArgToken,
    EntryPoint,
    VllmArgsError,
    VllmLaunch,
    parse_command_line,
    parse_vllm_argv,
)
from qwen_triage.runner.vllm.diff import Change, diff_launches, render_diff
from qwen_triage.runner.vllm.edit import apply_action, apply_edits, remove_arg, set_arg
from qwen_triage.runner.vllm.options import canonical_flag

API = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
MODEL = "/models/Qwen2.5-7B-Instruct"


def serve(*args: str) -> VllmLaunch:
    return parse_vllm_argv(["vllm", "serve", MODEL, *args])


def api(*args: str) -> VllmLaunch:
    return parse_vllm_argv([*API, "--model", MODEL, *args])


# --- entry points ---------------------------------------------------------------------


def test_serve_entry_point_typed_fields():
    launch = serve(
        "--host", "0.0.0.0", "--port", "8001", "--tensor-parallel-size", "2",
        "--pipeline-parallel-size", "2", "--data-parallel-size", "2", "--max-model-len", "8192",
        "--gpu-memory-utilization", "0.85", "--dtype", "bfloat16", "--enforce-eager",
        "--disable-custom-all-reduce",
    )
    assert launch.entry is EntryPoint.serve
    assert launch.prefix == ("vllm", "serve")
    assert launch.model == MODEL
    assert launch.host == "0.0.0.0"
    assert launch.port == 8001
    assert (launch.tensor_parallel_size, launch.pipeline_parallel_size, launch.data_parallel_size) == (2, 2, 2)
    assert launch.max_model_len == 8192
    assert launch.gpu_memory_utilization == 0.85
    assert launch.dtype == "bfloat16"
    assert launch.enforce_eager is True
    assert launch.disable_custom_all_reduce is True
    assert launch.other_args == []
    assert launch.world_size == 4


def test_api_server_entry_point():
    launch = parse_vllm_argv([*API, "--model", MODEL, "--port=8002", "--tensor-parallel-size=4"])
    assert launch.entry is EntryPoint.api_server
    assert launch.prefix == tuple(API)
    assert launch.model == MODEL
    assert launch.port == 8002
    assert launch.tensor_parallel_size == 4


def test_api_server_model_equals_form_and_attached_module():
    launch = parse_vllm_argv(["python", "-mvllm.entrypoints.openai.api_server", f"--model={MODEL}"])
    assert launch.entry is EntryPoint.api_server
    assert launch.model == MODEL


def test_api_server_positional_is_not_the_model():
    # vLLM 0.32's api_server parses a positional model_tag but never uses it.
    with pytest.raises(VllmArgsError, match="no model"):
        parse_vllm_argv([*API, MODEL, "--port", "8000"])


def test_defaults_are_none():
    launch = serve()
    assert launch.host is None and launch.port is None and launch.tensor_parallel_size is None
    assert launch.enforce_eager is None and launch.max_model_len is None
    assert launch.effective_port == 8000
    assert launch.world_size == 1


@pytest.mark.parametrize(
    "prefix",
    [
        ["vllm", "serve"],
        ["/opt/venv/bin/vllm", "serve"],
        ["uv", "run", "vllm", "serve"],
        ["python", "-m", "vllm.entrypoints.cli.main", "serve"],
        ["/usr/bin/python3.11", "-u", "-m", "vllm.entrypoints.cli.main", "serve"],
    ],
)
def test_serve_prefixes(prefix):
    launch = parse_vllm_argv([*prefix, MODEL, "-tp", "2"])
    assert launch.entry is EntryPoint.serve
    assert launch.prefix == tuple(prefix)
    assert launch.model == MODEL
    assert launch.tensor_parallel_size == 2


def test_serve_with_deprecated_model_flag():
    launch = parse_vllm_argv(["vllm", "serve", "--model", MODEL, "--port", "8000"])
    assert launch.model == MODEL
    assert launch.port == 8000


def test_serve_model_after_boolean_flag():
    launch = parse_vllm_argv(["vllm", "serve", "--enforce-eager", MODEL])
    assert launch.model == MODEL
    assert launch.enforce_eager is True


@pytest.mark.parametrize(
    "argv",
    [
        ["bash", "-c", "vllm serve x"],
        ["ollama", "serve"],
        ["python", "-m", "vllm.entrypoints.api_server", "--model", "x"],
        ["vllm", "bench", "serve"],
        [],
    ],
)
def test_not_a_vllm_launch(argv):
    with pytest.raises(VllmArgsError, match="not a vLLM launch"):
        parse_vllm_argv(argv)


def test_missing_model():
    with pytest.raises(VllmArgsError, match="no model"):
        parse_vllm_argv(["vllm", "serve", "--port", "8000"])


# --- flag forms ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--tensor-parallel-size", "2", "--max-model-len", "4096", "--port", "9000"],
        ["--tensor-parallel-size=2", "--max-model-len=4096", "--port=9000"],
        ["--tensor_parallel_size", "2", "--max_model_len=4096", "--port", "9000"],
        ["-tp", "2", "--max-model-len", "4k", "--port=9000"],
        ["-tp=2", "--max-model-len", "4096", "--port", "9000"],
    ],
)
def test_flag_forms_mean_the_same(args):
    launch = serve(*args)
    assert launch.tensor_parallel_size == 2
    assert launch.port == 9000
    assert launch.max_model_len in (4096, 4000)


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "serve", MODEL, "-tp", "2", "--max_model_len=32k", "--enforce-eager", "--port", "8001"],
        [*API, "--model", MODEL, "--gpu_memory_utilization=0.9", "--no-enforce-eager", "--trust-remote-code"],
        ["vllm", "serve", MODEL, "--served-model-name", "a", "b", "-O3", "--compilation-config.mode", "3"],
        ["vllm", "serve", MODEL, "-cc.mode=none", "--hf-overrides", '{"rope_scaling": null}', "--seed", "-1"],
        ["vllm", "serve", MODEL, "--some-future-flag", "v", "--another-future-switch", "--port", "1"],
        ["vllm", "serve", MODEL, "--api-key", "k", "--", "extra"],
    ],
)
def test_round_trip_preserves_argv(argv):
    launch = parse_vllm_argv(argv)
    assert launch.to_argv() == argv
    assert parse_vllm_argv(launch.to_argv()) == launch
    assert VllmLaunch.model_validate(launch.model_dump()) == launch
    assert VllmLaunch.model_validate_json(launch.model_dump_json()) == launch


def test_canonical_flag():
    assert canonical_flag("--tensor_parallel_size") == "--tensor-parallel-size"
    assert canonical_flag("-tp") == "--tensor-parallel-size"
    assert canonical_flag("-cc.mode") == "--compilation-config.mode"
    # vLLM rewrites '_' only before the first '.'
    assert canonical_flag("--compilation_config.some_key") == "--compilation-config.some_key"
    assert canonical_flag("-x") == "-x"


def test_boolean_flags():
    assert serve("--enforce-eager").enforce_eager is True
    assert serve("--no-enforce-eager").enforce_eager is False
    assert serve("--enforce_eager").enforce_eager is True
    assert serve("--enforce-eager", "--no-enforce-eager").enforce_eager is False
    assert serve("--no-disable-custom-all-reduce").disable_custom_all_reduce is False
    tok = serve("--no-enforce-eager").args[-1]
    assert tok.name == "--enforce-eager" and tok.negated and tok.values == ()


def test_boolean_flag_does_not_swallow_next_token():
    launch = serve("--trust-remote-code", "--port", "8000")
    assert launch.port == 8000
    assert launch.other_args == [ArgToken(name="--trust-remote-code", written="--trust-remote-code")]


def test_last_occurrence_wins():
    launch = serve("--port", "1", "-tp", "2", "--port=2", "--tensor_parallel_size", "4")
    assert launch.port == 2
    assert launch.tensor_parallel_size == 4
    assert [t.written for t in launch.find("--tensor-parallel-size")] == ["-tp", "--tensor_parallel_size"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("4096", 4096), ("32k", 32000), ("32K", 32768), ("1M", 2**20), ("1.5k", 1500), ("auto", -1), ("-1", -1)],
)
def test_max_model_len_human_readable(value, expected):
    assert serve("--max-model-len", value).max_model_len == expected


def test_multi_value_and_unknown_flags_preserved_in_order():
    launch = serve(
        "--served-model-name", "qwen", "qwen-7b", "--port", "8000", "--future-opt", "x",
        "--kv-cache-dtype", "fp8", "--future-switch", "--enable-prefix-caching",
    )
    assert launch.get("--served-model-name") == "qwen qwen-7b"
    assert [a.name for a in launch.other_args] == [
        "--served-model-name", "--future-opt", "--kv-cache-dtype", "--future-switch", "--enable-prefix-caching",
    ]
    assert launch.get("--future-opt") == "x"
    assert launch.get("--future-switch") == "true"


def test_negative_number_is_a_value():
    assert serve("--seed", "-1").get("--seed") == "-1"
    assert serve("--max-model-len", "-1").max_model_len == -1


def test_optimization_level_forms():
    for arg, val in (("-O3", "3"), ("-O=2", "2"), ("-Odecode", "decode")):
        launch = serve(arg)
        assert launch.get("--optimization-level") == val
        assert launch.to_argv()[-1] == arg


@pytest.mark.parametrize(
    "args",
    [["--port", "eighty"], ["--tensor-parallel-size", "two"], ["--gpu-memory-utilization", "high"],
     ["--max-model-len", "1.5K"], ["--enforce-eager=yes"]],
)
def test_bad_values_rejected(args):
    with pytest.raises(VllmArgsError):
        serve(*args)


def test_value_flag_without_value():
    with pytest.raises(VllmArgsError, match="needs a value"):
        serve("--port")
    with pytest.raises(VllmArgsError, match="needs a value"):
        serve("--max-model-len", "--enforce-eager")


def test_parse_command_line_with_env():
    launch, env = parse_command_line(
        f"CUDA_VISIBLE_DEVICES=0,1 NCCL_P2P_DISABLE=1 vllm serve {MODEL} -tp 2 --port 8000"
    )
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_DISABLE": "1"}
    assert launch.tensor_parallel_size == 2
    launch2, env2 = parse_command_line(f"env A=1 python -m vllm.entrypoints.openai.api_server --model '{MODEL}'")
    assert env2 == {"A": "1"} and launch2.model == MODEL


# --- edits ----------------------------------------------------------------------------------


def test_set_existing_keeps_spelling_and_position():
    launch = serve("-tp", "6", "--port", "8000")
    new = set_arg(launch, "--tensor-parallel-size", 4)
    assert new.to_argv() == ["vllm", "serve", MODEL, "-tp", "4", "--port", "8000"]
    assert launch.tensor_parallel_size == 6  # the original is untouched
    new2 = set_arg(serve("--max_model_len=4096", "--port", "1"), "--max-model-len", "2048")
    assert new2.to_argv() == ["vllm", "serve", MODEL, "--max_model_len=2048", "--port", "1"]


def test_set_new_appends():
    new = set_arg(serve("--port", "8000"), "--gpu-memory-utilization", 0.8)
    assert new.to_argv()[-2:] == ["--gpu-memory-utilization", "0.8"]
    assert new.gpu_memory_utilization == 0.8


def test_set_collapses_duplicates_into_last():
    launch = serve("--port", "1", "--enforce-eager", "--port=2")
    new = set_arg(launch, "--port", 3)
    assert new.to_argv() == ["vllm", "serve", MODEL, "--enforce-eager", "--port=3"]


def test_set_boolean():
    launch = serve("--no-enforce-eager", "--port", "1")
    on = set_arg(launch, "--enforce-eager")
    assert on.to_argv() == ["vllm", "serve", MODEL, "--enforce-eager", "--port", "1"]
    assert on.enforce_eager is True
    off = set_arg(on, "--enforce-eager", False)
    assert off.to_argv() == ["vllm", "serve", MODEL, "--no-enforce-eager", "--port", "1"]
    assert set_arg(on, "--no-enforce-eager").enforce_eager is False
    assert set_arg(on, "--enforce-eager", "false").enforce_eager is False
    assert set_arg(serve(), "--disable-custom-all-reduce").to_argv()[-1] == "--disable-custom-all-reduce"
    with pytest.raises(VllmArgsError, match="boolean"):
        set_arg(on, "--enforce-eager", "7")


def test_set_value_flag_errors():
    with pytest.raises(VllmArgsError, match="needs a value"):
        set_arg(serve(), "--port")
    with pytest.raises(VllmArgsError):
        set_arg(serve(), "--port", "not-a-port")
    with pytest.raises(VllmArgsError, match="one value"):
        set_arg(serve(), "--port", ["1", "2"])
    with pytest.raises(VllmArgsError, match="not an option"):
        set_arg(serve(), "port", 1)


def test_set_multi_value():
    new = set_arg(serve("--served-model-name", "a"), "--served-model-name", ["b", "c"])
    assert new.to_argv()[-3:] == ["--served-model-name", "b", "c"]


def test_set_model_both_entries():
    s = set_arg(serve("--port", "1"), "--model", "/models/other")
    assert s.to_argv() == ["vllm", "serve", "/models/other", "--port", "1"]
    a = set_arg(api("--port", "1"), "--model", "/models/other")
    assert a.to_argv() == [*API, "--model", "/models/other", "--port", "1"]
    d = set_arg(parse_vllm_argv(["vllm", "serve", "--port", "1", f"--model={MODEL}"]), "--model", "m2")
    assert d.to_argv() == ["vllm", "serve", "--port", "1", "--model=m2"]


def test_remove_all_spellings():
    launch = serve("-tp", "2", "--port", "1", "--tensor_parallel_size=4", "--enforce-eager", "--no-enforce-eager")
    new = remove_arg(remove_arg(launch, "--tensor-parallel-size"), "--enforce-eager")
    assert new.to_argv() == ["vllm", "serve", MODEL, "--port", "1"]
    assert new.tensor_parallel_size is None and new.enforce_eager is None


def test_remove_absent_is_noop_and_model_is_protected():
    launch = serve("--port", "1")
    assert remove_arg(launch, "--max-model-len") == launch
    with pytest.raises(VllmArgsError, match="model"):
        remove_arg(launch, "--model")


def test_apply_action_vocabulary():
    launch, env = serve("-tp", "6"), {"A": "1", "B": "2"}
    launch, env = apply_action(launch, env, SetArg(type="set_arg", arg="-tp", value="4"))
    launch, env = apply_action(launch, env, SetArg(type="set_arg", arg="--enforce-eager"))
    launch, env = apply_action(launch, env, RemoveArg(type="remove_arg", arg="--enforce_eager"))
    launch, env = apply_action(launch, env, SetEnv(type="set_env", name="C", value="3"))
    launch, env = apply_action(launch, env, UnsetEnv(type="unset_env", name="A"))
    assert launch.to_argv() == ["vllm", "serve", MODEL, "-tp", "4"]
    assert env == {"B": "2", "C": "3"}
    with pytest.raises(VllmArgsError, match="check_port"):
        apply_action(launch, env, CheckPort(type="check_port"))


# --- diffs --------------------------------------------------------------------------------------


def test_diff_is_by_meaning_not_spelling():
    a = parse_vllm_argv(["vllm", "serve", MODEL, "-tp", "2", "--port", "8000"])
    b = parse_vllm_argv(["vllm", "serve", "--port=8000", MODEL, "--tensor_parallel_size=2"])
    assert diff_launches(a, {}, b, {}) == []
    assert render_diff([]) == "(no changes)\n"


def test_diff_with_reasons_and_render():
    before = serve("-tp", "6", "--enforce-eager", "--port", "8000")
    after = set_arg(remove_arg(before, "--enforce-eager"), "-tp", 4)
    after = set_arg(after, "--disable-custom-all-reduce")
    changes = diff_launches(
        before,
        {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5", "HF_TOKEN": "hf_secret"},
        after,
        {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "NCCL_P2P_DISABLE": "1", "HF_TOKEN": "hf_other"},
        reasons={
            "--tensor-parallel-size": "4 attention heads are not divisible by 6",
            "CUDA_VISIBLE_DEVICES": "tp 4 uses 4 GPUs",
        },
        default_reason="rule X",
    )
    assert [(c.kind, c.name, c.op) for c in changes] == [
        ("arg", "--tensor-parallel-size", "change"),
        ("arg", "--disable-custom-all-reduce", "add"),
        ("arg", "--enforce-eager", "remove"),
        ("env", "CUDA_VISIBLE_DEVICES", "change"),
        ("env", "HF_TOKEN", "change"),
        ("env", "NCCL_P2P_DISABLE", "add"),
    ]
    assert changes[0] == Change(
        kind="arg", name="--tensor-parallel-size", before="6", after="4",
        reason="4 attention heads are not divisible by 6",
    )
    assert render_diff(changes) == (
        "~ --tensor-parallel-size: 6 -> 4                   # 4 attention heads are not divisible by 6\n"
        "+ --disable-custom-all-reduce                      # rule X\n"
        "- --enforce-eager                                  # rule X\n"
        "~ env CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 -> 0,1,2,3  # tp 4 uses 4 GPUs\n"
        "~ env HF_TOKEN=*** -> ***                          # rule X\n"
        "+ env NCCL_P2P_DISABLE=1                           # rule X\n"
    )


def test_diff_boolean_flip_model_change_and_removed_env():
    before = api("--enforce-eager")
    after = set_arg(set_arg(before, "--enforce-eager", False), "--model", "/models/small")
    changes = diff_launches(before, {"X": "1"}, after, {})
    text = render_diff(changes)
    assert "~ model: /models/Qwen2.5-7B-Instruct -> /models/small" in text
    assert "~ --enforce-eager -> --no-enforce-eager" in text
    assert "- env X=1" in text
    assert "#" not in text  # no reasons given


def test_diff_command_change():
    a = serve("--port", "1")
    b = parse_vllm_argv([*API, "--model", MODEL, "--port", "1"])
    changes = diff_launches(a, {}, b, {}, reasons={"command": "use the api_server entry point"})
    assert [(c.kind, c.op) for c in changes] == [("command", "change")]
    assert render_diff(changes).startswith("~ command: vllm serve -> python3 -m vllm.entrypoints.openai.api_server")


def test_diff_masks_api_key():
    a = serve("--api-key", "sekrit")
    b = set_arg(a, "--api-key", "other")
    text = render_diff(diff_launches(a, {}, b, {}))
    assert "sekrit" not in text and "other" not in text and "--api-key: *** -> ***" in text


def test_apply_edits_collects_reasons():
    launch, env = serve("-tp", "6", "--max-model-len", "65536"), {"VLLM_USE_V1": "0"}
    result = apply_edits(
        launch,
        env,
        [
            (SetArg(type="set_arg", arg="--tensor-parallel-size", value="4"), "heads 4 % tp 6 != 0"),
            (SetArg(type="set_arg", arg="--max_model_len", value="32768"), "KV cache too small"),
            (SetArg(type="set_arg", arg="--max-model-len", value="16384"), "still too small"),
            (UnsetEnv(type="unset_env", name="VLLM_USE_V1"), "V0 is gone"),
        ],
    )
    assert result.launch.to_argv() == ["vllm", "serve", MODEL, "-tp", "4", "--max-model-len", "16384"]
    assert result.env == {}
    assert launch.tensor_parallel_size == 6 and env == {"VLLM_USE_V1": "0"}
    assert [(c.name, c.before, c.after, c.reason) for c in result.changes] == [
        ("--tensor-parallel-size", "6", "4", "heads 4 % tp 6 != 0"),
        ("--max-model-len", "65536", "16384", "KV cache too small; still too small"),
        ("VLLM_USE_V1", "0", None, "V0 is gone"),
    ]
