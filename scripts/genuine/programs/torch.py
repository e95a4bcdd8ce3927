"""torch.distributed as users launch it: torchrun, elastic rendezvous, c10d TCPStore, gloo, NCCL asked for on CPU.

Every rank runs on 127.0.0.1 with ports the harness picked free ({port}, {port2}); tensors are tiny and every
wait has a short timeout, so one case takes seconds on two shared CPU cores. The worker scripts are the
smallest programs that reach each failure the way a training script does.
"""

from case import TORCHRUN_LOCAL, Case, Program, Release

# one worker script for every torchrun case: argv[1] says which failure it walks into
WORKER = '''\
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 else "allreduce"
rank = int(os.environ.get("RANK", "0"))
local_rank = int(os.environ.get("LOCAL_RANK", "0"))
print(f"[worker] rank {rank} local_rank {local_rank} world_size {os.environ.get('WORLD_SIZE')} mode {mode}", flush=True)

if mode == "allreduce":
    dist.init_process_group("gloo")
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    print(f"[worker] rank {rank}: all_reduce -> {t.tolist()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
elif mode == "cuda-device":
    # the first line of most DDP scripts
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
elif mode == "nccl":
    dist.init_process_group(backend="nccl")
    t = torch.ones(4)
    dist.all_reduce(t)
elif mode in ("sigkill", "sigsegv"):
    dist.init_process_group("gloo")
    dist.barrier()
    if rank == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL if mode == "sigkill" else signal.SIGSEGV)
    time.sleep(30)
elif mode == "gloo-timeout":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
    t = torch.ones(4)
    if rank == 1:
        time.sleep(30)  # this rank never reaches the collective
    dist.all_reduce(t)
elif mode == "monitored-barrier":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    if rank == 1:
        time.sleep(30)
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=4))
elif mode == "host-oom":
    # the host runs out of memory under this rank: an address-space limit stands in for a full machine
    import resource
    dist.init_process_group("gloo")
    if rank == 1:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        activations = torch.empty(4 << 30, dtype=torch.uint8)
    dist.barrier()
elif mode == "world-size-mismatch":
    # the script passes its own world_size (a hard-coded GPU count) while torchrun started fewer ranks
    dist.init_process_group("gloo", rank=rank, world_size=4, timeout=datetime.timedelta(seconds=6))
elif mode == "peer-killed":
    # rank 1 is killed while rank 0 waits in a collective with it
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    dist.barrier()
    if rank == 1:
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.ones(1 << 16)
    for _ in range(1000):
        dist.all_reduce(t)
        time.sleep(0.01)
elif mode == "broadcast-timeout":
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
    t = torch.zeros(8)
    if rank == 1:
        time.sleep(30)
    dist.broadcast(t, src=1 - rank)
elif mode == "load-truncated":
    # every rank loads a checkpoint that an interrupted copy cut short
    path = "ckpt.pt"
    if rank == 0 and not os.path.exists(path):
        torch.save({"w": torch.randn(256, 256)}, "full.pt")
        data = open("full.pt", "rb").read()
        open(path, "wb").write(data[: len(data) // 2])
    dist.init_process_group("gloo")
    dist.barrier()
    state = torch.load(path, map_location="cpu")
elif mode == "load-missing":
    dist.init_process_group("gloo")
    state = torch.load("checkpoints/step-1000/model.pt", map_location="cpu")
elif mode == "load-pickled-object":
    # a checkpoint that pickles a whole object: torch >= 2.6 loads weights only by default
    import collections
    Config = collections.namedtuple("Config", "lr steps")
    if rank == 0:
        torch.save({"w": torch.ones(2), "config": Config(0.1, 10)}, "ckpt-obj.pt")
    dist.init_process_group("gloo")
    dist.barrier()
    state = torch.load("ckpt-obj.pt", map_location="cpu")
elif mode == "ddp-train":
    # healthy: a few DDP steps of a small model on gloo
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"[worker] rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()
'''

# one process, no launcher: what init_process_group does with a tcp:// or env:// store
STORE = '''\
import datetime
import os
import sys

import torch.distributed as dist

mode = sys.argv[1]
port = int(sys.argv[2])
if mode == "client-refused":
    # rank 1 of 2; nobody listens on the master port
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2,
                            timeout=datetime.timedelta(seconds=6))
elif mode == "wait-clients":
    # rank 0 of 3; the other two ranks are never started
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=3,
                            timeout=datetime.timedelta(seconds=6))
elif mode == "bad-host":
    # MASTER_ADDR names a host that does not resolve (a typo in a hostfile)
    dist.init_process_group("gloo", init_method=f"tcp://master-node.invalid:{port}", rank=1, world_size=2,
                            timeout=datetime.timedelta(seconds=6))
elif mode == "env-missing":
    dist.init_process_group("gloo")
elif mode == "two-ranks-ok":
    import torch
    import torch.multiprocessing as mp

    def run(rank):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=30))
        t = torch.arange(4.0) + rank
        dist.all_reduce(t)
        print(f"rank {rank}: {t.tolist()}", flush=True)
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(run, nprocs=2)
elif mode in ("spawn-sigkill", "spawn-sigsegv", "spawn-cuda"):
    import signal
    import time

    import torch
    import torch.multiprocessing as mp

    def run(rank):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=30))
        dist.barrier()
        if mode == "spawn-cuda":
            x = torch.ones(4).to(f"cuda:{rank}")
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL if mode == "spawn-sigkill" else signal.SIGSEGV)
        time.sleep(30)

    if __name__ == "__main__":
        mp.spawn(run, nprocs=2)
elif mode == "cuda-tensor":
    import torch

    print(torch.__version__, torch.cuda.is_available(), flush=True)
    x = torch.randn(4, 4).cuda()
'''

# another server holds the port (it accepts and hangs up, like a foreign service) while the launcher
# behind it tries to listen there
HOLD = '''\
import socket
import subprocess
import sys
import threading

port = int(sys.argv[1])
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("0.0.0.0", port))
sock.listen(16)


def serve():
    while True:
        conn, _ = sock.accept()
        conn.close()


threading.Thread(target=serve, daemon=True).start()
sys.exit(subprocess.call(sys.argv[2:]))
'''

FILES = {"worker.py": WORKER, "store.py": STORE, "hold.py": HOLD}

# the training-script side of a distributed job: DDP and FSDP wrappers, checkpoints written and read back
# (argv[1] says which failure it walks into); kept apart from WORKER so that the older logs keep their lines
TRAIN = '''\
import os
import sys

import torch
import torch.distributed as dist

mode = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))
local_rank = int(os.environ.get("LOCAL_RANK", "0"))
print(f"[train] rank {rank} mode {mode}", flush=True)


class Net(torch.nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.body = torch.nn.Linear(16, hidden)
        self.head = torch.nn.Linear(hidden, 4)
        self.aux = torch.nn.Linear(hidden, 4)  # an auxiliary head some steps never use

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def steps(model, n=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(n):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"[train] rank {rank} step {step} loss {loss.item():.4f}", flush=True)


dist.init_process_group("gloo")
if mode == "ddp-unused":
    # the aux head takes no part in the loss: DDP's reducer waits for its gradient forever
    model = torch.nn.parallel.DistributedDataParallel(Net())
    steps(model)
elif mode == "ddp-device-ids":
    # the GPU recipe's wrapper around a model that stayed on the CPU
    model = torch.nn.parallel.DistributedDataParallel(Net(), device_ids=[local_rank], output_device=local_rank)
elif mode == "init-twice":
    # a library initialises the group again after the script did
    dist.init_process_group("gloo")
elif mode == "ddp-missing-keys":
    # the DDP wrapper's state_dict (every key prefixed "module.") loaded into the bare model
    model = torch.nn.parallel.DistributedDataParallel(Net())
    if rank == 0:
        torch.save(model.state_dict(), "ddp.pt")
    dist.barrier()
    Net().load_state_dict(torch.load("ddp.pt", map_location="cpu"))
elif mode == "size-mismatch":
    # a checkpoint of a wider model loaded into this one
    if rank == 0:
        torch.save(Net(hidden=32).state_dict(), "wide.pt")
    dist.barrier()
    Net().load_state_dict(torch.load("wide.pt", map_location="cpu"))
elif mode == "lfs-pointer":
    # the repository was cloned without git-lfs: the .pt file is the pointer text
    if rank == 0:
        with open("model.pt", "w") as f:
            f.write("version https://git-lfs.github.com/spec/v1\\n"
                    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\\nsize 442450\\n")
    dist.barrier()
    torch.load("model.pt", map_location="cpu")
elif mode in ("dcp-ok", "dcp-shard-missing", "dcp-missing"):
    import torch.distributed.checkpoint as dcp

    model = torch.nn.parallel.DistributedDataParallel(Net())
    if mode != "dcp-missing":
        dcp.save({"model": model.state_dict()}, checkpoint_id="ckpt/step-10")
        dist.barrier()
        if mode == "dcp-shard-missing" and rank == 0:
            # one rank's shard file was lost in the copy to shared storage
            os.remove("ckpt/step-10/__1_0.distcp")
        dist.barrier()
        steps(model, 1)
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id="ckpt/step-10" if mode != "dcp-missing" else "ckpt/step-20")
    print(f"[train] rank {rank} restored", flush=True)
elif mode == "fsdp-ok":
    # FSDP2 on CPU with gloo: parameters sharded over the two ranks
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    model = Net()
    fully_shard(model.body)
    fully_shard(model)
    steps(model)
elif mode in ("tp-ok", "mesh-too-big"):
    # tensor parallel as a launch script sets it up: a device mesh over the ranks, then Colwise/Rowwise linears
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    # "mesh-too-big": a dp x tp layout of 2 x 2 written for four GPUs, launched with two ranks
    shape = (dist.get_world_size(),) if mode == "tp-ok" else (2, 2)
    mesh = init_device_mesh("cpu", shape, mesh_dim_names=("tp",) if len(shape) == 1 else ("dp", "tp"))
    model = parallelize_module(Net(), mesh["tp"], {"body": ColwiseParallel(), "head": RowwiseParallel()})
    steps(model)
dist.barrier()  # every rank done with its collectives before the group goes away
dist.destroy_process_group()
'''

# written by a torch that saw a GPU: its storages are tagged cuda:0 (a tagger registered ahead of torch's
# own stands in for the GPU machine that wrote it)
SAVE_CUDA = '''\
import torch
import torch.serialization as ser

ser.register_package(0, lambda obj: "cuda:0", lambda obj, location: None)
torch.save({"w": torch.randn(4, 4)}, "gpu-ckpt.pt")
'''

LOAD = '''\
import torch

state = torch.load("gpu-ckpt.pt")
print(sorted(state))
'''

# the old-style script: argparse that knows --local_rank with an underscore, as torch.distributed.launch used
# to pass it (since torch 2.0 the launcher passes --local-rank with a hyphen)
OLDARGS = '''\
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
print("local rank", args.local_rank, os.environ.get("LOCAL_RANK"), flush=True)
'''

# the same script taught both spellings, and reading LOCAL_RANK as the warning asks: a healthy launch
NEWARGS = '''\
import argparse
import os

import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--local-rank", "--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
args = parser.parse_args()
dist.init_process_group("gloo")
dist.barrier()
print("local rank", args.local_rank, "of", dist.get_world_size(), flush=True)
dist.destroy_process_group()
'''

TFILES = {"train.py": TRAIN, "save_cuda.py": SAVE_CUDA, "load.py": LOAD, "oldargs.py": OLDARGS,
          "newargs.py": NEWARGS}
TORCHRUN = "{bin}/torchrun"

# the releases after 2.4.1: FSDP2 there runs on the CPU (2.4's fully_shard creates torch.cuda.Stream objects in its
# lazy init, so on a host without a GPU it fails "CUDA driver version is insufficient" before any check of the
# model) and torch.load is weights_only by default (2.6; 2.4 only warns with a FutureWarning and loads the object)
SINCE_2_13 = ("2.13.0", "2.14.1", "2.15.0")


def torchrun(*args: str, launcher: list[str] | None = None) -> list[str]:
    return [*(launcher or [TORCHRUN]), *args]


def _ranks(id: str, expect: list[str], mode: str, note: str, flags: tuple[str, ...] = (), exit: str = "fail",
           timeout: float = 90, releases: tuple[str, ...] | None = None) -> Case:
    """torchrun of two local gloo ranks whose worker walks into ``mode``."""
    return Case(id=id, expect=expect, argv=torchrun("--nproc-per-node", "2", *flags, *TORCHRUN_LOCAL, "worker.py", mode),
                files=FILES, input="torchrun", exit=exit, timeout=timeout, note=note, releases=releases)


def _store(id: str, expect: list[str], mode: str, note: str, launcher: list[str] | None = None,
           expect_by: dict | None = None, timeout: float = 90) -> Case:
    """One process (no launcher) running ``store.py MODE PORT``, behind ``launcher`` if given."""
    return Case(id=id, expect=expect, argv=[*(launcher or []), "{python}", "store.py", mode, "{port}"], files=FILES,
                timeout=timeout, note=note, expect_by=dict(expect_by or {}))


def _train(id: str, expect: list[str], mode: str, note: str, exit: str = "fail", timeout: float = 90,
           releases: tuple[str, ...] | None = None) -> Case:
    """torchrun of two local gloo ranks running ``train.py MODE``."""
    return Case(id=id, expect=expect, argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "train.py", mode),
                files=TFILES, input="torchrun", exit=exit, timeout=timeout, note=note, releases=releases)


# genuine sweep 3: what ranks that disagree do (model shapes, collectives, dtypes under FSDP, checkpoint keys),
# and the start-up paths around them (rendezvous endpoint, backends, torch.compile on CPU). Kept apart from TRAIN
# so that the older logs keep their lines; argv[1] says which failure the ranks walk into.
DIST2 = """\
import datetime
import os
import sys

import torch
import torch.distributed as dist

mode = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))
print(f"[dist2] rank {rank} mode {mode}", flush=True)


class Net(torch.nn.Module):
    def __init__(self, hidden=16, extra=False):
        super().__init__()
        self.body = torch.nn.Linear(16, hidden)
        self.head = torch.nn.Linear(hidden, 4)
        if extra:
            self.extra = torch.nn.Linear(4, 4)  # a layer added to the model after the checkpoint was written

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def steps(model, n=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(n):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"[dist2] rank {rank} step {step} loss {loss.item():.4f}", flush=True)


if mode == "mpi":
    # the MPI backend of a recipe written for a cluster build, on a pip wheel
    dist.init_process_group("mpi")
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
if mode == "ddp-param-count":
    # rank 1 built the model with one more layer (a config flag read differently on one rank)
    model = torch.nn.parallel.DistributedDataParallel(Net(extra=rank == 1))
    steps(model)
elif mode == "ddp-param-shape":
    # rank 1 built a wider model (a per-rank config, a vocabulary resized on one rank only)
    model = torch.nn.parallel.DistributedDataParallel(Net(hidden=16 if rank == 0 else 32))
    steps(model)
elif mode == "collective-mismatch":
    # the ranks took different branches: rank 0 all-reduces while rank 1 broadcasts
    t = torch.ones(4)
    if rank == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, src=0)
elif mode == "allgather-sizes":
    # each rank all-gathers a tensor of its own length (a per-rank batch of another size)
    t = torch.ones(4 + 4 * rank)
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
elif mode == "fsdp2-dtypes":
    # FSDP2 around a model whose head was cast to bf16 while the rest stayed fp32
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    model = Net()
    model.head.to(torch.bfloat16)
    fully_shard(model)
    steps(model)
elif mode == "fsdp1-dtypes":
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    model = Net()
    model.head.to(torch.bfloat16)
    model = FSDP(model, device_id=torch.device("cpu"))
    steps(model)
elif mode == "fsdp2-load-full":
    # a full (unsharded) state dict loaded with the plain load_state_dict into an FSDP2-sharded model
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    full = Net().state_dict()
    model = Net()
    fully_shard(model)
    model.load_state_dict(full)
    steps(model)
elif mode in ("dcp-save", "dcp-missing-key"):
    import torch.distributed.checkpoint as dcp

    dcp.save({"model": Net().state_dict()}, checkpoint_id="ckpt/step-10")
    dist.barrier()
    if mode == "dcp-missing-key":
        # the model gained a layer since the checkpoint was written: DCP loads strictly
        state = {"model": Net(extra=True).state_dict()}
        dcp.load(state, checkpoint_id="ckpt/step-10")
elif mode == "new-group":
    # a tensor-parallel group layout written for four GPUs, launched with two ranks
    tp_group = dist.new_group([0, 2])
elif mode == "ddp-reentrant":
    # one layer checkpointed twice with reentrant activation checkpointing under DDP
    import torch.utils.checkpoint as ckpt

    class Shared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(16, 16)

        def forward(self, x):
            x = ckpt.checkpoint(self.layer, x, use_reentrant=True)
            return ckpt.checkpoint(self.layer, x, use_reentrant=True)

    model = torch.nn.parallel.DistributedDataParallel(Shared(), find_unused_parameters=True)
    model(torch.randn(8, 16, requires_grad=True)).sum().backward()
elif mode == "ddp-find-unused-ok":
    # healthy: find_unused_parameters=True on a model that uses every parameter (DDP warns about the cost)
    model = torch.nn.parallel.DistributedDataParallel(Net(), find_unused_parameters=True)
    steps(model)
elif mode == "allreduce":
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    print(f"[dist2] rank {rank}: all_reduce -> {t.tolist()}", flush=True)
dist.barrier()
dist.destroy_process_group()
"""

# one process, no launcher: the single-process paths of a distributed training script
SOLO = """\
import os
import sys

import torch

mode = sys.argv[1]
print(f"[solo] mode {mode}", flush=True)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


if mode == "dcp-load":
    # healthy: a checkpoint two ranks wrote, loaded by one process (DCP reshards on load)
    import torch.distributed.checkpoint as dcp

    state = {"model": Net().state_dict()}
    dcp.load(state, checkpoint_id="ckpt/step-10")
    print("[solo] restored", sorted(state["model"]), flush=True)
elif mode == "sampler":
    # the multi-GPU script run with plain python: DistributedSampler before any process group
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    data = TensorDataset(torch.randn(64, 16))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
elif mode == "loader-sigkill":
    # a DataLoader worker killed by the kernel (the OOM killer) while it loads a batch
    import signal

    from torch.utils.data import DataLoader, Dataset

    class Samples(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            if i == 0:  # the first batch: no batch of this worker is in flight to the parent when it dies
                os.kill(os.getpid(), signal.SIGKILL)
            return torch.randn(16)

    for batch in DataLoader(Samples(), batch_size=4, num_workers=2):
        pass
elif mode == "amp-cpu":
    # healthy: a GPU recipe's AMP, pinned memory and GradScaler run on a CPU-only host
    from torch.utils.data import DataLoader, TensorDataset

    model = Net()
    scaler = torch.cuda.amp.GradScaler()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for (x,) in DataLoader(TensorDataset(torch.randn(32, 16)), batch_size=8, pin_memory=True):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    print(f"[solo] trained, loss {loss.item():.4f}", flush=True)
elif mode == "compile":
    # torch.compile's inductor on CPU generates C++ and builds it with the host compiler
    model = torch.compile(Net())
    print(model(torch.randn(8, 16)).shape, flush=True)
elif mode == "fullgraph":
    # a data-dependent branch in code compiled with fullgraph=True
    def step(x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1

    print(torch.compile(step, fullgraph=True, backend="eager")(torch.randn(8)), flush=True)
"""

D2FILES = {"dist2.py": DIST2, "solo.py": SOLO}


def _dist2(id: str, expect: list[str], mode: str, note: str, flags: tuple[str, ...] = (), env: dict | None = None,
           exit: str = "fail", timeout: float = 90, expect_by: dict | None = None,
           releases: tuple[str, ...] | None = None) -> Case:
    """torchrun of two local gloo ranks running ``dist2.py MODE``."""
    return Case(id=id, expect=expect, argv=torchrun("--nproc-per-node", "2", *flags, *TORCHRUN_LOCAL, "dist2.py", mode),
                files=D2FILES, env=dict(env or {}), input="torchrun", exit=exit, timeout=timeout, note=note,
                expect_by=dict(expect_by or {}), releases=releases)


def _solo(id: str, expect: list[str], mode: str, note: str, env: dict | None = None, exit: str = "fail",
          timeout: float = 90) -> Case:
    """One process running ``solo.py MODE``."""
    return Case(id=id, expect=expect, argv=["{python}", "solo.py", mode], files=D2FILES, env=dict(env or {}),
                exit=exit, timeout=timeout, note=note)


# genuine sweep 4: subgroups, point-to-point, elastic launches of more than one agent, the rendezvous backends,
# verbose logging, torchelastic's error files. Kept apart from DIST2 so that the older logs keep their lines.
DIST3 = """\
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

mode = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))
print(f"[dist3] rank {rank} mode {mode}", flush=True)


@record
def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
    t = torch.ones(4) * (rank + 1)
    if mode == "subgroup-one-rank":
        # the evaluation group is created inside a branch only rank 0 takes: new_group must be called by every rank
        if rank == 0:
            eval_group = dist.new_group([0, 1])
            dist.barrier(group=eval_group)
        dist.barrier()
    elif mode == "send-self":
        # a pipeline stage sends its activations to the "next" stage, computed as its own rank
        dist.send(t, dst=rank)
    elif mode == "record-missing":
        # @record writes the rank's traceback to torchelastic's error file: the launcher prints it in its summary
        state = torch.load(f"checkpoints/rank{rank}/optim.pt", map_location="cpu")
    elif mode == "verbose-ok":
        out = torch.empty(2)
        dist.reduce_scatter_tensor(out, t)
        dist.all_reduce(t)
        print(f"[dist3] rank {rank}: {t.tolist()} {out.tolist()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""

# two torchrun agents on this host standing in for two nodes of one c10d rendezvous: the first hosts the store,
# the second joins it as a client (is_host=false, as on a second machine); argv[1] and argv[2] are their run ids
TWO_AGENTS = """\
{bin}/torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:{port} \\
    --rdzv-id "$1" --rdzv-conf join_timeout=10 dist3.py verbose-ok &
first=$!
sleep 2
{bin}/torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:{port} \\
    --rdzv-id "$2" --rdzv-conf is_host=false,join_timeout=10 dist3.py verbose-ok
rc=$?
wait $first
exit $((rc | $?))
"""

D3FILES = {"dist3.py": DIST3, "two_agents.sh": TWO_AGENTS}


def _dist3(id: str, expect: list[str], mode: str, note: str, flags: tuple[str, ...] = (), env: dict | None = None,
           exit: str = "fail", timeout: float = 90) -> Case:
    """torchrun of two local gloo ranks running ``dist3.py MODE``."""
    return Case(id=id, expect=expect, argv=torchrun("--nproc-per-node", "2", *flags, *TORCHRUN_LOCAL, "dist3.py", mode),
                files=D3FILES, env=dict(env or {}), input="torchrun", exit=exit, timeout=timeout, note=note)


PROGRAM = Program(
    name="torch",
    dist="torch",
    releases=[
        # the torch of most distributed-training and NCCL reports of 2024-2025 (September 2024); built against
        # numpy 1.x, hence numpy<2
        Release(label="2.4.1", requirements=["torch==2.4.1", "numpy<2"]),
        Release(label="2.13.0", requirements=["torch==2.13.0", "numpy"]),
        Release(label="2.14.1", requirements=["torch==2.14.1", "numpy"]),
        Release(label="2.15.0", requirements=["torch==2.15.0", "numpy"]),
    ],
    cases=[
        # --- healthy starts with their usual warnings --------------------------------------------------
        Case(
            id="torchrun-gloo-allreduce-ok",
            expect=[],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "allreduce"),
            files=FILES,
            input="torchrun",
            exit="ok",
            timeout=90,
            note="healthy: two CPU ranks all-reduce over gloo; torchrun warns that it set OMP_NUM_THREADS=1",
        ),
        Case(
            id="torchrun-c10d-rdzv-ok",
            expect=[],
            argv=torchrun(
                "--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-id", "job1", "worker.py", "allreduce",
                launcher=["{python}", "-m", "torch.distributed.run"],
            ),
            files=FILES,
            input="torchrun",
            exit="ok",
            timeout=90,
            note="healthy: python -m torch.distributed.run with the c10d rendezvous backend, two gloo ranks",
        ),
        Case(
            id="spawn-tcp-init-ok",
            expect=[],
            argv=["{python}", "store.py", "two-ranks-ok", "{port}"],
            files=FILES,
            exit="ok",
            timeout=90,
            note="healthy: mp.spawn of two ranks meeting through a tcp:// TCPStore",
        ),
        # --- ranks that never met ----------------------------------------------------------------------
        Case(
            id="torchrun-c10d-rdzv-timeout",
            expect=["dist.rendezvous_failed"],
            argv=torchrun(
                "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-id", "job1", "--rdzv-conf", "join_timeout=8",
                "worker.py", "allreduce",
            ),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="--nnodes 2 but only this node was started: the c10d rendezvous times out (RendezvousTimeoutError)",
        ),
        Case(
            id="torchrun-c10d-rdzv-unreachable",
            expect=["dist.rendezvous_failed"],
            argv=torchrun(
                "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-id", "job1",
                "--rdzv-conf", "is_host=false,read_timeout=5,join_timeout=8", "worker.py", "allreduce",
            ),
            files=FILES,
            input="torchrun",
            timeout=120,
            note="a second node whose rendezvous endpoint has no store listening: RendezvousConnectionError",
        ),
        Case(
            id="torchrun-static-rdzv-timeout",
            expect=["dist.rendezvous_failed"],
            argv=torchrun(
                "--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1", *TORCHRUN_LOCAL,
                "--rdzv-conf", "timeout=8", "worker.py", "allreduce",
            ),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="static rendezvous on node 0 of 2, node 1 never started: the master store waits for the other agent",
        ),
        Case(
            id="torchrun-static-node1-no-master",
            expect=["dist.rendezvous_failed"],
            argv=torchrun(
                "--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "1", *TORCHRUN_LOCAL,
                "--rdzv-conf", "timeout=8", "worker.py", "allreduce",
            ),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="node 1 of a static rendezvous started while no master listens: its store client never connects",
        ),
        Case(
            id="tcpstore-client-refused",
            expect=["dist.rendezvous_failed"],
            argv=["{python}", "store.py", "client-refused", "{port}"],
            files=FILES,
            timeout=60,
            note="rank 1 of a tcp:// init whose master port nobody listens on: connect refused until the timeout",
        ),
        Case(
            id="tcpstore-waiting-for-clients",
            expect=["dist.rendezvous_failed"],
            argv=["{python}", "store.py", "wait-clients", "{port}"],
            files=FILES,
            timeout=60,
            note="rank 0 of world_size 3 started alone: the store waits for ranks that were never launched",
        ),
        # --- the launch itself -------------------------------------------------------------------------
        Case(
            id="torchrun-master-port-in-use",
            expect=["server.port_in_use"],
            argv=["{python}", "hold.py", "{port}", TORCHRUN, "--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "allreduce"],
            files=FILES,
            input="torchrun",
            timeout=90,
            note="the master port is held by another process: the agent's TCPStore cannot listen (EADDRINUSE)",
        ),
        Case(
            id="torchrun-rdzv-endpoint-in-use",
            # the c10d backend takes a taken port for another agent's store and joins it as a client: what the
            # log shows is a store it cannot validate, and the ranks never meet
            expect=["dist.rendezvous_failed"],
            # torch 2.4's TCPStore (not libuv) first tries to host the store and says why it cannot: socket.cpp's
            # "The server socket has failed to bind to 0.0.0.0:PORT (errno: 98 - Address already in use)", then
            # the client's "Connection reset by peer" from the service that holds the port: the root cause is printed
            expect_by={"2.4.1": ["server.port_in_use", "dist.rendezvous_failed"]},
            argv=[
                "{python}", "hold.py", "{port}", TORCHRUN, "--nnodes", "1", "--nproc-per-node", "2",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:{port}", "worker.py", "allreduce",
            ],
            files=FILES,
            input="torchrun",
            timeout=90,
            note="another service holds the c10d rendezvous endpoint's port: the agent cannot validate it as a store",
        ),
        Case(
            id="torchrun-unknown-flag",
            expect=["config.bad_argument"],
            argv=torchrun("--nproc_per_nodes", "2", "worker.py"),
            files=FILES,
            input="torchrun",
            timeout=60,
            note="a misspelt launcher flag: torchrun's argparse rejects it",
        ),
        Case(
            id="torchrun-unknown-rdzv-backend",
            expect=["config.bad_argument"],
            argv=torchrun("--nnodes", "1", "--nproc-per-node", "1", "--rdzv-backend", "etcd2", "worker.py"),
            files=FILES,
            input="torchrun",
            timeout=60,
            note="a rendezvous backend name torchrun does not register",
        ),
        Case(
            id="tcpstore-master-unresolvable",
            expect=["dist.rendezvous_failed"],
            argv=["{python}", "store.py", "bad-host", "{port}"],
            files=FILES,
            timeout=60,
            note="the master address does not resolve: the store client cannot reach any address of it",
        ),
        Case(
            id="env-init-without-launcher",
            expect=["config.bad_argument"],
            argv=["{python}", "store.py", "env-missing", "{port}"],
            files=FILES,
            timeout=60,
            note="init_process_group() with the env:// default run without torchrun: RANK/MASTER_ADDR unset",
        ),
        # --- GPU asked for on a machine without one ----------------------------------------------------
        Case(
            id="torchrun-nccl-without-gpu",
            expect=["runtime.no_gpu_visible"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "nccl"),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="init_process_group(backend='nccl') on a machine without a GPU; torchrun's ChildFailedError report",
            # the CPU wheel has no NCCL at all: a CPU-only build where a GPU build was meant
            expect_by={"2.13.0": ["runtime.backend_mismatch"]},
        ),
        Case(
            id="torchrun-set-device-without-gpu",
            expect=["runtime.no_gpu_visible"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "cuda-device"),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="torch.cuda.set_device(local_rank) where torch sees no GPU; torchrun reports the failed ranks",
            expect_by={"2.13.0": ["runtime.backend_mismatch"]},
        ),
        Case(
            id="torchrun-nproc-gpu-without-gpu",
            expect=["runtime.no_gpu_visible"],
            argv=torchrun("--nproc-per-node", "gpu", *TORCHRUN_LOCAL, "worker.py", "allreduce"),
            files=FILES,
            input="torchrun",
            timeout=60,
            note="--nproc-per-node gpu on a machine where torch sees no CUDA device",
        ),
        # --- ranks that died ---------------------------------------------------------------------------
        Case(
            id="torchrun-worker-sigkill",
            expect=["memory.host_oom"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "sigkill"),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="rank 1 is killed with SIGKILL (what the OOM killer does); torchrun's ChildFailedError names signal 9",
        ),
        Case(
            id="torchrun-worker-sigsegv",
            expect=["process.segfault"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "sigsegv"),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="rank 1 dies of SIGSEGV; torchrun reports signal 11",
        ),
        Case(
            id="torchrun-gloo-collective-timeout",
            expect=["nccl.timeout"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "gloo-timeout"),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="rank 1 never reaches the all_reduce: gloo's 5 s timeout fires on rank 0",
        ),
        Case(
            id="torchrun-monitored-barrier-timeout",
            expect=["nccl.timeout"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "monitored-barrier"),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="monitored_barrier names the rank that did not arrive within 4 s",
        ),
        Case(
            id="torchrun-gloo-bad-ifname",
            expect=["nccl.network"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "worker.py", "allreduce"),
            env={"GLOO_SOCKET_IFNAME": "eth9"},
            files=FILES,
            input="torchrun",
            timeout=90,
            note="GLOO_SOCKET_IFNAME names an interface this host does not have",
        ),
        # --- more ways ranks die or never meet (issue 26) ------------------------------------------------
        _ranks("torchrun-ddp-train-ok", [], "ddp-train", "healthy: three DDP steps of a linear layer on two gloo ranks",
               exit="ok"),
        Case(
            id="torchrun-standalone-ok",
            expect=[],
            argv=torchrun("--standalone", "--nproc-per-node", "2", "worker.py", "allreduce"),
            files=FILES,
            input="torchrun",
            exit="ok",
            timeout=90,
            note="healthy: torchrun --standalone (a c10d store on a random local port), two gloo ranks",
        ),
        Case(
            id="torchrun-elastic-nnodes-range-ok",
            expect=[],
            argv=torchrun(
                "--nnodes", "1:2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-conf", "last_call_timeout=2", "worker.py", "allreduce",
            ),
            files=FILES,
            input="torchrun",
            exit="ok",
            timeout=90,
            note="healthy: an elastic --nnodes 1:2 job that starts with the one node it has after the last call",
        ),
        _ranks("torchrun-worker-host-oom", ["memory.host_oom"], "host-oom",
               "rank 1 cannot allocate 4 GiB of host memory (an address-space limit stands in for a full host):"
               " DefaultCPUAllocator fails with ENOMEM, torchrun reports exit code 1"),
        _ranks("torchrun-world-size-mismatch", ["dist.rendezvous_failed"], "world-size-mismatch",
               "the script hard-codes world_size=4 while torchrun started 2 ranks: the store waits for the missing"
               " ranks until its timeout"),
        _ranks("torchrun-peer-sigkill-in-collective", ["memory.host_oom"], "peer-killed",
               "rank 1 is SIGKILLed (as the OOM killer does) while rank 0 all-reduces with it: rank 0's gloo error is"
               " a consequence"),
        _ranks("torchrun-worker-sigkill-restarts", ["memory.host_oom"], "sigkill",
               "rank 1 is SIGKILLed on every attempt; torchrun restarts the group once, then gives up",
               flags=("--max-restarts", "1"), timeout=120),
        _ranks("torchrun-gloo-broadcast-timeout", ["nccl.timeout"], "broadcast-timeout",
               "rank 1 never reaches the broadcast: gloo's 5 s timeout fires on rank 0"),
        _ranks("torchrun-load-truncated-checkpoint", ["model.shard_corrupt"], "load-truncated",
               "torch.load of a checkpoint cut to half its size (an interrupted copy): the zip reader fails"),
        _ranks("torchrun-load-missing-checkpoint", ["model.file_missing"], "load-missing",
               "torch.load of a checkpoint path that does not exist on this node"),
        _ranks("torchrun-load-weights-only", ["model.format_mismatch"], "load-pickled-object",
               "a checkpoint that pickles a Python object, loaded by a torch whose torch.load is weights_only by"
               " default: UnpicklingError 'Weights only load failed'",
               # torch 2.4 loads it (weights_only=False was still the default): nothing fails there
               releases=SINCE_2_13),
        Case(
            id="torchrun-c10d-endpoint-unresolvable",
            expect=["dist.rendezvous_failed"],
            argv=torchrun(
                "--nnodes", "1", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "master-node.invalid:{port}", "--rdzv-conf", "read_timeout=5,join_timeout=8",
                "worker.py", "allreduce",
            ),
            files=FILES,
            input="torchrun",
            timeout=90,
            note="the c10d rendezvous endpoint names a host that does not resolve",
        ),
        _store("spawn-rank-sigkill", ["memory.host_oom"], "spawn-sigkill",
               "mp.spawn, rank 1 SIGKILLed: ProcessExitedException names SIGKILL"),
        _store("spawn-rank-sigsegv", ["process.segfault"], "spawn-sigsegv",
               "mp.spawn, rank 1 dies of SIGSEGV: ProcessExitedException names SIGSEGV"),
        _store("spawn-master-port-in-use", ["server.port_in_use"], "two-ranks-ok",
               "mp.spawn with tcp:// init on a port another service holds: rank 0's store cannot listen",
               launcher=["{python}", "hold.py", "{port}"]),
        _store("cuda-tensor-without-gpu", ["runtime.no_gpu_visible"], "cuda-tensor",
               "tensor.cuda() where torch sees no GPU",
               expect_by={"2.13.0": ["runtime.backend_mismatch"]}, timeout=60),
        # --- training scripts and their checkpoints (genuine sweep 2) -------------------------------------
        _train("torchrun-fsdp2-cpu-ok", [], "fsdp-ok",
               "healthy: FSDP2 fully_shard of a small model on two CPU gloo ranks, three steps", exit="ok",
               # torch 2.4's FSDP2 needs CUDA streams: a CPU-only host cannot run it at all
               releases=SINCE_2_13),
        _train("torchrun-dcp-save-load-ok", [], "dcp-ok",
               "healthy: torch.distributed.checkpoint save and load of a DDP state dict on two gloo ranks", exit="ok"),
        _train("torchrun-ddp-unused-parameters", ["config.bad_argument"], "ddp-unused",
               "a DDP model with a head the loss never uses, find_unused_parameters left False: the second step"
               " fails 'Expected to have finished reduction' (https://github.com/pytorch/pytorch/issues/43259)"),
        _train("torchrun-ddp-device-ids-cpu-model", ["config.bad_argument"], "ddp-device-ids",
               "DDP(model, device_ids=[local_rank]) around a model still on the CPU: ValueError from DDP's"
               " constructor (https://github.com/pytorch/pytorch/issues/100243)"),
        _train("torchrun-init-process-group-twice", ["config.bad_argument"], "init-twice",
               "init_process_group called a second time in the same process"
               " (https://github.com/NVIDIA/Megatron-LM/pull/521)"),
        _train("torchrun-load-ddp-prefixed-state-dict", ["model.weights_mismatch"], "ddp-missing-keys",
               "a state dict saved from the DDP wrapper ('module.' keys) loaded into the bare model: Missing and"
               " Unexpected key(s) (https://github.com/facebookresearch/ijepa/issues/34)"),
        _train("torchrun-load-state-dict-size-mismatch", ["model.weights_mismatch"], "size-mismatch",
               "a checkpoint of a wider model loaded into this one: size mismatch for body.weight"
               " (https://github.com/mbrossar/ai-imu-dr/issues/75)"),
        _train("torchrun-load-git-lfs-pointer", ["model.shard_corrupt"], "lfs-pointer",
               "torch.load of a .pt that is a Git LFS pointer (cloned without git-lfs): UnpicklingError invalid"
               " load key 'v' (https://github.com/Rose-STL-Lab/LIMO/issues/3)"),
        _train("torchrun-dcp-shard-missing", ["model.shard_missing"], "dcp-shard-missing",
               "a torch.distributed.checkpoint directory with one rank's __1_0.distcp file missing: dcp.load fails"
               " on every rank (https://github.com/pytorch/pytorch/issues/125740)"),
        _train("torchrun-dcp-checkpoint-missing", ["model.file_missing"], "dcp-missing",
               "dcp.load from a checkpoint directory that was never written (a wrong step in the resume path;"
               " https://github.com/huggingface/accelerate/issues/3010)"),
        _train("torchrun-tensor-parallel-cpu-ok", [], "tp-ok",
               "healthy: a 1-D device mesh over two CPU ranks, Colwise/Rowwise tensor-parallel linears, three steps",
               exit="ok"),
        _train("torchrun-device-mesh-bigger-than-world", ["config.insufficient_gpus"], "mesh-too-big",
               "a dp x tp = 2 x 2 device mesh (a layout for four GPUs) launched with --nproc-per-node 2: DeviceMesh"
               " refuses a mesh bigger than the world (https://github.com/pytorch/pytorch/issues/111452)"),
        Case(
            id="load-cuda-checkpoint-without-gpu",
            expect=["runtime.no_gpu_visible"],
            argv=["bash", "-c", "{python} save_cuda.py && exec {python} load.py"],
            files=TFILES,
            timeout=60,
            note="torch.load without map_location of a checkpoint written on a GPU, on a host torch sees no GPU on"
                 " (https://github.com/hkchengrex/Cutie/issues/37)",
        ),
        Case(
            id="launch-old-local-rank-argument",
            expect=["config.bad_argument"],
            argv=["{python}", "-m", "torch.distributed.launch", "--nproc-per-node", "2", *TORCHRUN_LOCAL, "oldargs.py"],
            files=TFILES,
            input="torchrun",
            timeout=90,
            note="python -m torch.distributed.launch passes --local-rank=N to a script whose argparse only knows"
                 " --local_rank: 'unrecognized arguments' (https://github.com/babylm/baseline-pretraining/issues/2)",
        ),
        Case(
            id="launch-deprecated-ok",
            expect=[],
            argv=["{python}", "-m", "torch.distributed.launch", "--nproc-per-node", "2", *TORCHRUN_LOCAL, "newargs.py"],
            files=TFILES,
            input="torchrun",
            exit="ok",
            timeout=90,
            note="healthy: the deprecated torch.distributed.launch with a script that accepts --local-rank; its"
                 " FutureWarning and OMP_NUM_THREADS warning",
        ),
        Case(
            id="torchrun-script-missing",
            expect=["config.bad_argument"],
            argv=torchrun("--nproc-per-node", "2", *TORCHRUN_LOCAL, "trian.py"),
            files=TFILES,
            input="torchrun",
            timeout=60,
            note="a misspelt training-script path: every rank's python cannot open the file, torchrun reports exit 2"
                 " (https://github.com/StarsfieldAI/R1-V/issues/42)",
        ),
        Case(
            id="torchrun-nproc-per-node-invalid",
            expect=["config.bad_argument"],
            argv=torchrun("--nproc-per-node", "two", *TORCHRUN_LOCAL, "train.py", "fsdp-ok"),
            files=TFILES,
            input="torchrun",
            timeout=60,
            note="--nproc-per-node given a value torchrun does not accept (a word, a Slurm '4(x2)')"
                 " (https://github.com/awslabs/sockeye/issues/1038)",
        ),
        # --- ranks that disagree, and the start-up paths around them (genuine sweep 3) -------------------
        _dist2("torchrun-ddp-param-count-differs", ["config.bad_argument"], "ddp-param-count",
               "rank 1 built the model with one more layer than rank 0: DDP's constructor compares the ranks' models,"
               " 'DDP expects same model across all ranks' (https://github.com/huggingface/accelerate/issues/1481)"),
        _dist2("torchrun-ddp-param-shape-differs", ["config.bad_argument"], "ddp-param-shape",
               "rank 1 built a wider layer than rank 0: 'params[0] in this process with sizes ... appears not to match"
               " sizes of the same param in process 0' (https://github.com/huggingface/transformers/issues/16417)"),
        _dist2("torchrun-collective-mismatch-debug-detail", ["nccl.timeout"], "collective-mismatch",
               "rank 0 all-reduces while rank 1 broadcasts; TORCH_DISTRIBUTED_DEBUG=DETAIL's ProcessGroupWrapper"
               " reports 'Detected mismatch between collectives on ranks' instead of a hang"
               " (https://github.com/Lightning-AI/pytorch-lightning/issues/19106)",
               env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}),
        _dist2("torchrun-gloo-all-gather-size-mismatch", ["nccl.timeout"], "allgather-sizes",
               "the ranks all-gather tensors of different lengths: gloo's pair aborts the rank, 'op.preamble.length <="
               " op.nbytes ... Is there a distributed collective mismatch in your code?'"
               " (https://github.com/pytorch/gloo/pull/456)"),
        _dist2("torchrun-fsdp2-mixed-param-dtype", ["config.bad_argument"], "fsdp2-dtypes",
               "FSDP2 fully_shard of a model with bf16 and fp32 parameters in one group: 'FSDP expects uniform original"
               " parameter dtype' (https://github.com/modelscope/twinkle/issues/182)",
               # torch 2.4's FSDP2 fails on its CUDA streams before it compares the dtypes (no GPU here)
               releases=SINCE_2_13),
        _dist2("torchrun-fsdp1-mixed-param-dtype", ["config.bad_argument"], "fsdp1-dtypes",
               "FSDP (FlatParameter) around a model with bf16 and fp32 parameters: 'Must flatten tensors with uniform"
               " dtype' (https://github.com/axolotl-ai-cloud/axolotl/issues/1494)"),
        _dist2("torchrun-fsdp2-load-full-state-dict", ["config.bad_argument"], "fsdp2-load-full",
               "a full state dict loaded with the plain load_state_dict into FSDP2's DTensor parameters: 'got mixed"
               " torch.Tensor and DTensor' for every parameter (https://github.com/pytorch/pytorch/issues/136336)"),
        Case(
            id="torchrun-dcp-missing-key-restarts",
            expect=["model.weights_mismatch"],
            argv=torchrun("--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1", "--rdzv-backend", "c10d",
                          "--rdzv-endpoint", "127.0.0.1:{port}", "dist2.py", "dcp-missing-key"),
            files=D2FILES,
            input="torchrun",
            timeout=150,
            note="dcp.load of a checkpoint written before the model gained a layer: 'Missing key in checkpoint"
                 " state_dict'; torchrun (--max-restarts 1, c10d rendezvous) restarts the group, whose gloo mesh then"
                 " fails to connect (https://github.com/pytorch/pytorch/issues/148252)",
        ),
        Case(
            id="dcp-load-other-world-size-ok",
            expect=[],
            argv=["bash", "-c", "{bin}/torchrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port {port}"
                  " dist2.py dcp-save && exec {python} solo.py dcp-load"],
            files=D2FILES,
            input="torchrun",
            exit="ok",
            timeout=120,
            note="healthy: a torch.distributed.checkpoint written by two ranks, loaded by one process without a"
                 " process group (DCP reshards; it warns that it assumes a single process)"
                 " (https://github.com/pytorch/torchtitan/issues/850)",
        ),
        _dist2("torchrun-new-group-rank-out-of-range", ["config.insufficient_gpus"], "new-group",
               "dist.new_group([0, 2]) (a group layout for four GPUs) in a job of two ranks: 'Rank 2 is out of range'"
               " (https://github.com/hpcaitech/ColossalAI/issues/2910)"),
        _dist2("torchrun-ddp-reentrant-checkpoint-twice", ["config.bad_argument"], "ddp-reentrant",
               "one layer checkpointed twice with use_reentrant=True under DDP: 'Expected to mark a variable ready only"
               " once' (https://github.com/microsoft/FocalNet/issues/4)"),
        _dist2("torchrun-ddp-find-unused-debug-info-ok", [], "ddp-find-unused-ok",
               "healthy: DDP with find_unused_parameters=True on a model that uses every parameter, with"
               " TORCH_DISTRIBUTED_DEBUG=INFO: reducer.cpp's performance warning"
               " (https://github.com/cszn/KAIR/issues/103)", env={"TORCH_DISTRIBUTED_DEBUG": "INFO"}, exit="ok"),
        _dist2("torchrun-mpi-backend-not-built", ["runtime.backend_mismatch"], "mpi",
               "init_process_group('mpi') on a pip wheel built without MPI: 'Distributed package doesn't have MPI"
               " built in' (https://github.com/open-ce/open-ce/issues/376)"),
        Case(
            id="torchrun-rdzv-endpoint-empty-host",
            expect=["config.bad_argument"],
            argv=torchrun("--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                          "--rdzv-endpoint", ":{port}", "dist2.py", "allreduce"),
            files=D2FILES,
            input="torchrun",
            timeout=60,
            note="--rdzv-endpoint $MASTER_ADDR:PORT with MASTER_ADDR unset (':PORT'): torchrun refuses the hostname"
                 " (https://github.com/HarderThenHarder/transformers_tasks/issues/34)",
        ),
        _solo("sampler-without-process-group", ["config.bad_argument"], "sampler",
              "the multi-GPU script started with plain python: DistributedSampler before init_process_group,"
              " 'Default process group has not been initialized'"
              " (https://github.com/Lightning-AI/pytorch-lightning/issues/20690)"),
        _solo("dataloader-worker-sigkill", ["memory.host_oom"], "loader-sigkill",
              "a DataLoader worker is SIGKILLed (what the OOM killer does) while loading a batch: 'DataLoader worker"
              " (pid N) is killed by signal: Killed.' (https://github.com/pytorch/pytorch/issues/8976)"),
        _solo("amp-cuda-recipe-on-cpu-ok", [], "amp-cpu",
              "healthy: a GPU recipe's torch.cuda.amp.GradScaler, autocast('cuda') and pin_memory on a CPU-only"
              " host: deprecation and 'CUDA is not available. Disabling' warnings"
              " (https://github.com/LuxImagingAI/DBSegment/issues/1)", exit="ok"),
        _solo("compile-no-cxx-compiler", ["runtime.backend_mismatch"], "compile",
              "torch.compile on CPU where the C++ compiler inductor runs does not exist (CXX names a missing g++):"
              " InvalidCxxCompiler (https://github.com/2noise/ChatTTS/issues/133)",
              env={"CXX": "/opt/toolchain/bin/g++", "CC": "/opt/toolchain/bin/gcc"}, timeout=150),
        _solo("compile-fullgraph-data-dependent-branch", ["runtime.backend_mismatch"], "fullgraph",
              "torch.compile(fullgraph=True) of code that branches on a tensor's value (.item()): Dynamo's UserError"
              " 'Could not guard on data-dependent expression' (https://github.com/pytorch/pytorch/issues/147672)",
              timeout=150),
        # --- subgroups, point-to-point, multi-agent rendezvous, backends (genuine sweep 4) ----------------------
        Case(
            id="torchrun-etcd-backend-not-installed",
            expect=["runtime.backend_mismatch"],
            argv=torchrun("--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "etcd",
                          "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-id", "job1", "dist3.py", "verbose-ok"),
            files=D3FILES,
            input="torchrun",
            timeout=60,
            note="--rdzv-backend etcd (a Kubernetes recipe) where python-etcd is not installed"
                 " (https://github.com/pytorch/pytorch/issues/123714)",
        ),
        _dist3("torchrun-subgroup-created-by-one-rank", ["nccl.timeout"], "subgroup-one-rank",
               "dist.new_group inside a branch only rank 0 takes, then a barrier on it: rank 1 waits in the default"
               " group's barrier until gloo's timeout (https://github.com/pytorch/pytorch/issues/130102)"),
        _dist3("torchrun-send-to-own-rank", ["config.bad_argument"], "send-self",
               "dist.send with dst equal to the sender's own rank (a pipeline stage's next-rank arithmetic):"
               " 'Invalid destination rank' (https://github.com/pytorch/pytorch/pull/89004)"),
        _dist3("torchrun-record-error-file", ["model.file_missing"], "record-missing",
               "a @record-decorated main whose torch.load misses the rank's checkpoint: torchrun's summary carries"
               " the traceback from the error file"),
        Case(
            id="torchrun-debug-logging-ok",
            expect=[],
            argv=torchrun("--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                          "--rdzv-endpoint", "127.0.0.1:{port}", "dist3.py", "verbose-ok"),
            files=D3FILES,
            env={"TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "LOGLEVEL": "INFO"},
            input="torchrun",
            exit="ok",
            timeout=90,
            note="healthy: the debug settings of a hang hunt (TORCH_CPP_LOG_LEVEL=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL,"
                 " LOGLEVEL=INFO) on a working c10d launch: store, libuv and wrapper chatter",
        ),
        Case(
            id="torchrun-two-agents-c10d-ok",
            expect=[],
            argv=["bash", "two_agents.sh", "job-7", "job-7"],
            files=D3FILES,
            input="torchrun",
            exit="ok",
            timeout=120,
            note="healthy: two torchrun agents (--nnodes 2) meet through one c10d rendezvous endpoint",
        ),
        Case(
            id="torchrun-rdzv-id-differs-between-nodes",
            expect=["dist.rendezvous_failed"],
            argv=["bash", "two_agents.sh", "job-8", "job-7"],
            files=D3FILES,
            input="torchrun",
            timeout=120,
            note="two agents of one job started with different --rdzv-id (a job id variable that differs per node):"
                 " each waits in its own rendezvous until join_timeout"
                 " (https://github.com/ymcui/Chinese-LLaMA-Alpaca-2/issues/274)",
        ),
    ],
)
