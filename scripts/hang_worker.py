"""A torchrun worker for recording genuine multi-rank hang scenarios (scripts/hang_scenarios.py).

Runs a few all_reduce steps on the gloo backend; HANG_MODE/HANG_RANK/HANG_STEP choose how one rank misbehaves:
sleep (never enters the collective), crash (raises), kill (SIGKILLs itself), desync (a different collective),
shape (a different tensor size), monitored (sleeps while the others
wait in monitored_barrier), subgroup (a subgroup's member sleeps while the world goes on), hostdown (touches
HANG_MARKER and waits: the recorder SIGKILLs its whole node, launcher and workers, as a host that is lost),
lateinit (sleeps before init_process_group: the others wait in the group's init), latenode (every rank of node
HANG_RANK does so), none (healthy).

HANG_BACKEND=nccl: the NCCL backend, one GPU per local rank (the `gpu` test of tests/engine/test_hang.py); its
watchdog dumps each rank's Flight Recorder on a timeout where TORCH_NCCL_DUMP_ON_TIMEOUT=1.

HANG_FR_DUMP=PREFIX (with TORCH_FR_BUFFER_SIZE set): write this rank's Flight Recorder dump to PREFIX<rank> when its
collective fails (and, with HANG_FR_ON_TERM=1, when the launcher's SIGTERM comes; HANG_FR_AT_END=1: at the end). This torch records gloo
collectives in the Flight Recorder but dumps them on its own only for NCCL (the watchdog, to
TORCH_FR_DUMP_TEMP_FILE<rank>); torch's own dump call writes the same bytes.
"""

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

MODE = os.environ.get("HANG_MODE", "none")
BAD = int(os.environ.get("HANG_RANK", "-1"))
STEP = int(os.environ.get("HANG_STEP", "3"))
TIMEOUT = float(os.environ.get("HANG_TIMEOUT", "8"))
STEPS = int(os.environ.get("HANG_STEPS", "5"))


def dump_flight_recorder(*_: object) -> None:
    prefix = os.environ.get("HANG_FR_DUMP")
    if prefix:
        from torch._C._distributed_c10d import _dump_fr_trace

        with open(f"{prefix}{dist.get_rank()}", "wb") as f:
            f.write(_dump_fr_trace())


def on_term(*_: object) -> None:
    dump_flight_recorder()
    os._exit(128 + signal.SIGTERM)


def main() -> None:
    if os.environ.get("HANG_FR_ON_TERM"):
        signal.signal(signal.SIGTERM, on_term)
    late = int(os.environ.get("GROUP_RANK", "-1")) == BAD if MODE == "latenode" else int(os.environ.get("RANK", "-1")) == BAD
    if MODE in ("lateinit", "latenode") and late:
        print(f"rank {os.environ.get('RANK')} is still loading: it joins the process group late", flush=True)
        time.sleep(TIMEOUT * 6)
    backend = os.environ.get("HANG_BACKEND", "gloo")
    device = "cpu"
    if backend == "nccl":  # one GPU per local rank; the watchdog times the collectives out and dumps
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        device = "cuda"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=TIMEOUT))
    rank, world = dist.get_rank(), dist.get_world_size()
    host = os.environ.get("HANG_HOSTNAME", "")
    print(f"rank {rank}/{world} local {os.environ.get('LOCAL_RANK')} host {host} started", flush=True)
    # the subgroup times out first when HANG_SUBGROUP_TIMEOUT is shorter: its waiting member says so before the
    # launcher stops everyone (left equal, both members may be stopped silent: the logs cannot decide)
    sub_timeout = float(os.environ.get("HANG_SUBGROUP_TIMEOUT", TIMEOUT))
    sub = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=sub_timeout)) if MODE == "subgroup" else None
    t = torch.ones(4, device=device)
    for step in range(STEPS):
        print(f"step {step} rank {rank}", flush=True)
        if rank == BAD and step == STEP:
            if MODE == "sleep":
                print(f"rank {rank} stalls at step {step}", flush=True)
                time.sleep(TIMEOUT * 6)
            elif MODE == "crash":
                raise RuntimeError(f"simulated failure on rank {rank} at step {step}")
            elif MODE == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif MODE == "desync":
                dist.broadcast(t, src=0)
                continue
            elif MODE == "hostdown":
                open(os.environ["HANG_MARKER"], "w").close()
                time.sleep(TIMEOUT * 6)
            elif MODE == "monitored":
                time.sleep(TIMEOUT * 6)
            elif MODE == "shape":
                dist.all_reduce(torch.ones(8, device=device))
                continue
        if MODE == "subgroup" and step == STEP and rank not in (0, 1) and os.environ.get("HANG_WORLD_ENDS"):
            print(f"rank {rank} leaves: its work is done", flush=True)  # the world is not stuck, only [0, 1]
            return
        if MODE == "subgroup" and step == STEP and rank in (0, 1):
            if rank == BAD:
                time.sleep(TIMEOUT * 6)
            dist.all_reduce(t, group=sub)
            continue
        if MODE == "monitored" and step == STEP:
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=TIMEOUT))
            continue
        dist.all_reduce(t)
    dist.barrier()
    if os.environ.get("HANG_FR_AT_END"):
        dump_flight_recorder()
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        dump_flight_recorder()
        raise
    sys.exit(0)
