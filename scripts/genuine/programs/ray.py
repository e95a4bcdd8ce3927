"""Ray on one CPU-only node: what a GPU request it can never satisfy prints (vLLM's and Train's usual failure).

Each case starts its own local Ray instance (ray.init() without an address), with a short temp dir of its own
so the session's socket paths stay within the 107-byte limit of a unix socket.
"""

from case import Case, Program, Release

PG = '''\
import ray
from ray.util.placement_group import placement_group

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")
pg = placement_group([{"GPU": 1, "CPU": 1}, {"GPU": 1, "CPU": 1}], strategy="STRICT_PACK")
ready, _ = ray.wait([pg.ready()], timeout=20)
if not ready:
    raise RuntimeError("placement group with 2 GPUs was not ready after 20 s")
'''

TASK = '''\
import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote(num_gpus=1)
def needs_gpu():
    return 1


ref = needs_gpu.remote()
ready, _ = ray.wait([ref], timeout=20)
if not ready:
    raise TimeoutError("task asking for a GPU was never scheduled")
'''

OK = '''\
import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote
def square(x):
    return x * x


print("squares:", ray.get([square.remote(i) for i in range(4)]))
ray.shutdown()
'''

# a driver pointed at a cluster that is not there: an explicit GCS address nobody listens on, or "auto"
CONNECT = """\
import sys

import ray

ray.init(address=sys.argv[1], _temp_dir="/tmp/rg-{port}")
print(ray.cluster_resources())
"""

# Ray's memory monitor kills the worker whose task holds the most memory once the node is above the threshold
# (RAY_memory_usage_threshold, lowered here so that this node's ordinary use is already above it)
MEMORY = """\
import time

import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote(max_retries=0)
def build_batch():
    buf = bytearray(256 << 20)  # 256 MiB of activations
    time.sleep(20)
    return len(buf)


print(ray.get(build_batch.remote(), timeout=60))
"""

# an actor whose process is SIGKILLed under it (what the kernel's OOM killer does to a rank)
ACTOR = """\
import os
import signal

import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote
class Rank:
    def ping(self):
        return os.getpid()

    def step(self):
        os.kill(os.getpid(), signal.SIGKILL)


r = Rank.remote()
print("actor pid", ray.get(r.ping.remote()), flush=True)
ray.get(r.step.remote())
"""

# healthy: a few actors that hold state, with the warnings a small local instance prints
ACTORS_OK = """\
import ray

ray.init(num_cpus=2, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote(num_cpus=0.5)
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


counters = [Counter.remote() for _ in range(3)]
print("totals:", ray.get([c.add.remote(i + 1) for i, c in enumerate(counters)]))
ref = ray.put(list(range(1000)))
print("sum:", sum(ray.get(ref)))
ray.shutdown()
"""

# the dashboard port another service holds (a second Ray head on the same machine, a notebook server)
DASH = """\
import ray

ray.init(num_cpus=1, include_dashboard=True, dashboard_port={port}, _temp_dir="/tmp/rg-{port}")
"""

HOLD = """\
import socket
import subprocess
import sys

port = int(sys.argv[1])
sock = socket.socket()
sock.bind(("127.0.0.1", port))
sock.listen(4)
sys.exit(subprocess.call(sys.argv[2:]))
"""

# a library (an engine, a trainer) calls ray.init after the script already did
TWICE = """\
import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")
ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")
"""

# an object store sized for a bigger machine than this one (a hard-coded object_store_memory)
STORE = """\
import os

import ray

ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
ray.init(num_cpus=1, include_dashboard=False, object_store_memory=int(ram * 1.5), _temp_dir="/tmp/rg-{port}")
"""

PROGRAM = Program(
    name="ray",
    dist="ray",
    releases=[
        Release(label="2.40.0", requirements=["ray==2.40.0"]),
        Release(label="2.60.0", requirements=["ray==2.60.0"]),
    ],
    cases=[
        Case(
            id="local-tasks-ok",
            expect=[],
            argv=["{python}", "ok.py"],
            files={"ok.py": OK},
            exit="ok",
            timeout=180,
            note="healthy: a local Ray instance runs four CPU tasks; its start-up warnings",
        ),
        Case(
            id="placement-group-infeasible",
            expect=["config.insufficient_gpus"],
            argv=["{python}", "pg.py"],
            files={"pg.py": PG},
            timeout=180,
            note="a placement group of two GPU bundles on a node with no GPU: Ray reports it infeasible",
        ),
        Case(
            id="gpu-task-infeasible",
            expect=["config.insufficient_gpus"],
            argv=["{python}", "task.py"],
            files={"task.py": TASK},
            timeout=180,
            note="a task with num_gpus=1 on a node with no GPU never schedules",
        ),
        # --- genuine sweep 2 ---------------------------------------------------------------------------
        Case(
            id="actors-ok",
            expect=[],
            argv=["{python}", "actors.py"],
            files={"actors.py": ACTORS_OK},
            exit="ok",
            timeout=180,
            note="healthy: three stateful actors and an object put and fetched on a local instance",
        ),
        Case(
            id="init-address-unreachable",
            expect=["dist.rendezvous_failed"],
            argv=["{python}", "connect.py", "127.0.0.1:{port}"],
            files={"connect.py": CONNECT},
            env={"RAY_gcs_rpc_server_reconnect_timeout_s": "10", "RAY_gcs_server_request_timeout_seconds": "10"},
            timeout=240,
            note="ray.init(address=HEAD:PORT) where no head node listens (head not started, wrong port): the"
                 " driver cannot reach the GCS (https://github.com/vllm-project/vllm/issues/15385)",
        ),
        Case(
            id="init-auto-no-cluster",
            expect=["dist.rendezvous_failed"],
            argv=["{python}", "connect.py", "auto"],
            files={"connect.py": CONNECT},
            timeout=120,
            note="ray.init(address='auto') on a node where `ray start` was never run"
                 " (https://github.com/ray-project/ray/issues/8089)",
        ),
        Case(
            id="memory-monitor-kills-task",
            expect=["memory.host_oom"],
            argv=["{python}", "memory.py"],
            files={"memory.py": MEMORY},
            env={"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100"},
            timeout=180,
            note="the node is above Ray's memory-usage threshold: the memory monitor kills the task's worker"
                 " (https://github.com/real-stanford/flingbot/issues/11)",
        ),
        Case(
            id="actor-sigkilled",
            expect=["memory.host_oom"],
            argv=["{python}", "actor.py"],
            files={"actor.py": ACTOR},
            timeout=180,
            note="an actor process SIGKILLed mid-call (as the kernel OOM killer does): ActorDiedError in the driver"
                 " (https://github.com/Unakar/Logic-RL/issues/18)",
        ),
        Case(
            id="dashboard-port-in-use",
            expect=["server.port_in_use"],
            argv=["{python}", "hold.py", "{port}", "{python}", "dash.py"],
            files={"dash.py": DASH, "hold.py": HOLD},
            timeout=180,
            note="ray.init with a dashboard port another process holds (a second local cluster on the node;"
                 " https://github.com/facebookresearch/fairchem/pull/1787)",
        ),
        Case(
            id="start-bad-num-cpus",
            expect=["config.bad_argument"],
            argv=["{bin}/ray", "start", "--head", "--num-cpus", "two", "--temp-dir", "/tmp/rg-{port}"],
            timeout=120,
            note="`ray start --head --num-cpus two`: the CLI refuses the value",
        ),
        Case(
            id="init-called-twice",
            expect=["config.bad_argument"],
            argv=["{python}", "twice.py"],
            files={"twice.py": TWICE},
            timeout=180,
            note="ray.init called a second time in one driver (a library initialises Ray again):"
                 " 'Maybe you called ray.init twice by accident?' (https://github.com/vllm-project/vllm/issues/486)",
        ),
        Case(
            id="object-store-larger-than-ram",
            expect=["config.bad_argument"],
            argv=["{python}", "store.py"],
            files={"store.py": STORE},
            timeout=120,
            note="object_store_memory set larger than the host's RAM (a value written for a bigger machine): ray.init"
                 " refuses it (https://github.com/Shengjiewang-Jason/EfficientZeroV2/issues/6)",
        ),
    ],
)
