"""`eval` scores the pack; the bundled pack meets the bar on the shared corpus."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_triage.authoring.evaluate import evaluate
from tests.conftest import CORPUS, FIXTURES, ROOT

# The shared corpora of real logs, each with the number of cases it was handed over with: a corpus that
# reads short (a cases.yaml that stopped parsing, a folder gone) must fail here, not score well on less.
CORPORA = {CORPUS: 101, CORPUS.parent / "corpus-2": 100, CORPUS.parent / "corpus-3": 84, CORPUS.parent / "corpus-4": 193}


@pytest.mark.parametrize("corpus", list(CORPORA), ids=lambda p: p.name)
def test_corpus_top1_at_least_98_percent_healthy_logs_clean_nothing_silent(compiled, corpus) -> None:
    if not corpus.exists():
        pytest.skip(f"../shared/{corpus.name} is not beside this checkout")
    result = evaluate(corpus, compiled)
    assert result.cases >= CORPORA[corpus]
    assert result.healthy_with_diagnoses == 0, [m.id for m in result.misses if not m.expect]
    assert result.accuracy >= 0.98, [(m.id, m.expect, m.got) for m in result.misses]
    assert result.silent == 0, [r.id for r in result.results if r.silent]


# Labelled kernel / driver events from five peer tools' own tests (fixtures/peers/README.md): the node
# families those tools watch (link flaps, module temperature, XFS/BTRFS errors, NFS writeback hangs, panic
# spellings, non-fatal SXids) must stay diagnosed, and the lines they call harmless must stay quiet.
PEERS = ROOT / "fixtures" / "peers"


def test_peer_tools_events_at_least_93_percent_and_their_harmless_lines_quiet(compiled) -> None:
    result = evaluate(PEERS, compiled)
    assert result.cases >= 200 and result.healthy_cases >= 18  # a folder that stopped parsing must fail here
    assert result.healthy_with_diagnoses == 0, [(m.id, m.got) for m in result.misses if not m.expect]
    assert result.accuracy >= 0.93, [(m.id, m.expect, m.got) for m in result.misses]
    assert result.silent == 0, [r.id for r in result.results if r.silent]


def test_eval_on_own_fixtures_is_perfect(compiled) -> None:
    result = evaluate(FIXTURES, compiled)
    assert result.misses == []
    assert result.silent == 0
    assert result.per_class["config.tp_indivisible"].recall == 1.0


def test_eval_json_output(tmp_path) -> None:
    case_dir = tmp_path / "c"
    case_dir.mkdir()
    (case_dir / "a.log").write_text("INFO 11-29 10:00:01 [x.py:1] fine\n")
    (case_dir / "b.log").write_text("ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6).\n")
    (case_dir / "cases.yaml").write_text(
        "- {id: a, file: a.log, input: vllm-serve, expect: [config.tp_indivisible]}\n"
        "- {id: b, file: b.log, input: vllm-serve, expect: [config.tp_indivisible]}\n"
    )
    proc = subprocess.run([sys.executable, "-m", "qwen_triage", "eval", "--format", "json", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    result = json.loads(proc.stdout)
    assert result["cases"] == 2 and result["correct"] == 1 and result["accuracy"] == 0.5
    assert [m["id"] for m in result["misses"]] == ["a"]
    assert result["per_class"]["config.tp_indivisible"] == {"precision": 1.0, "recall": 0.5, "support": 2}


TEAM_CORPUS = ROOT / "fixtures" / "corpus"


FIRST_BATCHES = ("a", "b", "c")  # gathered by the session that built the corpus; later batches: d, e, f ...


def _batches(part: Path, names: tuple[str, ...], into: Path) -> Path:
    """A view of the part holding only the named gathering batches (folders `<program>-<batch>`: a to z, then aa,
    ab ...), so each batch keeps the bar it reached while a newer batch is still being worked."""
    for folder in sorted(part.iterdir()):
        if folder.is_dir() and folder.name.rsplit("-", 1)[-1] in names:
            shutil.copytree(folder, into / folder.name)
    return into


def test_the_team_corpus_train_part_holds_its_bar(compiled, tmp_path) -> None:
    """Issue 26 §1: the two thirds rules may be written from (fixtures/corpus/train). The first batches' bar is what
    was reached (97.1 %, 2 logs with no failing line silent), not yet the issue's 98 %: it may only rise."""
    result = evaluate(_batches(TEAM_CORPUS / "train", FIRST_BATCHES, tmp_path), compiled)
    assert result.cases >= 275 and result.healthy_cases >= 77
    assert result.healthy_with_diagnoses == 0, [(m.id, m.got) for m in result.misses if not m.expect]
    assert result.accuracy >= 0.97, [(m.id, m.expect, m.got) for m in result.misses]
    assert result.silent <= 2, [r.id for r in result.results if r.silent]


def test_the_e_and_f_gathering_batches_hold_their_bar(compiled, tmp_path) -> None:
    """Issue 26 §1: batch e (Ollama, llama.cpp, containers, hub, ModelScope) and batch f (training frameworks, NCCL,
    torch distributed, kernel) of the train part, from 72.3 % (13 silent) when they landed to what their rules
    reached: 95.5 %, 3 failing logs silent (an inferred P2P bandwidth collapse, Ollama's lone 'no compatible GPUs'
    line, torchrun's Windows 10049 warnings); 96.4 % once e-ollama-healthy-ctx-lookup-warn-800-065, labelled healthy
    on the same lines ../shared/corpus-4 labels runtime.container_lost_gpu, was relabelled to agree. It may only rise."""
    result = evaluate(_batches(TEAM_CORPUS / "train", ("e", "f"), tmp_path), compiled)
    assert result.cases >= 112 and result.healthy_cases >= 23
    assert result.healthy_with_diagnoses == 0, [(m.id, m.got) for m in result.misses if not m.expect]
    assert result.accuracy >= 0.96, [(m.id, m.expect, m.got) for m in result.misses]
    assert result.silent <= 3, [r.id for r in result.results if r.silent]


LATER_BATCHES = {
    # batch: (cases at least, accuracy at least, silent at most) - each what its rules reached, never lowered
    ("d",): (52, 0.88, 2),  # 45/52 when its rules were written, 46/52 since; its misses are labels its logs cannot show
    ("g", "h", "i", "j", "k"): (250, 0.94, 4),  # gathered 2026-12-02 (serving engines, runners, node/training, multi-GPU, TRT-LLM/TGI/driver): 179/250 on landing (the pack of 72ebb2b), 237/250
    ("l", "m", "n", "o", "p"): (199, 0.97, 2),  # gathered 2026-12-02 (vLLM/SGLang, Ollama/llama.cpp, TRT-LLM/TGI/wrappers/Ray, kernel/NCCL/containers, training/downloads): 137/199 on landing (the pack of 0672d05), 195/199
    ("q", "r", "s", "t", "u"): (126, 0.96, 2),  # gathered 2026-12-03 (vLLM/SGLang, llama.cpp/Ollama, Triton/TRT-LLM/wrappers, containers/NCCL/kernel/driver, training/downloads): 91/126 on landing (the pack of ff32bf2), 122/126
    ("v", "w", "x", "y"): (81, 0.93, 3),  # gathered 2026-12-03 (Ollama/llama-server/GPUStack/Xinference, vLLM V1/SGLang/Ray/TGI, kernel/driver/DCGM/NCCL/containers, TRT-LLM/training/downloads): 57/81 on landing (the pack of fec1592), 76/81; the 3 silent are inferred Ollama labels
    ("z",): (77, 0.88, 1),  # gathered 2026-12-04 by eight gatherers (Ollama, vLLM V1, llama.cpp, NCCL/torch distributed, kernel/DCGM/containers, TRT-LLM/SGLang/TGI, Ray/GPUStack/Xinference/LMDeploy/Dynamo, training/downloads): 55/77 on landing (the pack of e1d950b), 68/77; the misses are inferred labels, logs cut before their error line, and lines two causes print alike (ModelScope's 404 for a typo or a gated repo, cuBLAS's allocation failure on a Jetson, TensorRT-LLM's SQ tactic on a T4)
    ("aa",): (95, 0.90, 1),  # gathered 2026-12-04 by six gatherers (serving engines, local runners, node/NCCL/containers, training/downloads, other frameworks incl. Ascend, TRT-LLM/Triton/NIM/vLLM): 74/95 on landing (the pack of 2c8008b), 86/95; eight of the nine misses are labels inferred from the thread, the ninth NCCL's proxy 'Connect' failure the corpus reads as init, the thread as network
    ("ab",): (87, 0.88, 6),  # gathered 2026-12-05 by four gatherers (serving engines, Ollama/llama.cpp/downloads, node/NCCL/containers, training): 66/87 on landing (the pack of aa558af), 77/87; the misses are labels inferred from the thread and an ollama pull cut mid-line
    ("ac",): (42, 0.92, 1),  # gathered 2026-12-05 where users paste server logs (QwenLM's repositories, downstream apps, other model repositories, serving infrastructure): 35/42 on landing (the pack of 6f6d4f4), 39/42; HAMi's shim under NCCL's cuDeviceGet failure is one miss
    ("ad",): (26, 0.96, 1),  # gathered 2026-12-05 (ROCm, Intel, Apple Silicon/MLX, Vulkan, Windows; multi-node NCCL/MPI/NVSHMEM/Ray): 19/26 on landing (the pack of 3ecf444), 25/26; the miss is an inferred label
    ("ae",): (99, 0.95, 1),  # gathered 2026-12-05 by four gatherers (Ollama; vLLM V1/SGLang; llama.cpp/LM Studio/TRT-LLM/Triton; kernel/driver/NCCL/containers/fabric manager): 86/99 on landing (the pack of 795f704), 95/99; the misses are two inferred labels, an Ollama packaging without GPU runners and an I-quant 'invalid file magic' that reads as a damaged file
    ("af",): (66, 0.86, 1),  # gathered 2026-12-05 (kernel/hardware; TRT-LLM/Triton/LMDeploy; SGLang/hub/ModelScope; multi-GPU Qwen on vLLM/Ollama): 49/66 on landing (the pack of 795f704), 57/66; five of the nine misses are inferred labels, three hub timeouts cut before the hub's own frames
    ("ag",): (49, 0.83, 1),  # gathered 2026-12-05 by three gatherers (vLLM V1/SGLang/TRT-LLM/Triton/LMDeploy; Ollama/llama.cpp/LM Studio/LocalAI/GPUStack; node/NCCL/containers/HAMi/training/downloads): 39/49 on landing (the pack of 21a8e88), 41/49; the misses are inferred labels, a LocalAI listen error cut mid-line, GSP boot failures the corpus reads both as a GPU fault and as no GPU, and a Rust client's broken body read
    ("ah",): (21, 0.95, 0),  # gathered 2026-12-05 by one gatherer (llama.cpp/LMDeploy/Triton/Xinference/NCCL/SGLang/Ollama/TGI/TRT-LLM/vLLM; 31 cases, 10 held out): 18/21 on landing (the pack of 95d9444), 20/21; the miss is an LMDeploy TurboMind save_split assertion whose line names no dimension
    ("ai",): (16, 1.0, 0),  # gathered 2026-12-05 by one gatherer (Ollama/vLLM/llama.cpp/kernel/NCCL/k8s/LM Studio/SGLang; 29 cases, 13 held out): 15/16 on landing (the pack of 29d1061), 16/16; the miss was vLLM's 'No platform detected' under a pod in CrashLoopBackOff
    ("aj", "ak", "al", "am"): (91, 0.94, 0),  # gathered 2026-12-07 by four gatherers (serving engines; local runners; training/NCCL/torch distributed; kernel/containers/downloads/wrappers; 127 cases, 36 held out): 76/91 on landing (the pack of 4f452bb), 86/91; the misses are an inferred label, a log cut before vLLM's KV-cache error, LM Studio's generic DLL failure, NCCL's 'no socket interface' the corpora label two ways, and an 'invalid magic' the pack reads as a damaged file
    ("an", "ao"): (23, 0.91, 2),  # gathered 2026-12-07 by two gatherers (ROCm/Intel/Apple/Windows/Jetson/Ascend; model repositories and downstream apps; 43 cases, 20 held out): 18/23 on landing (the pack of 4f452bb; two labels aligned with the corpus's conventions since, see their audit lines), 21/23; the two silent misses are an inferred label and a Metal working-set warning with no failure line
    ("ap",): (9, 1.0, 0),  # gathered 2026-12-07 by one gatherer (healthy start-ups of current releases and 2026 failures; 14 cases, 9 healthy, 5 held out): 9/9 on landing (the pack of 4f452bb)
    ("aq", "ar", "as", "at", "au", "av", "aw"): (87, 0.96, 2),  # gathered 2026-12-07 by seven gatherers (vLLM and its wrappers; local runners; serving engines; training/NCCL/torch distributed; kernel/driver/DCGM/containers; forum pages; downloads and server wrappers; 129 cases, 42 held out): 73/87 on landing (the pack of 91a491a), 84/87; the misses are labels inferred from the thread (a Kubernetes OOM kill the log never shows, GPUStack's Postgres port) and LightLLM's KV pool running out of memory, read as the GPU OOM that explains it (lightllm.kv-pool-oom is its symptom)
    ("ax",): (8, 1.0, 0),  # gathered 2026-12-07 by one gatherer (TRT-LLM/LMDeploy/SGLang/Triton by exact error phrases; 9 cases, 1 held out): 7/8 on landing (the pack of 91a491a), 8/8
    ("ay", "az", "ba", "bb", "bc", "bd", "be"): (77, 0.77, 3),  # gathered 2026-12-07 by seven gatherers, also searching by the catalogue's unknown messages (Triton/TRT-LLM; LMDeploy/SGLang; vLLM and its wrappers; Ollama/llama.cpp/LM Studio; training/NCCL; the node; downloads and healthy servers; 108 cases, 31 held out): 53/77 on landing (the pack of 4479285), 60/77; of the 17 misses 13 are labels inferred from the thread (a HAMi pod, a Vulkan runtime update, truncated OOMs), the rest a HAMi shim read as the invalid device ordinal it causes, a local path read as an invalid repo id, an Ascend aclnn parameter error, and HCCL's EI0006 (split between timeout and network in the corpus)
    ("bf", "bg", "bh"): (26, 0.80, 2),  # gathered 2026-12-07 by three gatherers in less-mined repositories (KTransformers, mistral.rs, xLLM, Jan, Lemonade, Axolotl, torchtitan, SkyPilot; 48 cases, 22 held out): 20/26 on landing (the pack with this session's first rules), 21/26; the 5 misses are labels inferred from the thread
    ("bi", "bj", "bk", "bl", "bm", "bn", "bo", "bp"): (99, 0.92, 0),  # gathered 2026-12-07 by eight gatherers in repositories the corpus had barely touched (apps over local runners; ROCm/Intel/Ascend/Tenstorrent; model repositories; serving platforms; RL/training frameworks; GPU nodes and containers; downloads and quantisation; small and distributed runners; 152 cases, 53 held out): 78/99 on landing (the pack of fb7e2cb), 92/99; the misses are inferred labels, gemma.cpp's and KsanaLLM's own loaders, a ggml Metal abort the pack reads as a crash, and a tokenizer that could not load, read as a damaged repository
    ("bq", "br", "bs"): (31, 0.90, 0),  # gathered 2026-12-07 by three gatherers (the newest releases of the main servers; multi-GPU training stacks; GPU applications with the same node and runtime failures: FFmpeg's NVENC, CTranslate2, JAX; 43 cases, 12 held out): 22/31 on landing (the pack with this session's first rules), 28/31; the misses are an inferred label, a GGML file read as damaged rather than unsupported, and a model download through torch.hub cut before its error line
    ("bt",): (6, 1.0, 0),  # gathered 2026-12-07 by one gatherer (serverless and cloud GPU workers over vLLM / TGI: Modal, RunPod, Replicate, SageMaker; 9 cases, 3 held out): 6/6 on landing (the pack of 2fca522)
    ("bu",): (6, 1.0, 0),  # gathered 2026-12-07 by one gatherer (LLM application stacks over vLLM / Xinference / Ollama: RAGFlow, Langchain-Chatchat and the like; 7 cases, 1 held out): 6/6 on landing (the pack of 3a58d1b)
    ("bv", "bw"): (8, 1.0, 0),  # gathered 2026-12-07 by two gatherers (Triton Inference Server and its backends, the program held out worst; 14 cases, 6 held out): 8/8 on landing (the packs of afcd58c and eb40568, the same rules)
    ("bx", "by", "bz", "ca", "cb", "cc", "cd", "ce"): (117, 0.93, 1),  # gathered 2026-12-07 by eight gatherers (disaggregated serving; alternative engines; multi-GPU training; platforms; model repositories; kernel and quantisation libraries; Triton / TensorRT; embedding, speech and image servers; 167 cases, 50 held out): 102/117 on landing (the pack of 481b65b), 109/117; the misses are labels inferred from the thread, a Jetson container on an older L4T (cudaGetDeviceCount's initialization error), two store-barrier lines where three are needed, a cut DeepSpeed-MII log and a TEI reranker read as missing weights
    ("cf", "cg", "ch"): (52, 0.94, 1),  # gathered 2026-12-07 by three gatherers (apps over local backends; CUDA extension builds; TensorFlow, JAX, Paddle and other frameworks; 73 cases, 21 held out): 41/52 on landing (with the first round's rules), 49/52; the misses are an inferred label, a ROCm flash-attention build's static assertion and KoboldCpp's unimplemented-GGUF line of an unsettled thread
    ("ci", "cj"): (29, 0.93, 0),  # gathered 2026-12-07 by two gatherers (accelerators other than CUDA: Ascend, MUSA, DCU, Kunlun, Gaudi, ROCm; frameworks, a second pass; 49 cases, 20 held out): 22/29 on landing (with the earlier rounds' rules), 27/29; the misses are an application's own JAX barrier and a TensorFlow diagnostic cut before its cause
    ("ck",): (15, 0.86, 0),  # gathered 2026-12-07 by one gatherer (multi-GPU scripts of research model repositories: LLaVA, CogVideo, Open-Sora, XTuner; 23 cases, 8 held out): 13/15 on landing (the pack with this session's rules); the misses are LLaVA's ImportError that hides a flash-attn build mismatch and a repository not yet public read as a wrong repo id
    ("cl", "cm", "cn", "co", "cp", "cq", "cr", "cs"): (114, 0.91, 1),  # gathered 2026-12-07 by eight gatherers (RL post-training; multi-GPU image and video generation; OCR, speech and multimodal apps; engines outside the big five; clusters and fabric; desktop apps; training frameworks; drivers and kernel; 168 cases, 54 held out): 93/114 on landing (the pack of 08d28c3), 104/114; the misses are labels inferred from the thread, an ONNX Runtime EP of AMD's NPU, NCCL's 'invalid usage' under bootstrap broken pipes read as the network, a stable-diffusion.cpp abort after unknown tensors and a vLLM pod log cut before its failure
    ("ct", "cu", "cv", "cw"): (77, 0.90, 0),  # gathered 2026-12-07 by four gatherers (image-generation apps and trainers; speech and voice apps; ROCm, AMD and Intel GPUs; general ML frameworks; 104 cases, 27 held out): 59/77 on landing (with the first round's rules), 70/77; the misses are inferred labels, cuBLAS's NOT_SUPPORTED on a Blackwell card (read as the dtype), a local tokenizer path read as a damaged checkpoint and aiter's chip table without gfx1151
    ("cx", "cy"): (32, 0.87, 3),  # gathered 2026-12-07 by two gatherers (ComfyUI custom nodes and video wrappers; face and vision apps on ONNX Runtime / TensorRT / ncnn; 57 cases, 25 held out): 24/32 on landing (with the earlier rounds' rules), 28/32; the misses are inferred labels, an xFormers mismatch ComfyUI works around, and ONNX Runtime's TensorRT provider falling back to CUDA
    ("cz",): (16, 0.87, 1),  # gathered 2026-12-07 by one gatherer (LLM application stacks: PrivateGPT, Tabby, localGPT, Langchain-Chatchat; 22 cases, 6 held out): 12/16 on landing (with this session's rules), 14/16; the misses are an inferred label and a semantic-router image whose Candle runtime has no CUDA
    ("da", "db", "dc", "dd", "de", "df", "dg", "dh"): (70, 0.98, 1),  # gathered 2026-12-07 by eight gatherers (vLLM V1; Ollama; llama.cpp and its wrappers; SGLang, TGI, TensorRT-LLM, Dynamo; fine-tuning; wrappers and Kubernetes; downloads and containers; kernel, NCCL, fabric; 113 cases, 43 held out): 55/70 on landing, 69/70; the miss is a GPUStack log cut before its error (label inferred from the thread's title)
    ("di", "dj", "dk", "dl", "dm", "dn"): (94, 0.94, 0),  # gathered 2026-12-07 by six gatherers (LLM runners outside the big five; HPC containers and clusters; RL and evaluation research code; vision-language and OCR apps; speech and video generation; image-generation apps and trainers; 133 cases, 39 held out): 83/94 on landing (with the first round's rules), 89/94; the misses are three inferred labels, an xFormers/CPU-torch pair with no GPU line, and a bare connection reset with nothing naming a download
    ("do", "dp", "dq", "dr", "ds", "dt"): (56, 0.92, 0),  # gathered 2026-12-07 by six gatherers (MPI, UCX, libfabric and multi-node launchers; notebooks, WSL and Apple Silicon; Kubernetes serving stacks; OpenAI-compatible servers outside the big engines; quantization and conversion tools; newer training stacks; 86 cases, 30 held out): 46/56 on landing (the pack of 5a53fd7), 52/56; the misses are an inferred exllamav2 label, two labels the rules read otherwise (LightLLM's LLaMATokenizer, a WNA16 group size), and a CUDA-aware Open MPI symbol read as the driver's age
    ("du", "dv", "dw", "dx"): (46, 0.93, 0),  # gathered 2026-12-07 by four gatherers (Apple Silicon runners; quantization kernels; collective libraries; GGUF import and conversion; 73 cases, 27 held out): 39/46 on landing (with the first round's rules), 43/46; the misses are two inferred labels and Ollama's "size overflows" on unknown tensor types
    ("dy", "dz", "ea", "eb"): (38, 0.89, 1),  # gathered 2026-12-07 by four gatherers (GPU extension packages; Ollama and GGUF tools; Jetson, NIM and NGC images; distributed local inference; 53 cases, 15 held out): 31/38 on landing (with the earlier rounds' rules), 34/38; the misses are two xFormers warnings with no failure after them, an inferred gguf-py label, and a Jetson container's missing library, which the class graph ranks over the missing runtime
    ("ec", "ed"): (19, 1.0, 0),  # gathered 2026-12-07 by two gatherers (AMD GPUs with the stacks of 2025-2026; Intel GPUs and NPUs; 24 cases, 5 held out): 15/19 on landing (with the earlier rounds' rules), 19/19
    ("ee", "ef", "eg", "eh", "ei", "ej", "ek", "el", "em", "en", "eo", "ep"): (87, 0.87, 6),  # gathered 2026-12-07 by twelve gatherers (vLLM 2026 families; PD disaggregation and KV transfer; embedding and rerank servers; RL post-training; Blackwell GPUs; Ollama's new engine; GPUs in containers and Kubernetes; llama.cpp's server of 2026; llama.cpp forks and wrappers; GPU node diagnostics; desktop LLM apps; engines outside the big four; 125 cases, 38 held out): 65/87 on landing (the pack of dfb8382 with this session's OpenVINO rules), 76/87; the misses are eleven labels inferred from the thread with no line that names the cause
    ("eq", "er", "es", "et", "eu"): (48, 0.93, 3),  # gathered 2026-12-07 by five gatherers (GPU AI apps; native Windows; Slurm and HPC containers; TensorRT and ONNX Runtime; JAX, Paddle and MindSpore; 73 cases, 25 held out): 39/48 on landing (with the first round's rules), 45/48; the misses are an inferred Slurm label, a GPU lost inside a pyxis container (thread open) and xFormers' "built for" warning alone
    ("ev", "ew", "ex", "ey", "ez", "fa", "fb", "fc", "fd", "fe", "ff", "fg", "fh", "fi", "fj", "fk", "fl", "fm", "fn"): (154, 0.92, 5),  # gathered 2026-12-08 by nineteen gatherers (model-family repositories; PyTorch distributed; AMD GPUs; quantisation and kernel libraries; Kubernetes fleets; Windows / WSL / Apple; speech, vision and diffusion serving; healthy benchmark logs; DGX Spark, Jetson, NIM; local runners; vLLM-adjacent repositories; inference across machines; image and video apps; GPU node operations; tools driving a local server; fine-tuning in 2026; 226 cases, 72 held out): 124/154 on landing (the pack of e45461a with this session's Infinity rules), 142/154; the misses are nine labels inferred from the thread with no line that names the cause, a torchao version warning with no failure after it, SageAttention's build refusing GB10, and vLLM's "Selected backend ... is not valid" read as the backend's mismatch
}


@pytest.mark.parametrize("names", list(LATER_BATCHES), ids="".join)
def test_the_later_gathering_batches_hold_their_bar(compiled, tmp_path, names: tuple[str, ...]) -> None:
    """Issue 26 §1: the batches after the first three keep what their rules reached. The misses left are listed in
    the closing note: cases truncated before their error line, labels inferred from the thread with no line that
    shows them, and single lines the shared corpora label another way (NCCL's 'no socket interface found',
    NVLS 'CUDA error 401'), which no rule can satisfy both ways."""
    least, bar, silent = LATER_BATCHES[names]
    result = evaluate(_batches(TEAM_CORPUS / "train", names, tmp_path), compiled)
    assert result.cases >= least
    assert result.healthy_with_diagnoses == 0, [(m.id, m.got) for m in result.misses if not m.expect]
    assert result.accuracy >= bar, [(m.id, m.expect, m.got) for m in result.misses]
    assert result.silent <= silent, [r.id for r in result.results if r.silent]


WORDINGS = ROOT / "fixtures" / "wordings"
# family folder: (cases at least, correct at least) - what its rules reached; each folder's first read, before any rule
# was touched, is in fixtures/wordings/README.md (266 of 348 snippets from unused threads were read right)
WORDING_BARS = {
    "backend": (37, 37), "config": (46, 46), "downloads": (38, 36), "memory-hardware": (34, 33),
    "model-server": (47, 47), "nccl-dist": (33, 31), "no-gpu": (37, 36),
    # the second wave, by program
    "kernel-driver-nccl": (22, 22), "ollama-llamacpp": (17, 17), "sglang-lmdeploy": (20, 20), "trtllm-triton": (19, 19),
    # the third wave (session 26), by program (166 of 206 read right before any rule was touched)
    "vllm-v1": (24, 24), "training": (28, 28), "wrappers-containers": (38, 38), "ollama-engine-pulls": (44, 44),
    "kernel-node": (45, 44), "trtllm-triton-2": (15, 15), "llamacpp-tgi": (17, 17), "sglang-lmdeploy-2": (15, 15),
    # its late fourth wave (42 of 58 read right before any rule was touched)
    "nccl-dist-2": (20, 18), "ollama-classic": (18, 17), "vllm-v0-platforms": (20, 20),
    # the fifth wave (session 27), by program (74 of 113 read right before any rule was touched)
    "vllm-v1-2": (21, 17), "ollama-2025": (17, 14), "llamacpp-2": (23, 23), "triton-lmdeploy-3": (21, 17),
    "nccl-kernel-3": (19, 16), "sglang-tgi-3": (12, 11),
    # its second round (63 of 91 read right before any rule was touched)
    "training-2": (24, 22), "downloads-containers-2": (26, 26), "trtllm-wrappers-3": (17, 16), "node-driver-3": (25, 25),
    # and its third (76 of 96 read right before any rule was touched)
    "ollama-3": (23, 20), "vllm-v0-cuda": (25, 24), "llamacpp-2024": (23, 22), "transformers-load": (25, 24),
    # the sixth wave (session 28), by program (144 of 198 read right before any rule was touched)
    "triton-trtllm-4": (20, 20), "lmdeploy-sglang-4": (12, 12), "ollama-4": (19, 18), "vllm-v1-3": (17, 12),
    "nccl-kernel-4": (9, 6), "llamacpp-hub-4": (25, 23), "training-3": (23, 22), "wrappers-4": (19, 15),
    "containers-4": (30, 29), "platforms-4": (25, 25),
    # the seventh wave (session 29), by program (105 of 153 read right before any rule was touched)
    "triton-7": (26, 25), "trtllm-7": (7, 7), "sglang-lmdeploy-7": (22, 16), "kernel-8": (21, 20), "nccl-8": (21, 21),
    "ollama-8": (18, 17), "vllm-8": (13, 13), "llamacpp-8": (25, 20),
    # its third round (74 of 89 read right before any rule was touched)
    "containers-9": (23, 22), "downloads-9": (27, 25), "training-9": (26, 26), "wrappers-9": (13, 12),
    # and its fourth (48 of 67 read right before any rule was touched)
    "rocm-10": (22, 22), "multinode-10": (23, 23), "tgi-10": (7, 7), "windows-10": (15, 14),
    # and its fifth (37 of 51 read right before any rule was touched)
    "accel-11": (15, 15), "quant-11": (16, 15), "multimodal-11": (20, 19),
    # the eighth wave (session 30; 100 of 128 read right before any rule was touched)
    "vllm-12": (8, 7), "ollama-12": (14, 9), "llamacpp-12": (20, 19), "nvkernel-12": (19, 17), "trt-triton-12": (9, 8),
    "dist-12": (25, 24), "sglang-xinf-12": (8, 8), "qa-12": (25, 25),
    # its second round, downstream projects' threads (76 of 90 read right before any rule was touched)
    "ds-chatui-13": (19, 18), "ds-rag-13": (14, 14), "ds-models-13": (25, 25), "ds-train-13": (21, 20),
    "ds-cluster-13": (11, 9),
    # and its third (98 of 112 read right before any edit that touches them)
    "ds-agents-14": (17, 17), "ds-eval-14": (18, 18), "ds-libs-14": (31, 31), "ds-cn-14": (17, 17),
    "ds-gpuapps-14": (29, 28),
    # and its fourth (69 of 87 read right before any edit that touches them)
    "ds-models-15": (25, 24), "ds-hw-15": (24, 23), "ds-gpuapps-15": (38, 38),
    # the ninth wave (session 31): downstream projects' threads (92 of 122 read right before any edit)
    "ds-ide-16": (12, 11), "ds-k8s-16": (15, 14), "ds-desktop-16": (22, 20), "ds-vlm-16": (24, 23),
    "ds-rl-16": (14, 10), "ds-gateway-16": (12, 8), "ds-hpc-16": (23, 23),
    # its second round, Hugging Face model repositories' discussions (76 of 106)
    "hf-qwen-17": (9, 9), "hf-gguf-17": (24, 22), "hf-quant-17": (21, 20), "hf-cnlabs-17": (3, 3),
    "hf-west-17": (23, 23), "hf-vision-17": (17, 13), "hf-community-17": (9, 8),
    # and its third, GitHub threads and gists the docs corpus holds (103 of 123)
    "docs-vllm-18": (12, 11), "docs-ollama-18": (16, 15), "docs-nccl-18": (22, 22), "docs-cuda-18": (35, 35),
    "docs-hub-18": (20, 19), "docs-gist-18": (18, 18),
    # and its fourth, the same source for NVIDIA's inference stack and the node (31 of 41)
    "docs-trt-19": (16, 16), "docs-node-19": (25, 24),
    # and its fifth, the same source for training launches and application repositories' servers (22 of 24)
    "docs-train-20": (17, 17), "docs-serve-20": (7, 7),
    # the tenth wave (session 32), by program, every source (147 of 202 read right before any edit)
    "vllm-21": (3, 3), "ollama-21": (16, 12), "llamacpp-21": (19, 17), "sglang-21": (10, 8), "lmdeploy-21": (11, 9),
    "trtllm-21": (7, 6), "triton-21": (20, 19), "servers-21": (18, 17), "wrappers-21": (8, 7), "train-21": (18, 15),
    "hubnccl-21": (24, 21), "kernel-21": (26, 26), "containers-21": (23, 23),
    # its second round, sources no wave had used: paste sites, 2025-26 model repositories' discussions, Chinese
    # forums and blogs, Q&A pages and Spaces (82 of 89)
    "paste-serve-21": (8, 8), "paste-node-21": (21, 20), "hf-new-21": (7, 6), "hf-gguf-21": (17, 17),
    "cn-21": (13, 12), "qa-21": (23, 23),
    # and its third, 2026's threads of the serving stacks and the node (27 of 35)
    "vllm-2026": (5, 5), "ggml-2026": (14, 12), "sgtrt-2026": (6, 4), "node-2026": (10, 10),
    # and its fourth, community repositories of multi-GPU home servers (5 of 5)
    "club-2026": (5, 5),
    # the catalogue sweep (session 33): real threads met while sweeping the programs' message catalogues, read by
    # rules written from the programs' sources before the log was seen (13 of 15; the llama.cpp one was seen first)
    "sweep-llamacpp": (1, 1), "sweep-lmdeploy": (1, 1), "sweep-torch": (5, 5), "sweep-kernels": (2, 2),
    "sweep-ctk": (2, 2), "sweep-hub": (2, 2), "sweep-transformers": (2, 2),
    # the wording census (session 34): one class family each, real lines from threads no corpus had used, probed
    # before any rule was touched (590 of 749 probed lines read right), then the families widened
    "census-nogpu": (12, 12), "census-gpucount": (11, 11), "census-nccl": (12, 12), "census-driver": (12, 12),
    "census-rdzv": (12, 12), "census-download": (12, 12), "census-backend": (11, 11), "census-oom": (12, 12),
}


@pytest.mark.parametrize("family", list(WORDING_BARS))
def test_the_harvested_wordings_hold_their_figure_and_no_healthy_snippet_is_diagnosed(compiled, family) -> None:
    """Sessions 25 to 33: real wordings of seven class families and the groups of programs, from threads no corpus
    had used, read after the rules were widened from the programs' sources. The misses left are listed in the README
    (lines the pack keeps quiet on purpose because healthy runs print them too, excerpts cut before their failure)."""
    least, correct = WORDING_BARS[family]
    result = evaluate(WORDINGS / family, compiled)
    assert result.cases >= least
    assert result.healthy_with_diagnoses == 0, [(m.id, m.got) for m in result.misses if not m.expect]
    assert result.correct >= correct, [(m.id, m.expect, m.got) for m in result.misses]


def test_no_healthy_log_of_the_train_part_is_diagnosed(compiled) -> None:
    """Issue 26: whatever batch a healthy case came with (the newest ones have no accuracy bar yet), no rule may
    diagnose it. g-tgi-healthy-4shard-waiting-for-ready-055 (a healthy four-shard launch cut while its shards still
    print 'Waiting for shard to be ready') is why a log that only repeats a launcher's heartbeat is no diagnosis."""
    result = evaluate(TEAM_CORPUS / "train", compiled)
    assert result.healthy_cases >= 100
    assert result.healthy_with_diagnoses == 0, [(m.id, m.got) for m in result.misses if not m.expect]


def test_the_held_out_third_is_whole_and_apart() -> None:
    """The held-out third is scored at a session's start and end only (never tuned on): here only that it is all
    there and that no case of it is also in the train part."""
    from qwen_triage.authoring.evaluate import load_cases

    held = {case.id for _, case in load_cases(TEAM_CORPUS / "heldout")}
    train = {case.id for _, case in load_cases(TEAM_CORPUS / "train")}
    assert len(held) >= 1612 and not held & train
