"""Ray on one CPU-only node: what a GPU request it can never satisfy prints (vLLM's and Train's usual failure).

Each case starts its own local Ray instance (ray.init() without an address), with a short temp dir of its own
so the session's socket paths stay within the 107-byte limit of a unix socket.
"""

from typing import Any

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

# --- genuine sweep 3: joining clusters, runtime environments, named actors, spilling --------------------------

# a driver that joins the cluster at argv[1] (no init arguments of its own, as a launcher's ray.init(address=...))
JOIN = """\
import sys

import ray

ray.init(address=sys.argv[1])
print(ray.cluster_resources())
"""

# a head of the other pinned Ray release on this node, then this release's driver joining it; the driver hangs
# in its shutdown after the error, so it gets 40 s; the harness ends the head with the case's process group
MISMATCH = """\
OTHER={bin}/../../ray-$1/bin
$OTHER/ray start --head --block --port {port} --num-cpus 1 --include-dashboard=false --temp-dir /tmp/rg-{port} \\
    --disable-usage-stats &
for i in $(seq 90); do
    {python} -c "import socket, sys; sys.exit(socket.socket().connect_ex(('127.0.0.1', {port})))" && break
    sleep 1
done
sleep 3
exec timeout 40 {python} join.py 127.0.0.1:{port}
"""

# a job's runtime_env names a working_dir that is not there (the job submitted from another directory)
WORKDIR = """\
import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}", runtime_env={"working_dir": "./src"})
print(ray.cluster_resources())
"""

# an actor whose runtime_env asks for a conda environment on a node without conda (a recipe written for an
# Anyscale/conda image, run in a pip container)
CONDA = """\
import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote(runtime_env={"conda": "vllm-env"})
class Engine:
    def ready(self):
        return True


e = Engine.remote()
print(ray.get(e.ready.remote(), timeout=120))
"""

# a second driver looks up the engine actor by name in another namespace (or before it was created)
NAMED = """\
import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote(num_cpus=0)
class Engine:
    def ready(self):
        return True


engine = Engine.options(name="llm-engine", namespace="serving").remote()
ray.get(engine.ready.remote())
print("engine up in namespace 'serving'", flush=True)
handle = ray.get_actor("llm-engine")  # the default namespace: an anonymous one per driver
"""

# the actor's constructor loads the model from a path that this node does not have (the weights were
# downloaded on the head node only)
ACTOR_INIT = """\
import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote
class Worker:
    def __init__(self, path):
        with open(path + "/config.json") as f:
            self.config = f.read()

    def ready(self):
        return True


w = Worker.remote("/models/Qwen2.5-7B-Instruct")
print(ray.get(w.ready.remote()))
"""

# a task's process crashes under it (a native extension's segfault), retried once
TASK_EXIT = """\
import os
import signal

import ray

ray.init(num_cpus=1, include_dashboard=False, _temp_dir="/tmp/rg-{port}")


@ray.remote(max_retries=1)
def shard(i):
    os.kill(os.getpid(), signal.SIGSEGV)


print(ray.get(shard.remote(0)))
"""

# healthy: more pinned objects than the object store holds (spilling to disk), with a small store
SPILL = """\
import ray

ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 << 20, _temp_dir="/tmp/rg-{port}")
refs = [ray.put(bytearray(20 << 20)) for _ in range(8)]
print("held", len(refs), "objects of 20 MiB:", sum(len(ray.get(r)) for r in refs) >> 20, "MiB", flush=True)
ray.shutdown()
"""

# a driver that joins a cluster through the Ray Client (ray://HEAD:10001), from the minimal `pip install ray`
CLIENT = """\
import sys

import ray

ray.init(sys.argv[1])
print(ray.cluster_resources())
"""

# a Ray Serve app started from the minimal `pip install ray` (no ray[serve] extra)
SERVE = """\
from ray import serve


@serve.deployment(num_replicas=1)
class Chat:
    async def __call__(self, request):
        return {"text": "hello"}


serve.run(Chat.bind(), route_prefix="/v1")
"""

def _py(id: str, expect: list[str], script: str, source: str, *args: str, **kw: Any) -> Case:
    """A case that writes one script and runs it with the release's python (``args`` after the script)."""
    return Case(id=id, expect=expect, argv=["{python}", script, *args], files={script: source}, **kw)


PROGRAM = Program(
    name="ray",
    dist="ray",
    releases=[
        Release(label="2.40.0", requirements=["ray==2.40.0"]),
        Release(label="2.60.0", requirements=["ray==2.60.0"]),
    ],
    cases=[
        _py("local-tasks-ok", [], "ok.py", OK,
            exit="ok",
            timeout=180,
            note="healthy: a local Ray instance runs four CPU tasks; its start-up warnings",
        ),
        _py("placement-group-infeasible", ["config.insufficient_gpus"], "pg.py", PG,
            timeout=180,
            note="a placement group of two GPU bundles on a node with no GPU: Ray reports it infeasible",
        ),
        _py("gpu-task-infeasible", ["config.insufficient_gpus"], "task.py", TASK,
            timeout=180,
            note="a task with num_gpus=1 on a node with no GPU never schedules",
        ),
        # --- genuine sweep 2 ---------------------------------------------------------------------------
        _py("actors-ok", [], "actors.py", ACTORS_OK,
            exit="ok",
            timeout=180,
            note="healthy: three stateful actors and an object put and fetched on a local instance",
        ),
        _py("init-address-unreachable", ["dist.rendezvous_failed"], "connect.py", CONNECT, "127.0.0.1:{port}",
            env={"RAY_gcs_rpc_server_reconnect_timeout_s": "10", "RAY_gcs_server_request_timeout_seconds": "10"},
            timeout=240,
            note="ray.init(address=HEAD:PORT) where no head node listens (head not started, wrong port): the"
                 " driver cannot reach the GCS (https://github.com/vllm-project/vllm/issues/15385)",
        ),
        _py("init-auto-no-cluster", ["dist.rendezvous_failed"], "connect.py", CONNECT, "auto",
            timeout=120,
            note="ray.init(address='auto') on a node where `ray start` was never run"
                 " (https://github.com/ray-project/ray/issues/8089)",
        ),
        _py("memory-monitor-kills-task", ["memory.host_oom"], "memory.py", MEMORY,
            env={"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100"},
            timeout=180,
            note="the node is above Ray's memory-usage threshold: the memory monitor kills the task's worker"
                 " (https://github.com/real-stanford/flingbot/issues/11)",
        ),
        _py("actor-sigkilled", ["memory.host_oom"], "actor.py", ACTOR,
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
        _py("init-called-twice", ["config.bad_argument"], "twice.py", TWICE,
            timeout=180,
            note="ray.init called a second time in one driver (a library initialises Ray again):"
                 " 'Maybe you called ray.init twice by accident?' (https://github.com/vllm-project/vllm/issues/486)",
        ),
        _py("object-store-larger-than-ram", ["config.bad_argument"], "store.py", STORE,
            timeout=120,
            note="object_store_memory set larger than the host's RAM (a value written for a bigger machine): ray.init"
                 " refuses it (https://github.com/Shengjiewang-Jason/EfficientZeroV2/issues/6)",
        ),
        # --- genuine sweep 3 ---------------------------------------------------------------------------
        Case(
            id="driver-newer-than-cluster",
            expect=["runtime.backend_mismatch"],
            argv=["bash", "mismatch.sh", "2.40.0"],
            files={"mismatch.sh": MISMATCH, "join.py": JOIN},
            releases=("2.60.0",),
            timeout=200,
            note="a Ray 2.40 head on the node, a driver from a Ray 2.60 environment joins it: 'Version mismatch:"
                 " The cluster was started with' (https://github.com/Unakar/Logic-RL/issues/30)",
        ),
        Case(
            id="gcs-port-in-use",
            expect=["server.port_in_use"],
            argv=["{python}", "hold.py", "{port}", "{bin}/ray", "start", "--head", "--port", "{port}", "--num-cpus", "1",
                  "--include-dashboard=false", "--temp-dir", "/tmp/rg-{port}", "--disable-usage-stats"],
            files={"hold.py": HOLD},
            timeout=180,
            note="`ray start --head --port P` where another process (a head left running, another service) holds P"
                 " (https://github.com/ray-project/ray/issues/14098)",
        ),
        _py("runtime-env-working-dir-missing", ["config.bad_argument"], "workdir.py", WORKDIR,
            timeout=120,
            note="ray.init(runtime_env={'working_dir': './src'}) run from a directory without ./src"
                 " (https://github.com/ray-project/ray/issues/20483)",
        ),
        _py("runtime-env-conda-not-installed", ["runtime.backend_mismatch"], "conda.py", CONDA,
            timeout=200,
            note="an actor with runtime_env={'conda': NAME} on a node without conda: RuntimeEnvSetupError"
                 " (https://github.com/ray-project/ray/issues/28105)",
        ),
        _py("get-actor-wrong-namespace", ["config.bad_argument"], "named.py", NAMED,
            timeout=180,
            note="ray.get_actor of a named actor created in another namespace: 'Failed to look up actor with name'"
                 " (https://github.com/RLinf/RLinf/issues/237)",
        ),
        _py("actor-init-model-path-missing", ["model.file_missing"], "actor_init.py", ACTOR_INIT,
            timeout=180,
            note="an actor's constructor opens a model directory this node does not have: ActorDiedError wrapping"
                 " FileNotFoundError (https://github.com/GuanxingLu/vlarl/issues/8)",
        ),
        _py("task-worker-segfault", ["process.segfault"], "task_exit.py", TASK_EXIT,
            timeout=180,
            note="the worker process of a task dies of SIGSEGV (a native extension), retried once:"
                 " WorkerCrashedError (https://github.com/secretflow/secretflow/issues/887)",
        ),
        _py("object-spilling-ok", [], "spill.py", SPILL,
            exit="ok",
            timeout=180,
            note="healthy: eight 20 MiB objects held in an 80 MiB object store (spilled / fallback-allocated)",
        ),
        _py("client-without-client-extra", ["runtime.backend_mismatch"], "client.py", CLIENT, "ray://127.0.0.1:{port}",
            timeout=120,
            note="ray.init('ray://HEAD:10001') from an environment with the minimal ray package: 'Ray Client requires"
                 " pip package `ray[client]`' (https://github.com/Eventual-Inc/Daft/pull/1631)",
        ),
        _py("serve-without-serve-extra", ["runtime.backend_mismatch"], "serve_app.py", SERVE,
            timeout=120,
            note="a Ray Serve app run where only the minimal ray package is installed: ModuleNotFoundError with"
                 " 'You can run `pip install \"ray[serve]\"`'",
        ),
    ],
)
