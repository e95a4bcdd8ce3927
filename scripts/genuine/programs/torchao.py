"""torchao (``pip install torchao``: PyTorch's quantization library, behind transformers' ``TorchAoConfig`` and the
engines' ``--quantization torchao``) as a user's script runs it: the tiny random Qwen2 of ``make_tiny_qwen.py``
loaded with ``AutoModelForCausalLM.from_pretrained(..., quantization_config=TorchAoConfig(<config>))`` and asked for
four tokens. Healthy: ``import torchao`` on a CPU host (it says it failed to load its CUDA-only kernel libraries,
``_C_mxfp8`` and ``_C_cutlass_90a``, and goes on), int8 weight-only and int8 dynamic quantization on the CPU.

The failures of the issue trackers: float8 dynamic quantization where no GPU of compute capability 8.9 is there (the
CPU here; an Ampere card in the reports), int4 weight-only without the kernel package its packing needs (``mslk``),
the string quant types of the older API (``TorchAoConfig("int4_weight_only")``), ``device_map="cuda"`` with a CPU
build of torch.

One release, 0.18.0 (the newest), with the transformers (5.x) and accelerate pip resolves, over the CPU torch of this
machine; the ``after`` step removes PyPI's CUDA torchvision as elsewhere. Every case runs offline.

Not recorded: float8 weight-only and int4 weight-only with a group size the layers' widths do not divide, which both
quantize and generate on the CPU (no failure to record).
"""

from case import BUILD_TINY, DROP_TORCHVISION, MAKE_TINY, OFFLINE_ENV, Case, Program, Release

# the user's script (argv: model dir, quantization, device map)
QUANTIZE = '''\
import sys

import torch
import torchao.quantization as q
from transformers import AutoModelForCausalLM, AutoTokenizer, TorchAoConfig

configs = {
    "int8-weight-only": lambda: q.Int8WeightOnlyConfig(),
    "int8-dynamic": lambda: q.Int8DynamicActivationInt8WeightConfig(),
    "float8-dynamic": lambda: q.Float8DynamicActivationFloat8WeightConfig(),
    "int4-weight-only": lambda: q.Int4WeightOnlyConfig(group_size=32),
}
kind = sys.argv[2]
config = TorchAoConfig(quant_type=configs[kind]() if kind in configs else kind)
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], quantization_config=config, device_map=sys.argv[3],
                                             dtype=torch.bfloat16)
tok = AutoTokenizer.from_pretrained(sys.argv[1])
print(tok.decode(model.generate(**tok("hello", return_tensors="pt").to(model.device), max_new_tokens=4)[0]))
'''


def _case(id: str, expect: list[str], note: str, kind: str, device_map: str = "cpu", *, exit: str = "fail") -> Case:
    """The tiny model built quietly, then loaded with the torchao quantization ``kind`` on ``device_map``."""
    return Case(id=id, expect=expect, input="transformers", env=dict(OFFLINE_ENV), note=note, timeout=300,
                exit=exit, files={"make_tiny_qwen.py": MAKE_TINY, "quantize.py": QUANTIZE},
                argv=["bash", "-c", BUILD_TINY + f"exec {{python}} quantize.py {{work}}/tiny {kind} {device_map}"])


CASES = [
    Case(id="import-healthy", expect=[], input="mixed", env=dict(OFFLINE_ENV), exit="ok",
         note="healthy: import torchao on a CPU host (it reports its CUDA-only kernel libraries as not loaded)",
         argv=["{python}", "-c", "import torchao; print(torchao.__version__)"]),
    _case("int8-weight-only-healthy", [], "healthy: int8 weight-only quantization on the CPU, four tokens generated",
          "int8-weight-only", exit="ok"),
    _case("int8-dynamic-healthy", [], "healthy: int8 dynamic activation / int8 weight quantization on the CPU",
          "int8-dynamic", exit="ok"),
    _case("float8-dynamic-no-sm89", ["config.dtype_unsupported"],
          "float8 dynamic quantization where no GPU of compute capability 8.9 or newer is there", "float8-dynamic"),
    _case("int4-packing-package-missing", ["runtime.backend_mismatch"],
          "int4 weight-only quantization whose packing needs a kernel package that is not installed (mslk)",
          "int4-weight-only"),
    _case("string-quant-type-removed", ["config.bad_argument"],
          "TorchAoConfig('int4_weight_only'), the string API of older docs, which transformers 5 no longer accepts",
          "int4_weight_only"),
    _case("device-map-cuda-cpu-torch", ["runtime.backend_mismatch"],
          "device_map='cuda' where torch is a CPU build", "int8-weight-only", "cuda"),
]

PROGRAM = Program(
    name="torchao",
    releases=[Release(label="0.18.0", requirements=["torch==2.13.0", "torchao==0.18.0", "transformers", "accelerate"],
                      after=DROP_TORCHVISION)],
    cases=CASES,
    dist="torchao",
)
