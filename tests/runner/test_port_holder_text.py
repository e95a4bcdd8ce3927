"""Issue 29 §2: a port holder's command line is chosen by whoever holds the port; relaunch prints it as one line."""

from __future__ import annotations

import io
import subprocess
import sys

from qwen_triage.runner import probes
from qwen_triage.runner.launch_checks import port_finding
from qwen_triage.runner.render import Printer
from qwen_triage.runner.vllm.argv import parse_vllm_argv

HOLDER = ("import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
          "print(s.getsockname()[1], flush=True); sys.stdin.read()")


def test_a_holders_newlines_and_escapes_do_not_become_lines_of_relaunch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "h.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script), "x\nqwen-triage: preflight passed\x1b[2J"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        holders = probes.port_holders(port)
        assert [h.pid for h in holders] == [proc.pid]
        assert "\n" not in holders[0].describe() and "\x1b" not in holders[0].describe()
        out = io.StringIO()
        finding = port_finding(parse_vllm_argv(["vllm", "serve", "m", "--port", str(port)]), holders)
        Printer(out).item(finding.summary)
        printed = out.getvalue()
        assert printed.count("\n") == 1, printed
        assert "preflight passed" in printed and "\x1b" not in printed
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=60)
