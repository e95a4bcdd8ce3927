"""Hardening (issue 10, item 12): environment names from a profile are checked, printed commands quoted.

The attack: a profile `env:` key ``X=1 touch /tmp/pwned; Y`` was printed as is
in the working command, so pasting the command ran ``touch``.
"""

from __future__ import annotations

import shlex

import pytest

from qwen_triage.runner.profile import ProfileError, command_from, load_profile, valid_env_name
from qwen_triage.runner.render import command_text
from qwen_triage.runner.vllm.probe import parse_launch

ATTACK = "X=1 touch /tmp/pwned; Y"


def test_item12_profile_refuses_an_env_name_that_is_a_command(tmp_path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(f"command: vllm serve m\nenv:\n  '{ATTACK}': v\n")
    with pytest.raises(ProfileError, match="not an environment variable name"):
        load_profile(p)


def test_item12_good_names_still_load(tmp_path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("command: vllm serve m\nenv: {NCCL_DEBUG: WARN, _X1: 2}\n")
    assert load_profile(p).env == {"NCCL_DEBUG": "WARN", "_X1": "2"}


@pytest.mark.parametrize("name", ["A", "_a9", "NCCL_P2P_DISABLE"])
def test_item12_valid_names(name: str) -> None:
    assert valid_env_name(name)


@pytest.mark.parametrize("name", ["", "1A", "A-B", "A B", ATTACK, "A\n", "Ä", "A;B"])
def test_item12_invalid_names(name: str) -> None:
    assert not valid_env_name(name)


def test_item12_leading_assignment_with_an_odd_name_is_not_env() -> None:
    launch, env = command_from(None, ["NCCL_DEBUG=WARN", "vllm", "serve", "m"])
    assert env == {"NCCL_DEBUG": "WARN"}
    try:
        _launch, env = command_from(None, ["Ä=1", "vllm", "serve", "m"])
    except ProfileError:
        return
    assert "Ä" not in env


def test_item12_printed_command_quotes_values_and_odd_names() -> None:
    launch = parse_launch(["vllm", "serve", "m"])
    text = command_text(launch, {"NCCL_DEBUG": "$(touch /tmp/x)"})
    assert text.startswith("NCCL_DEBUG='$(touch /tmp/x)' vllm serve m")
    words = shlex.split(command_text(launch, {ATTACK: "v", "A": "b"}))
    assert words[0] == "env" and f"{ATTACK}=v" in words and words[-3:] == ["vllm", "serve", "m"]
