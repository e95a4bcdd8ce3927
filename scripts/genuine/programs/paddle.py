"""PaddlePaddle's CPU wheel (what `pip install paddlepaddle` gives, instead of `paddlepaddle-gpu`): asked for the
GPU, a crash inside the process that Paddle's signal handler reports, a host allocation larger than the machine,
and a small computation that works (healthy).
"""

from functools import partial

from case import Program, Release, script_case

_case = partial(script_case, prelude="import paddle\n", env={"OMP_NUM_THREADS": "1"}, timeout=180)


CASES = [
    _case("cpu-matmul-healthy", [],
          "x = paddle.rand([64, 64])\nprint(paddle.__version__, paddle.device.get_device(), float((x @ x).sum()) > 0)\n",
          "healthy: a matrix product on the CPU", exit="ok"),
    _case("set-device-gpu-cpu-wheel", ["runtime.backend_mismatch"], "paddle.set_device('gpu')\n",
          "the CPU wheel asked for the GPU (paddlepaddle installed instead of paddlepaddle-gpu)"),
    _case("segfault-reported", ["process.segfault"],
          "import ctypes\nprint(float(paddle.ones([2, 2]).sum()))\nctypes.string_at(0)\n",
          "a native crash in the process (a read of address 0, as a broken cuDNN or extension would): Paddle's "
          "signal handler prints its FatalError summary and glog's SIGSEGV line "
          "(https://github.com/PaddlePaddle/PaddleOCR/issues/8739)"),
    _case("host-alloc-too-large", ["memory.host_oom"],
          "x = paddle.empty([1 << 40], dtype='float32')\nprint(x.shape)\n",
          "a 4 TiB tensor on the CPU: the host allocator refuses (ResourceExhausted, errno 12)"),
]

PROGRAM = Program(
    name="paddle",
    releases=[
        Release(label="3.3.1", requirements=["paddlepaddle==3.3.1"]),
    ],
    cases=CASES,
    dist="paddlepaddle",
)
