"""vLLM's own option table from the launch's interpreter, and the options a --config file sets.

The unit tests use a recorded probe answer of vLLM 0.32.0 (fixtures/runner/
vllm-probe-0.32.0.json, cut to a few options) and a fake interpreter that
prints it; the `vllm`-marked test at the end probes the real vLLM CPU build.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from qwen_triage.report.model import Diagnosis, validate
from qwen_triage.runner.fixplan import PlanContext, build_fix_plan
from qwen_triage.runner.layout import LayoutChoice
from qwen_triage.runner.vllm.argv import VllmArgsError, parse_vllm_argv
from qwen_triage.runner.vllm.config_file import read_config_args
from qwen_triage.runner.vllm.diff import render_diff
from qwen_triage.runner.vllm.edit import set_arg
from qwen_triage.runner.vllm.options import BUILTIN
from qwen_triage.runner.vllm.probe import (
    MARK,
    ProbeError,
    _read_cache,
    _write_cache,
    _cache_file,
    launch_interpreter,
    parse_launch,
    probe_launch,
    table_from,
)
from tests.runner.helpers import FIXTURES, VLLM_VENV

RECORDED = json.loads((FIXTURES / "vllm-probe-0.32.0.json").read_text())
CONFIG_YAML = FIXTURES / "vllm-config.yaml"  # what RECORDED["config_args"] was read from


@pytest.fixture(scope="module")
def table():
    return table_from(RECORDED, "/venv/bin/python")


def diagnosis(class_id: str, fix: list | None = None, facts: dict | None = None) -> Diagnosis:
    return validate(Diagnosis, {
        "class": class_id, "rule": "test.rule", "title": "test", "severity": "error", "summary": "",
        "facts": facts or {}, "evidence": [], "count": 1, "fix": fix or [],
    })


# --- the table ----------------------------------------------------------------------


def test_recorded_table(table):
    assert table.vllm_version == "0.32.0+cpu" and table.source == "probed: /venv/bin/python"
    assert {"--enforce-eager", "--trust-remote-code", "--headless"} <= table.bool_flags
    assert table.spec("--enforce-eager").negatable and not table.spec("--headless").negatable
    assert table.takes("--served-model-name") == "multi"
    assert table.takes("--hf-token") == "optional"
    assert table.takes("--seed") == "one"
    assert "--middleware" in table.append_flags
    assert table.canonical("-tp") == "--tensor-parallel-size"
    assert table.canonical("-O") == "--optimization-level"  # FlexibleArgumentParser's own rewrite
    assert "bfloat16" in table.spec("--dtype").choices
    assert table.spec("--tensor-parallel-size").default == 1
    # what the probe says agrees with the built-in table of 0.32.0
    for name in table.bool_flags:
        assert name in BUILTIN.bool_flags, name


def test_parse_with_the_probed_table_keeps_it_through_edits(table):
    launch = parse_vllm_argv(["vllm", "serve", "m", "--served-model-name", "a", "b", "-O", "3", "--seed", "-1"],
                             options=table)
    assert launch.options is table
    assert launch.get("--served-model-name") == "a b"
    assert launch.get("--optimization-level") == "3"
    assert launch.get("--seed") == "-1"
    edited = set_arg(launch, "-tp", 2)
    assert edited.options is table and edited.tensor_parallel_size == 2


# --- --config FILE -------------------------------------------------------------------


def test_our_config_reader_lists_what_vllm_lists(table):
    assert read_config_args(str(CONFIG_YAML), table) == RECORDED["config_args"]


@pytest.mark.parametrize("probed", [True, False], ids=["vllm-read-it", "read-here"])
def test_config_file_options_are_the_launchs_effective_values(table, probed):
    argv = ["vllm", "serve", "m", "--config", str(CONFIG_YAML), "--port", "8001"]
    if probed:
        launch = parse_vllm_argv(argv, options=table, config_args=RECORDED["config_args"])
    else:
        launch = parse_vllm_argv(argv)
    assert launch.config_file == str(CONFIG_YAML)
    assert launch.tensor_parallel_size == 2
    assert launch.max_model_len == 32_000
    assert launch.enforce_eager is False
    assert launch.get("--served-model-name") == "a b"
    assert launch.get("--compilation-config") == '{"mode": 3}'
    assert launch.port == 8001
    assert launch.to_argv() == argv  # the file's options are not written into the argv
    # the command line wins over the file, as in vLLM
    over = parse_vllm_argv([*argv, "-tp", "4"], options=table, config_args=RECORDED["config_args"])
    assert over.tensor_parallel_size == 4


def test_config_file_model_and_problems(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model: /models/m\ntensor_parallel_size: 3\n")
    launch = parse_vllm_argv(["python", "-m", "vllm.entrypoints.openai.api_server", "--config", str(cfg)])
    assert launch.model == "/models/m" and launch.tensor_parallel_size == 3
    with pytest.raises(VllmArgsError, match="cannot read"):
        parse_vllm_argv(["vllm", "serve", "m", "--config", str(tmp_path / "missing.yaml")])
    bad = tmp_path / "bad.yaml"
    bad.write_text("tensor-parallel-size: two\n")
    with pytest.raises(VllmArgsError, match="tensor-parallel-size"):
        parse_vllm_argv(["vllm", "serve", "m", "--config", str(bad)])
    obj = tmp_path / "obj.yaml"
    obj.write_text("port: !!python/object/apply:os.system ['id']\n")
    with pytest.raises(VllmArgsError, match="not valid YAML"):
        parse_vllm_argv(["vllm", "serve", "m", "--config", str(obj)])


def test_fix_plan_sees_the_config_files_layout_and_context(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("tensor-parallel-size: 2\nmax-model-len: 8192\n")
    launch = parse_vllm_argv(["vllm", "serve", "m", "--config", str(cfg)])

    # a layout of TP 1: the file's TP 2 must be overridden on the command line
    ctx = PlanContext(replan=lambda launch, env: LayoutChoice(tp=1, pp=1, dp=1, why="test"))
    plan = build_fix_plan([diagnosis("config.tp_indivisible")], launch, {}, ctx)
    assert plan.launch.tensor_parallel_size == 1
    assert plan.launch.to_argv()[-2:] == ["--tensor-parallel-size", "1"]
    assert "--tensor-parallel-size: 2 -> 1" in render_diff(plan.changes)

    # the KV cache: halve the file's --max-model-len
    plan = build_fix_plan([diagnosis("memory.kv_cache_insufficient")], launch, {}, PlanContext())
    assert plan.launch.max_model_len == 4096
    assert "--max-model-len: 8192 -> 4096" in render_diff(plan.changes)


# --- the interpreter and the probe ------------------------------------------------------


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_launch_interpreter(tmp_path):
    py = _exe(tmp_path / "python3", "#!/bin/sh\n")
    env = {"PATH": str(tmp_path)}
    (tmp_path / "d").mkdir()
    direct = _exe(tmp_path / "d" / "vllm", f"#!{py}\nimport sys\n")
    assert launch_interpreter([str(direct), "serve", "m"], env) == str(py)
    (tmp_path / "e").mkdir()
    via_env = _exe(tmp_path / "e" / "vllm", "#!/usr/bin/env python3\n")
    assert launch_interpreter([str(via_env), "serve", "m"], env) == str(py)
    (tmp_path / "p").mkdir()
    pip_sh = _exe(tmp_path / "p" / "vllm", f"#!/bin/sh\n'''exec' \"{py}\" \"$0\" \"$@\"\n' '''\n")
    assert launch_interpreter([str(pip_sh), "serve", "m"], env) == str(py)
    assert launch_interpreter(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], env) == str(py)
    assert launch_interpreter(["uv", "run", "vllm", "serve", "m"], env) is None
    assert launch_interpreter(["vllm", "serve", "m"], {"PATH": str(tmp_path / "nowhere")}) is None


@pytest.fixture
def fake_vllm(tmp_path):
    """A `vllm` whose interpreter answers every probe with the recorded answer, counting the calls."""
    answer = tmp_path / "answer.txt"
    answer.write_text(MARK + json.dumps(RECORDED) + "\n")
    calls = tmp_path / "calls"
    py = _exe(tmp_path / "python", f"#!/bin/sh\ncat >/dev/null\necho x >> {calls}\necho 'vLLM says hello'\ncat {answer}\n")
    vllm = _exe(tmp_path / "vllm", f"#!{py}\n")
    return vllm, py, calls


def test_probe_caches_the_table_per_interpreter_and_version(fake_vllm, tmp_path):
    vllm, py, calls = fake_vllm
    cache = tmp_path / "cache"
    argv = [str(vllm), "serve", "m", "--config", str(CONFIG_YAML)]
    first = probe_launch(argv, cache_dir=cache)
    assert not first.cached and first.interpreter == str(py)
    assert first.config_args == tuple(RECORDED["config_args"])
    assert len(calls.read_text().split()) == 2  # the version, then the table
    second = probe_launch(argv, cache_dir=cache)
    assert second.cached and second.config_args is None  # read here on a hit: no vLLM import again
    assert len(calls.read_text().split()) == 3  # the version only
    assert second.table == first.table.model_copy(update={"source": second.table.source})

    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].suffix == ".json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    data = json.loads(files[0].read_text())
    assert (data["interpreter"], data["vllm_version"]) == (str(py), "0.32.0+cpu")

    launch = parse_launch(argv, cache_dir=cache)
    assert launch.options.source == f"probed: {py}"
    assert launch.tensor_parallel_size == 2 and launch.max_model_len == 32_000


def test_cache_is_keyed_by_interpreter_and_version(table, tmp_path):
    path = _cache_file(tmp_path, "/venv/bin/python", table.vllm_version)
    _write_cache(path, "/venv/bin/python", table)
    assert _read_cache(path, "/venv/bin/python", table.vllm_version) is not None
    assert _cache_file(tmp_path, "/venv/bin/python", "0.33.0") != path
    assert _cache_file(tmp_path, "/other/python", table.vllm_version) != path
    assert _read_cache(path, "/venv/bin/python", "0.33.0") is None  # a file for another version is not used
    path.write_text("not json")
    assert _read_cache(path, "/venv/bin/python", table.vllm_version) is None


def test_no_vllm_means_the_built_in_table(tmp_path):
    py = _exe(tmp_path / "python", f"#!/bin/sh\ncat >/dev/null\necho '{MARK}{{\"error\": \"no vllm\"}}'\n")
    vllm = _exe(tmp_path / "vllm", f"#!{py}\n")
    with pytest.raises(ProbeError, match="no vllm"):
        probe_launch([str(vllm), "serve", "m"], cache_dir=tmp_path / "c")
    assert parse_launch([str(vllm), "serve", "m", "-tp", "2"], cache_dir=tmp_path / "c").options is BUILTIN
    silent = _exe(tmp_path / "python2", "#!/bin/sh\nexit 1\n")
    (tmp_path / "s").mkdir()
    vllm2 = _exe(tmp_path / "s" / "vllm", f"#!{silent}\n")
    with pytest.raises(ProbeError, match="no answer"):
        probe_launch([str(vllm2), "serve", "m"], cache_dir=tmp_path / "c")


# --- the real vLLM ------------------------------------------------------------------------


@pytest.mark.vllm
def test_probe_the_real_vllm(tmp_path):
    vllm = VLLM_VENV / "bin" / "vllm"
    if not vllm.exists():
        pytest.skip(f"no vLLM venv at {VLLM_VENV}: run scripts/setup-vllm.sh")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1")
    argv = [str(vllm), "serve", "m", "--config", str(CONFIG_YAML)]
    found = probe_launch(argv, env, cache_dir=tmp_path)
    assert found.interpreter == str(VLLM_VENV / "bin" / "python")
    assert found.vllm_version.startswith("0.32.0")
    # vLLM's own reading of the --config file, and its table, are the recorded ones
    assert list(found.config_args or []) == RECORDED["config_args"]
    recorded = {o["dest"]: o for o in RECORDED["options"]}
    for spec in found.table.options:
        if spec.dest in recorded:
            want = recorded[spec.dest]
            assert (list(spec.flags), spec.takes, spec.negatable, spec.append) == (
                want["flags"], want["takes"], want["negatable"], want["append"]), spec.dest
    assert len(found.table.options) > 200
    launch = parse_vllm_argv(argv, options=found.table, config_args=found.config_args)
    assert launch.tensor_parallel_size == 2 and launch.max_model_len == 32_000
    again = probe_launch(argv, env, cache_dir=tmp_path)
    assert again.cached and again.table.options == found.table.options
