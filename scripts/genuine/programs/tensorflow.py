"""TensorFlow's GPU wheel on a host without an NVIDIA driver (a CPU node, or a container started without `--gpus`):
the start-up lines it prints there on a healthy run, a tensor larger than the host's memory, and a GPU-only op
placement that cannot be satisfied.
"""

from functools import partial

from case import Program, Release, script_case

QUIET = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}

_case = partial(script_case, prelude="import tensorflow as tf\n", env=QUIET, timeout=240)


CASES = [
    _case("cpu-node-healthy", [],
          "print('GPUs:', tf.config.list_physical_devices('GPU'))\nx = tf.random.uniform([64, 64])\n"
          "print('ok', float(tf.reduce_sum(x @ x)) > 0)\n",
          "healthy: the GPU wheel on a CPU-only host finds no driver and runs on the CPU (its cuInit error line is "
          "expected there)", exit="ok"),
    _case("host-oom-tensor", ["memory.host_oom"],
          "x = tf.zeros([1 << 20, 1 << 20])\nprint(x.shape)\n",
          "a 4 TiB tensor on the CPU: OOM when allocating tensor ... by allocator cpu"),
    _case("gpu-placement-no-gpu", ["runtime.no_gpu_visible"],
          "tf.config.set_soft_device_placement(False)\nwith tf.device('/GPU:0'):\n    x = tf.ones([2, 2])\n"
          "print(x.device)\n",
          "an op pinned to /GPU:0 with soft placement off, on a host where TensorFlow found no GPU"),
]

PROGRAM = Program(
    name="tensorflow",
    releases=[
        Release(label="2.21.0", requirements=["tensorflow==2.21.0"]),
    ],
    cases=CASES,
    dist="tensorflow",
)
