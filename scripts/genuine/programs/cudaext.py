"""Building a CUDA extension against a pip torch on a machine with no CUDA toolkit: what a source install of a
kernel package (causal-conv1d, the way mamba's README installs it) and a plain ``CUDAExtension`` setup.py print, and a
C++-only extension that builds (healthy). torch's wheels bring the CUDA runtime, never nvcc.
"""

from case import Case, Program, Release

SETUP_CUDA = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
setup(name="relu_ext", ext_modules=[CUDAExtension("relu_ext", ["relu.cpp", "relu_kernel.cu"])],
      cmdclass={"build_ext": BuildExtension})
"""

SETUP_CPP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension
setup(name="relu_ext", ext_modules=[CppExtension("relu_ext", ["relu.cpp"])], cmdclass={"build_ext": BuildExtension})
"""

RELU_CPP = """\
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu, "relu"); }
"""

RELU_CU = """\
__global__ void relu_kernel(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n && x[i] < 0) x[i] = 0; }
"""

CASES = [
    Case(
        id="cpp-extension-builds-healthy",
        expect=[],
        argv=["bash", "-c", "{python} setup.py build_ext --inplace && {python} -c 'import torch, relu_ext; "
              "print(relu_ext.relu(torch.tensor([-1.0, 2.0])))'"],
        files={"setup.py": SETUP_CPP, "relu.cpp": RELU_CPP},
        note="healthy: a C++-only torch extension compiles with the system compiler and imports",
        exit="ok",
        timeout=600,
    ),
    Case(
        id="cuda-extension-no-cuda-home",
        expect=["runtime.backend_mismatch"],
        argv=["{python}", "setup.py", "build_ext", "--inplace"],
        files={"setup.py": SETUP_CUDA, "relu.cpp": RELU_CPP, "relu_kernel.cu": RELU_CU},
        env={"CUDA_HOME": ""},
        note="a CUDAExtension built where no CUDA toolkit is installed: torch's cpp_extension finds no CUDA_HOME",
        timeout=600,
    ),
    Case(
        id="causal-conv1d-source-no-nvcc",
        expect=["runtime.backend_mismatch"],
        argv=["{python}", "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-cache-dir",
              "causal-conv1d==1.4.0"],
        note="a kernel package installed from its source distribution with no nvcc: its setup.py warns and then "
        "fails (https://github.com/state-spaces/mamba/issues/561)",
        timeout=600,
    ),
]

PROGRAM = Program(
    name="cudaext",
    releases=[
        Release(label="2.13.0", requirements=["torch==2.13.0", "numpy", "setuptools", "wheel", "packaging", "ninja"]),
    ],
    cases=CASES,
    dist="torch",
)
