"""JAX with its CUDA plugin (`pip install "jax[cuda12]"` / `"jax[cuda13]"`) on a machine without a GPU or driver: a
jitted computation that falls back to the CPU (healthy), the GPU asked for by name, a device mesh larger than the
devices there are, and a multi-process run whose coordinator never comes up.

The plugin wheels bring their own CUDA libraries, so what is missing here is only the driver (libcuda) and the GPU:
what a container started without the NVIDIA runtime sees.
"""

from functools import partial

from case import Program, Release, per_release, script_case

_case = partial(script_case, prelude="import jax\nimport jax.numpy as jnp\n", env={"OMP_NUM_THREADS": "1"},
                timeout=180)

CASES = [
    _case("jit-cpu-fallback-healthy", [],
          "x = jnp.ones((64, 64))\nprint(jax.__version__, jax.devices(), float(jax.jit(lambda a: a @ a)(x).sum()))\n",
          "healthy: with no GPU the CUDA plugin stays out of the way and the computation runs on the CPU", exit="ok"),
    _case("devices-gpu-none-present", ["runtime.no_gpu_visible"], "print(jax.devices('gpu'))\n",
          "jax.devices('gpu') where no GPU backend came up (no driver, no GPU visible to the process)"),
    _case("make-mesh-more-than-devices", ["config.insufficient_gpus"],
          "mesh = jax.make_mesh((4, 2), ('data', 'model'))\nprint(mesh)\n",
          "a 4 x 2 device mesh (written for eight GPUs) on a process that has one device"),
    _case("distributed-coordinator-missing", ["dist.rendezvous_failed"],
          "jax.distributed.initialize(coordinator_address='127.0.0.1:{port}', num_processes=2, process_id=1, "
          "initialization_timeout=10)\nprint('up')\n",
          "process 1 of 2 started while process 0 (the coordinator) is not up: its registration with the coordination "
          "service times out and XLA terminates the process"),
]

PROGRAM = Program(
    name="jax",
    releases=[
        Release(label="0.4.38", requirements=["jax[cuda12]==0.4.38"]),
        Release(label="0.10.2", requirements=["jax[cuda13]==0.10.2"]),
    ],
    # 0.10 prints its CUDA plugin's failed initialisation before any computation: the CPU fallback runs on 0.4.38 only
    cases=per_release(CASES, releases={"jit-cpu-fallback-healthy": ("0.4.38",)}),
    dist="jax",
)
