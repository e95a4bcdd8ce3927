"""Fleet channels behind one interface: the node check is one call, its consumers are registered by name.

`qwen-triage check` used to take 19 positional parameters and wire the NPD line, the textfile and the
Slurm drain by hand; now it parses, calls fleet.node_check.run(CheckOptions) and hands the result to
channels.
"""

from __future__ import annotations

import ast
import inspect

from qwen_triage.fleet import node_check
from qwen_triage.fleet.channels import CHANNELS, Channel, Published, build
from qwen_triage.fleet.check import CheckResult
from tests.import_graph import PACKAGE

from .conftest import bundled_policy


def test_npd_textfile_and_slurm_are_channels_registered_by_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert set(CHANNELS) == {"npd", "textfile", "slurm"}
    assert all(issubclass(c, Channel) and c.name == name for name, c in CHANNELS.items())
    result = CheckResult(status="ok", checked_at=1.0, seconds=0.0, boot_id="b", policy=bundled_policy())
    assert build("npd", max_output=80).publish(result) == Published(status=0, text="ok: no active diagnosis")
    prom = tmp_path / "q.prom"
    assert build("textfile", path=str(prom)).publish(result) == Published()
    assert "qwen_triage_up 1" in prom.read_text()
    assert build("textfile", path=str(prom)).publish(result.model_copy(update={"stored": True})) == Published()


def test_the_node_check_is_one_call_with_its_options() -> None:
    sig = inspect.signature(node_check.run)
    assert list(sig.parameters) == ["options"] and sig.return_annotation in ("CheckResult", CheckResult)


def test_no_function_of_the_check_command_takes_more_than_8_parameters() -> None:
    tree = ast.parse((PACKAGE / "cli" / "fleet.py").read_text())
    wide = [f"{f.name}: {n}" for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.Lambda))
            for n in [len(f.args.args) + len(f.args.kwonlyargs) + len(f.args.posonlyargs)] if n > 8
            for _ in [f] if hasattr(f, "name")]
    assert wide == []
