"""sentence-transformers (``pip install sentence-transformers``: the embedding and rerank models that RAG stacks,
infinity, Xinference and users' own services load) as a user's script runs it: ``SentenceTransformer(name,
**kwargs).encode([...])`` and ``CrossEncoder(name).predict([...])`` on the tiny random Qwen2 of
``make_tiny_qwen.py``. Healthy: the plain checkpoint (sentence-transformers adds mean pooling and loads it in
bfloat16 on the CPU, with a note that float32 may be faster), the same model saved in its own format (modules.json,
1_Pooling) and loaded back, and a CrossEncoder scoring one pair.

The failures of its issue tracker: ``device="cuda"`` with a CPU build of torch, a hub id on an offline host with an
empty cache, a local path that does not exist, ``backend="onnx"`` / ``"openvino"`` without their extras, a backend
name it does not have, weights cut short.

One release, 6.2.0 (the newest), with the transformers it resolves (5.x) over the CPU torch of this machine; the
``after`` step removes PyPI's CUDA torchvision as elsewhere. Every case runs offline.

Not recorded: a saved model whose 1_Pooling folder was left out of a copy (it fails with "Pooling.__init__() missing
1 required positional argument: 'embedding_dimension'", which no line ties to the folder), a checkpoint whose
config has an auto_map without trust_remote_code (transformers knows the model type and loads it: no failure), and
``prompt_name`` naming a prompt the model has not (6.2 encodes without it).
"""

from case import BUILD_DAMAGED_TINY, DROP_TORCHVISION, OFFLINE_ENV, Case, Program, Release, tiny_files

ENV = {**OFFLINE_ENV, "HF_HOME": "{work}/hf-home", "CUDA_VISIBLE_DEVICES": ""}

# the user's scripts (argv: model name, then key=value keyword arguments for the constructor)
ENCODE = '''\
import sys
from sentence_transformers import SentenceTransformer

kwargs = dict(a.split("=", 1) for a in sys.argv[2:])
model = SentenceTransformer(sys.argv[1], **kwargs)
print(model.encode(["hello world", "the capital of France"]).shape)
'''
RERANK = '''\
import sys
from sentence_transformers import CrossEncoder

model = CrossEncoder(sys.argv[1], **dict(a.split("=", 1) for a in sys.argv[2:]))
print(model.predict([("what is the capital of France", "Paris is the capital of France")]))
'''
SAVE = '''\
import sys
from sentence_transformers import SentenceTransformer

SentenceTransformer(sys.argv[1]).save(sys.argv[2])
'''



def _case(id: str, expect: list[str], note: str, script: str, args: str, *, prep: str = "", damage: str = "",
          exit: str = "fail", build: bool = True) -> Case:
    """The tiny model built (and damaged) unless ``build`` is off, ``prep`` run quietly, then the user's script."""
    files = {**tiny_files(damage), "encode.py": ENCODE, "rerank.py": RERANK, "save.py": SAVE}
    line = (BUILD_DAMAGED_TINY if build else "") + prep + f"exec {{python}} {script} {args}"
    return Case(id=id, expect=expect, input="transformers", env=dict(ENV), note=note, timeout=300, exit=exit,
                files=files, argv=["bash", "-c", line])


CASES = [
    _case("encode-healthy", [], "healthy: SentenceTransformer on the plain checkpoint (mean pooling added), two "
          "sentences encoded on the CPU", "encode.py", "{work}/tiny", exit="ok"),
    _case("saved-format-healthy", [], "healthy: the model saved in sentence-transformers' own format "
          "(modules.json, 1_Pooling) and loaded back", "encode.py", "{work}/st",
          prep="{python} save.py {work}/tiny {work}/st >/dev/null 2>&1 || exit 97; ", exit="ok"),
    _case("cross-encoder-healthy", [], "healthy: CrossEncoder scores one query-passage pair",
          "rerank.py", "{work}/tiny", exit="ok"),
    _case("device-cuda-cpu-torch", ["runtime.backend_mismatch"],
          "device='cuda' where torch is a CPU build (Torch not compiled with CUDA enabled)",
          "encode.py", "{work}/tiny device=cuda"),
    _case("hub-offline-not-cached", ["download.incomplete"],
          "a hub id on an offline host with an empty cache", "encode.py", "BAAI/bge-small-en-v1.5", build=False),
    _case("local-path-missing", ["model.file_missing"], "a local model path that does not exist",
          "encode.py", "/models/bge-m3", build=False),
    _case("onnx-backend-not-installed", ["runtime.backend_mismatch"],
          "backend='onnx' without sentence-transformers[onnx] (Optimum and ONNX Runtime)",
          "encode.py", "{work}/tiny backend=onnx"),
    _case("openvino-backend-not-installed", ["runtime.backend_mismatch"],
          "backend='openvino' without sentence-transformers[openvino]", "encode.py", "{work}/tiny backend=openvino"),
    _case("backend-unknown", ["config.bad_argument"], "backend='tensorrt', a backend sentence-transformers has not",
          "encode.py", "{work}/tiny backend=tensorrt"),
    _case("weights-truncated", ["model.shard_corrupt"], "model.safetensors cut short (a copy that stopped part-way)",
          "encode.py", "{work}/tiny", damage="p = M / 'model.safetensors'\np.write_bytes(p.read_bytes()[:30000])"),
]

PROGRAM = Program(
    name="sentencetransformers",
    releases=[Release(label="6.2.0", requirements=["torch==2.13.0", "sentence-transformers==6.2.0"],
                      after=DROP_TORCHVISION)],
    cases=CASES,
    dist="sentence-transformers",
)
