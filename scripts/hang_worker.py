"""A torchrun worker for recording genuine multi-rank hang scenarios (scripts/hang_scenarios.py).

Runs a few all_reduce steps on the gloo backend; HANG_MODE/HANG_RANK/HANG_STEP choose how one rank misbehaves:
sleep (never enters the collective), crash (raises), kill (SIGKILLs itself), desync (a different collective),
shape (a different tensor size), monitored (sleeps while the others
wait in monitored_barrier), subgroup (a subgroup's member sleeps while the world goes on), none (healthy).
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


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT))
    rank, world = dist.get_rank(), dist.get_world_size()
    host = os.environ.get("HANG_HOSTNAME", "")
    print(f"rank {rank}/{world} local {os.environ.get('LOCAL_RANK')} host {host} started", flush=True)
    # the subgroup times out first when HANG_SUBGROUP_TIMEOUT is shorter: its waiting member says so before the
    # launcher stops everyone (left equal, both members may be stopped silent: the logs cannot decide)
    sub_timeout = float(os.environ.get("HANG_SUBGROUP_TIMEOUT", TIMEOUT))
    sub = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=sub_timeout)) if MODE == "subgroup" else None
    t = torch.ones(4)
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
            elif MODE == "monitored":
                time.sleep(TIMEOUT * 6)
            elif MODE == "shape":
                dist.all_reduce(torch.ones(8))
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
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    sys.exit(0)
