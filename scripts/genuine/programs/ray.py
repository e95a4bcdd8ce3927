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
    ],
)
