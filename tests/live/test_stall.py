"""Stage recognition from real vLLM / NCCL / Ollama wording, and the stall watchdog."""

from __future__ import annotations

import pytest

from qwen_triage.live.stall import LastLines, stages, StageTracker, StallWatchdog
from qwen_triage.engine.literals import required_literals

# One real line per stage pattern family (vLLM 0.6-0.10, NCCL 2.2x, Ollama 0.5, llama.cpp).
REAL_LINES = {
    "start": [
        "INFO 01-07 10:00:01 [__init__.py:244] Automatically detected platform cuda.",
        "(APIServer pid=1) INFO 01-07 10:00:04 [api_server.py:1805] vLLM API server version 0.10.1",
        "INFO 11-29 10:00:14 [llm_engine.py:232] Initializing an LLM engine (v0.6.3) with config: model='/m'",
        "(EngineCore_0 pid=2) INFO 01-07 10:00:14 [core.py:74] Initializing a V1 LLM engine (v0.10.1) with config:",
    ],
    "gpu_discovery": [
        'time=2025-01-07T10:00:00.125Z level=INFO source=gpu.go:226 msg="looking for compatible GPUs"',
        "ggml_cuda_init: found 6 CUDA devices:",
    ],
    "workers": [
        "(APIServer pid=1) DEBUG 01-07 10:00:22 [utils.py:750] Waiting for 1 local, 0 remote core engine proc(s) to start.",
        "WARNING 01-07 10:00:14 [multiproc_worker_utils.py:306] Reducing Torch parallelism from 16 threads to 1 to avoid",
        "INFO 01-07 10:00:15 [ray_utils.py:345] Waiting for creating a placement group of specs for 10 seconds.",
    ],
    "nccl": [
        "(VllmWorker rank=0 pid=3) INFO 01-07 10:00:20 [utils.py:1055] Found nccl from library libnccl.so.2",
        "(VllmWorker rank=0 pid=3) INFO 01-07 10:00:20 [pynccl.py:69] vLLM is using nccl==2.21.5",
        "gpu-node-1:2301:2301 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>",
        "gpu-node-1:2301:2301 [0] NCCL INFO cudaDriverVersion 12040",
        "gpu-node-1:2301:2457 [0] NCCL INFO comm 0x55d0c1b0 rank 0 nranks 6 cudaDev 0 busId 1000 - Init COMPLETE",
        "NCCL version 2.21.5+cuda12.4",
        "DEBUG 01-07 10:00:19 [parallel_state.py:946] world_size=6 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:41235 backend=nccl",
        "INFO 01-07 10:00:23 [custom_all_reduce_utils.py:244] reading GPU P2P access cache from /root/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3,4,5.json",
        "[I1129 10:00:20.123 ProcessGroupNCCL.cpp:1] Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 (world_size=6, num_workers_joined=5, timeout=0:30:00)",
        "[W1203 09:14:57.744178506 ProcessGroupGloo.cpp:524] Warning: Unable to resolve hostname to a (local) address. "
        "Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. "
        "(function operator())",
    ],
    "runner_start": [
        'time=2025-01-07T10:00:03.020Z level=INFO source=server.go:376 msg="starting llama server" cmd="/usr/lib/ollama/runners/cuda_v12_avx/ollama_llama_server runner"',
        'time=2025-01-07T10:00:03.101Z level=INFO source=runner.go:945 msg="starting go runner"',
        'time=2025-01-07T10:00:03.021Z level=INFO source=server.go:555 msg="waiting for llama runner to start responding"',
    ],
    "rendezvous": [  # torch 2.13's torchelastic agent at LOGLEVEL=INFO (fixtures/hang/n2-latenode)
        "I1203 09:14:52.264000 1444 torch/distributed/elastic/agent/server/api.py:707] [default] Rendezvous'ing "
        "worker group",
        "I1203 09:14:52.913000 1444 torch/distributed/elastic/agent/server/api.py:553] [default] Rendezvous complete "
        "for workers. Result:",
        "I1203 09:14:52.913000 1444 torch/distributed/elastic/agent/server/api.py:715] [default] Starting worker group",
    ],
    "download": [
        "Downloading shards:  40%|████      | 2/5 [01:12<01:48, 36.01s/it]",
        "Fetching 17 files:  12%|█▏        | 2/17 [00:03<00:25,  1.70s/it]",
        "model-00003-of-00017.safetensors:  45%|████▌     | 1.78G/3.96G [00:41<00:50, 43.2MB/s]",
        "Downloading [model-00001-of-00017.safetensors]:  31%|███       | 1.20G/3.87G [00:20<00:44, 64.0MB/s]",
        'time=2025-01-07T09:58:00.000Z level=INFO source=download.go:175 msg="downloading 6e9f90f02bb3 in 16 1 GB part(s)"',
    ],
    "loading": [
        "(VllmWorker rank=0 pid=3) INFO 01-07 10:00:25 [gpu_model_runner.py:1329] Starting to load model /models/qwen32b...",
        "Loading safetensors checkpoint shards:  41% Completed | 7/17 [00:12<00:17,  1.72s/it]",
        "INFO 01-07 10:00:40 [loader.py:458] Loading weights took 14.51 seconds",
        "llama_model_loader: loaded meta data with 34 key-value pairs and 771 tensors from /usr/share/ollama/.ollama/models/blobs/sha256-9b6c",
        "llm_load_tensors: offloading 64 repeating layers to GPU",
        "load_tensors: offloaded 65/65 layers to GPU",
    ],
    "compile": [
        "INFO 01-07 10:00:48 [backends.py:430] Dynamo bytecode transform time: 7.62 s",
        "INFO 01-07 10:00:48 [backends.py:509] Using cache directory: /root/.cache/vllm/torch_compile_cache/1f2e for vLLM's torch.compile",
        "INFO 01-07 10:01:10 [monitor.py:33] torch.compile takes 19.84 s in total",
    ],
    "kv_profile": [
        "INFO 01-07 10:01:12 [worker.py:267] Memory profiling takes 5.21 seconds",
        "INFO 01-07 10:01:12 [executor_base.py:111] # cuda blocks: 12345, # CPU blocks: 1024",
        "INFO 01-07 10:01:13 [kv_cache_utils.py:634] GPU KV cache size: 123,456 tokens",
        "INFO 01-07 10:01:13 [kv_cache_utils.py:637] Maximum concurrency for 32,768 tokens per request: 3.77x",
        "llama_new_context_with_model: n_ctx      = 32768",
        "llama_kv_cache_init:      CUDA0 KV buffer size =  8192.00 MiB",
    ],
    "cuda_graphs": [
        "INFO 01-07 10:01:14 [model_runner.py:1450] Capturing cudagraphs for decoding. This may lead to unexpected consequences",
        "Capturing CUDA graph shapes:  54%|█████▍    | 36/67 [00:10<00:08,  3.57it/s]",
        "INFO 01-07 10:01:30 [gpu_model_runner.py:2110] Graph capturing finished in 16 secs, took 0.54 GiB",
    ],
    "serving": [
        "INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
        "INFO 01-07 10:01:31 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000",
        'time=2025-01-07T10:00:15.000Z level=INFO source=server.go:594 msg="llama runner started in 12.03 seconds"',
        'time=2025-01-07T10:00:00.123Z level=INFO source=routes.go:1259 msg="Listening on 127.0.0.1:11434 (version 0.5.7)"',
    ],
}


@pytest.mark.parametrize("stage", [s.id for s in stages()])
def test_each_stage_is_recognised_from_real_lines(stage: str) -> None:
    for line in REAL_LINES[stage]:
        tracker = StageTracker()
        changed = tracker.feed_block(line.encode())
        assert changed is not None and changed.stage.id == stage, line


def test_every_stage_pattern_has_a_literal_for_the_prefilter() -> None:
    for s in stages():
        for p in s.patterns:
            req = required_literals(p)
            assert req is not None and req.weakest >= 3, (s.id, p)


def test_a_launch_only_moves_forward_unless_it_starts_again() -> None:
    t = StageTracker()
    t.feed_block(b"(VllmWorker rank=0 pid=3) INFO 01-07 10:00:25 [gpu_model_runner.py:1329] Starting to load model x\n")
    assert t.current is not None and t.current.stage.id == "loading"
    # the API server's heartbeat and a late NCCL line do not move it back
    assert t.feed_block(b"DEBUG 01-07 [utils.py:750] Waiting for 1 local, 0 remote core engine proc(s) to start.\n"
                        b"(VllmWorker rank=3 pid=6) INFO [pynccl.py:69] vLLM is using nccl==2.21.5\n") is None
    assert t.current.stage.id == "loading"
    assert t.feed_block(b"INFO:     Application startup complete.\n").stage.id == "serving"  # type: ignore[union-attr]
    # Ollama loads another model on request: the runner starts again
    again = t.feed_block(b'time=x level=INFO source=server.go:376 msg="starting llama server" cmd="x"\n'
                         b"llama_model_loader: loaded meta data with 34 key-value pairs\n")
    assert again is not None and again.stage.id == "loading"
    assert t.peek(b"Capturing CUDA graph shapes:  10%|#   | 7/67\rCapturing CUDA graph shapes:  12%").id == "cuda_graphs"  # type: ignore[union-attr]


def test_watchdog_reports_once_per_silence_and_not_while_serving() -> None:
    now = [100.0]
    w = StallWatchdog(5.0, clock=lambda: now[0])
    w.activity()
    now[0] += 4
    assert w.due(None) is None
    now[0] += 2
    assert w.due(None) == pytest.approx(6.0)
    now[0] += 10
    assert w.due(None) is None  # reported already for this silence
    w.activity()
    now[0] += 6
    serving = next(s for s in stages() if s.id == "serving")
    assert w.due(serving) is None  # an idle server is quiet by design
    assert StallWatchdog(None).due(None) is None


def test_last_lines_fold_heartbeats_and_show_progress_bars() -> None:
    last = LastLines(n=4)
    beat = b"(APIServer pid=1) DEBUG 01-07 10:00:%02d [utils.py:750] Waiting for 1 local, 0 remote core engine proc(s) to start."
    last.extend([b"worker up", beat % 1, beat % 2, beat % 3])
    last.extend([beat % 4])
    snap = last.snapshot(b"Loading safetensors checkpoint shards:  0%\rLoading safetensors checkpoint shards:  6%")
    assert snap[0] == "worker up"
    assert snap[1].endswith("[x4]")
    assert snap[2] == "Loading safetensors checkpoint shards:  6%  [no newline yet]"


def test_one_block_that_crosses_several_stages_reports_each_in_order() -> None:
    """Triage a little behind gets the start, the workers and NCCL in one block: all three are told."""
    block = "\n".join((REAL_LINES["start"][0], REAL_LINES["workers"][0], REAL_LINES["nccl"][0])) + "\n"
    t = StageTracker()
    assert [c.stage.id for c in t.changes(block.encode())] == ["start", "workers", "nccl"]
    assert t.current is not None and t.current.stage.id == "nccl"
    again = "\n".join((REAL_LINES["workers"][0], REAL_LINES["nccl"][1])) + "\n"
    assert t.changes(again.encode()) == []  # a late worker line and more NCCL move nothing
