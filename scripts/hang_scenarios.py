"""Record genuine multi-rank hang scenarios as fixtures (fixtures/hang/<name>/).

Drives torchrun (gloo backend, CPU) from a venv that has torch — not the project's environment:

    python scripts/hang_scenarios.py --torchrun /root/.cache/qwen-triage/vllm-venv/bin/torchrun [NAME ...]

Each scenario writes its logs as torchrun left them (one combined log, a --log-dir tree of per-rank files, or one
log per "host": `--nnodes 2` on 127.0.0.1, each node in its own UTS namespace with its own host name when
`unshare` works) and an `expected.yaml` naming the culprit the scenario planted. tests/hang reads the recordings;
the suite never needs torch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "hang_worker.py"


@dataclass
class Scenario:
    name: str
    mode: str
    nproc: int
    bad: int = -1  # the rank that misbehaves (-1: none)
    step: int = 3
    nnodes: int = 1
    log_dir: bool = False  # torchrun --log-dir --tee 3: per-rank files
    env: dict[str, str] = field(default_factory=dict)
    what: str = ""
    # what the analysis should say: the culprit (None for healthy runs), or suspects when the log cannot decide
    culprit: int | None = None
    suspects: list[int] = field(default_factory=list)
    culprit_host: str | None = None  # a host the logs should name where no rank can be (mode hostdown)
    flight: bool = False  # Flight Recorder on; each rank's dump to fr/rank_<N> (HANG_FR_DUMP)


SCENARIOS = [
    Scenario("w4-sleep", "sleep", 4, bad=2, culprit=2, what="rank 2 sleeps at step 3; the others time out in all_reduce"),
    Scenario("w4-crash", "crash", 4, bad=1, step=2, culprit=1, what="rank 1 raises at step 2"),
    Scenario("w4-kill", "kill", 4, bad=3, step=2, culprit=3, what="rank 3 SIGKILLs itself at step 2"),
    Scenario("w6-desync", "desync", 6, bad=4, culprit=4, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
             what="rank 4 calls broadcast where the others call all_reduce (TORCH_DISTRIBUTED_DEBUG=DETAIL)"),
    Scenario("w6-shape", "shape", 6, bad=5, culprit=5, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
             what="rank 5 all_reduces 8 elements where the others reduce 4 (TORCH_DISTRIBUTED_DEBUG=DETAIL)"),
    Scenario("w6-sleep-logdir", "sleep", 6, bad=4, log_dir=True, culprit=4,
             what="rank 4 sleeps; torchrun --log-dir --tee 3 writes per-rank files"),
    Scenario("w4-monitored", "monitored", 4, bad=3, culprit=3,
             what="rank 3 sleeps while the others wait in monitored_barrier"),
    Scenario("w4-subgroup", "subgroup", 4, bad=1, culprit=1, env={"HANG_WORLD_ENDS": "1"},
             what="rank 1 sleeps before an all_reduce of the subgroup [0, 1]; ranks 2 and 3 finish their work and "
                  "exit 0: only the subgroup hangs"),
    Scenario("w4-subgroup-undecided", "subgroup", 4, bad=1, suspects=[0, 1], env={"HANG_SUBGROUP_TIMEOUT": "8"},
             what="as w4-subgroup with one timeout for all: the launcher stops both subgroup members before either "
                  "says anything, so the logs cannot tell rank 1 from rank 0"),
    Scenario("n2-sleep", "sleep", 3, bad=4, nnodes=2, culprit=4,
             what="two nodes of 3 ranks on loopback; rank 4 (node 1) sleeps at step 3"),
    Scenario("n2-hostdown", "hostdown", 3, bad=4, nnodes=2, suspects=[], culprit_host="node-b",
             what="two nodes of 3 ranks on loopback; at step 3 node-b is lost: its launcher and all its workers are "
                  "SIGKILLed at once (its log just stops); node-a's ranks lose their peers"),
    Scenario("n2-lateinit", "lateinit", 3, bad=4, nnodes=2, culprit=4,
             what="two nodes of 3 ranks on loopback; rank 4 (node-b) is still loading when the others enter "
                  "init_process_group: they time out in the group's init, it never reaches it"),
    Scenario("n2-latenode", "latenode", 3, bad=1, nnodes=2, culprit=None, culprit_host="node-b",
             env={"TORCH_CPP_LOG_LEVEL": "INFO", "LOGLEVEL": "INFO"},
             what="two nodes of 3 ranks on loopback, torch's INFO logs on; every rank of node-b is still loading when "
                  "node-a's enter init_process_group: node-a's time out in the group's init, node-b's never reach it"),
    Scenario("w4-fr", "sleep", 4, bad=2, culprit=2, flight=True, env={"HANG_FR_ON_TERM": "1"},
             what="rank 2 sleeps at step 3; every rank writes its Flight Recorder dump (fr/rank_N) when its collective "
                  "fails or the launcher's SIGTERM comes"),
    Scenario("w4-fr-culprit-undumped", "sleep", 4, bad=2, culprit=2, flight=True,
             what="as w4-fr, dumps written only when a collective fails: the sleeping rank 2 leaves none"),
    Scenario("w4-fr-healthy", "none", 4, flight=True, env={"HANG_FR_AT_END": "1"},
             what="a healthy run; every rank writes its Flight Recorder dump at the end"),
    Scenario("w4-healthy", "none", 4, what="a healthy run"),
    Scenario("n2-healthy", "none", 2, nnodes=2, what="a healthy two-node run"),
]


def _node_cmd(torchrun: str, sc: Scenario, node: int, port: int, log_root: Path | None) -> list[str]:
    cmd = [torchrun, f"--nproc-per-node={sc.nproc}", f"--nnodes={sc.nnodes}", f"--node-rank={node}",
           "--master-addr=127.0.0.1", f"--master-port={port}"]
    if log_root is not None:
        cmd += [f"--log-dir={log_root}", "--tee=3"]
    cmd.append(str(WORKER))
    host = f"node-{'ab'[node]}"
    if sc.nnodes > 1 and shutil.which("unshare") and os.geteuid() == 0:
        return ["unshare", "-u", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *cmd]
    return cmd


def _lose_host(node: subprocess.Popen, marker: Path) -> None:
    """Once the chosen rank touches ``marker``: SIGKILL the node's launcher and every worker it started, all at
    once (the workers run in sessions of their own: the process tree, not a process group)."""
    import psutil

    while not marker.exists() and node.poll() is None:
        time.sleep(0.05)
    marker.unlink(missing_ok=True)
    try:
        tree = [psutil.Process(node.pid), *psutil.Process(node.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in tree:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def record(torchrun: str, sc: Scenario, out: Path, port: int) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    marker = out / ".host-down"
    env = dict(os.environ, HANG_MODE=sc.mode, HANG_RANK=str(sc.bad), HANG_STEP=str(sc.step), HANG_MARKER=str(marker),
               **sc.env)
    if sc.flight:
        (out / "fr").mkdir()
        env.update(TORCH_FR_BUFFER_SIZE="2000", HANG_FR_DUMP=str(out / "fr" / "rank_"))
    procs = []
    for node in range(sc.nnodes):
        name = "torchrun.log" if sc.nnodes == 1 else f"node-{'ab'[node]}.log"
        log_root = out / "logs" if sc.log_dir else None
        fh = open(out / name, "wb")
        procs.append((subprocess.Popen(_node_cmd(torchrun, sc, node, port, log_root), stdout=fh,
                                       stderr=subprocess.STDOUT, env=env, cwd=out), fh))
    if sc.mode == "hostdown":
        _lose_host(procs[sc.bad // sc.nproc][0], marker)
    codes = []
    for p, fh in procs:
        try:
            codes.append(p.wait(timeout=240))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
        fh.close()
    expected = {"scenario": sc.what, "mode": sc.mode, "world_size": sc.nproc * sc.nnodes,
                "culprit": None if sc.culprit is None else {"rank": sc.culprit}, "exit_codes": codes,
                **({"suspects": sc.suspects} if sc.suspects else {}),
                "torch": subprocess.run([str(Path(torchrun).parent / "python"), "-c",
                                         "import torch; print(torch.__version__)"],
                                        capture_output=True, text=True).stdout.strip()}
    if sc.nnodes > 1 and sc.culprit is not None:
        expected["culprit"]["host"] = f"node-{'ab'[sc.culprit // sc.nproc]}"
    if sc.culprit_host is not None:
        expected["culprit"] = {"rank": None, "host": sc.culprit_host}
    (out / "expected.yaml").write_text(yaml.safe_dump(expected, sort_keys=False))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torchrun", required=True)
    ap.add_argument("--out", default=str(ROOT / "fixtures" / "hang"))
    ap.add_argument("--port", type=int, default=29531)
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    for i, sc in enumerate(SCENARIOS):
        if args.names and sc.name not in args.names:
            continue
        print(f"recording {sc.name}", file=sys.stderr, flush=True)
        record(args.torchrun, sc, Path(args.out) / sc.name, args.port + i)
    return 0


if __name__ == "__main__":
    sys.exit(main())
