"""Each recognised line format lifts its fields into the record."""

from __future__ import annotations

import pytest

from qwen_triage.engine.normalize import WRAPPER_SAMPLES, decode_line, normalize

CASES = [
    (
        "Nov 29 10:00:01 host1 ollama[1234]: time=2024-11-29T10:00:01.123Z level=ERROR source=server.go:612 "
        'msg="llama runner terminated" error="signal: segmentation fault (core dumped)"',
        {"formats": ("journald", "logfmt"), "host": "host1", "program": "ollama", "pid": 1234, "level": "error",
         "timestamp": "Nov 29 10:00:01",
         "message": 'llama runner terminated" error="signal: segmentation fault (core dumped)"'},
    ),
    (  # journalctl under a CJK locale: the month is a number and a month sign (zh_CN; ja_JP and ko_KR pad it)
        "2\u6708 25 17:49:00 host1 ollama[3156758]: Error: mkdir /mnt/raid_disk/ollama: permission denied",
        {"formats": ("journald",), "host": "host1", "program": "ollama", "pid": 3156758,
         "timestamp": "2\u6708 25 17:49:00", "message": "Error: mkdir /mnt/raid_disk/ollama: permission denied"},
    ),
    (
        " 9\uc6d4 10 21:53:24 host1 kernel: NVRM: Xid (PCI:0000:3b:00): 79",
        {"formats": ("journald",), "host": "host1", "program": "kernel", "message": "NVRM: Xid (PCI:0000:3b:00): 79"},
    ),
    (
        "2024-11-29T10:00:01+0000 host1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
        {"formats": ("journald-iso",), "host": "host1", "program": "kernel",
         "message": "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus."},
    ),
    (
        "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79",
        {"formats": ("dmesg",), "program": "kernel", "timestamp": "1234.567890", "message": "NVRM: Xid (PCI:0000:3b:00): 79"},
    ),
    (  # a ten-digit stamp is the epoch time a program logs (UCX), not the kernel's seconds since boot
        "[1581060992.288391] [host1:3017:0] ib_mlx5_log.c:174 UCX ERROR Transport retry count exceeded",
        {"formats": (), "program": None,
         "message": "[1581060992.288391] [host1:3017:0] ib_mlx5_log.c:174 UCX ERROR Transport retry count exceeded"},
    ),
    (
        "[Sun Mar 24 23:54:53 2024] python invoked oom-killer: gfp_mask=0x140cca",
        {"formats": ("dmesg-T",), "program": "kernel", "timestamp": "Sun Mar 24 23:54:53 2024",
         "message": "python invoked oom-killer: gfp_mask=0x140cca"},
    ),
    (
        'time=2024-11-29T10:00:01.123+08:00 level=WARN source=gpu.go:220 msg="no compatible GPUs were discovered"',
        {"formats": ("logfmt",), "level": "warning", "message": "no compatible GPUs were discovered",
         "timestamp": "2024-11-29T10:00:01.123+08:00"},
    ),
    (  # the closing quote goes only where the quoted value ends the line: an escaped quote is the value's own
        'time=2026-11-29T10:00:01Z level=ERROR msg="bad value \\"x\\" given"',
        {"formats": ("logfmt",), "message": 'bad value \\"x\\" given'},
    ),
    (  # dmesg --decode: facility and level first (node agents' tests feed such lines)
        "kern  :err   : 2025-02-10T16:28:06,502716+00:00 segfault at 7f797fe00000 ip 00007f7c7ac69996 error 4 in libnccl.so.2",
        {"formats": ("dmesg-decode",), "program": "kernel", "level": "error",
         "timestamp": "2025-02-10T16:28:06,502716+00:00",
         "message": "segfault at 7f797fe00000 ip 00007f7c7ac69996 error 4 in libnccl.so.2"},
    ),
    ("daemon:warn  : [  12.5] dockerd started", {"formats": ("dmesg-decode",), "program": None, "level": "warning",
                                                 "message": "dockerd started"}),
    (  # torchrun's role-and-local-rank prefix (--tee; torch 2.13 prints it too): the rank on its node, not the
        # global one (engine.hang maps it through torchelastic's summary)
        "[default2]:RuntimeError: CUDA error: out of memory",
        {"formats": ("torch-rank",), "rank": None, "local_rank": 2, "message": "RuntimeError: CUDA error: out of memory"},
    ),
    (
        "INFO 11-29 10:00:01 [api_server.py:1043] vLLM API server version 0.9.1",
        {"formats": ("vllm",), "level": "info", "timestamp": "11-29 10:00:01",
         "message": "vLLM API server version 0.9.1"},
    ),
    (
        "INFO 01-23 21:45:51 api_server.py:712] vLLM API server version 0.6.6.post1",
        {"formats": ("vllm",), "level": "info", "message": "vLLM API server version 0.6.6.post1"},
    ),
    (
        "(VllmWorker rank=3 pid=4242) ERROR 11-29 10:00:01 [multiproc_executor.py:470] WorkerProc failed to start.",
        {"formats": ("vllm-process", "vllm"), "process": "VllmWorker", "rank": 3, "pid": 4242, "level": "error",
         "message": "WorkerProc failed to start."},
    ),
    (
        "(EngineCore_0 pid=77) ERROR 11-29 10:00:01 [core.py:586] EngineCore failed to start.",
        {"formats": ("vllm-process", "vllm"), "process": "EngineCore_0", "pid": 77, "message": "EngineCore failed to start."},
    ),
    (
        "(RayWorkerWrapper pid=991, ip=10.0.0.2) INFO 11-29 10:00:01 [utils.py:1] ready",
        {"process": "RayWorkerWrapper", "pid": 991, "message": "ready"},
    ),
    (
        "(Worker_TP2 pid=31) INFO 11-29 10:00:01 [gpu_worker.py:1] Loading weights",
        {"process": "Worker_TP2", "rank": 2, "message": "Loading weights"},
    ),
    (
        "host1:4242:4300 [3] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)",
        {"formats": ("nccl",), "host": "host1", "pid": 4242, "gpu": 3, "level": "warning", "program": "nccl",
         "message": "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)"},
    ),
    (
        "[rank3]:[E1129 10:00:01.123456 4242 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout",
        {"formats": ("torch-rank", "glog"), "rank": 3, "level": "error",
         "message": "[Rank 3] Watchdog caught collective operation timeout"},
    ),
    (
        "vllm-1  | INFO 11-29 10:00:01 [api_server.py:1] hello",
        {"formats": ("compose", "vllm"), "message": "hello"},
    ),
    (
        "W1129 16:46:03.146000 11144 torch/_library/triton.py:53] Triton not available",
        {"formats": ("glog",), "level": "warning", "message": "Triton not available"},
    ),
    (
        "(VllmWorker-0 pid=11239) WARNING 11-29 16:46:14 [vllm.py:725] Model Runner V2 requires Triton",
        {"process": "VllmWorker-0", "pid": 11239, "rank": 0, "message": "Model Runner V2 requires Triton"},
    ),
    (
        "a1b2c3:221:221 [6] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Qm2xTz to 7340388 bytes",
        {"formats": ("nccl",), "gpu": 6, "level": "warning",
         "message": "NCCL WARN Error: failed to extend /dev/shm/nccl-Qm2xTz to 7340388 bytes"},
    ),
    (
        "[1,0]<stdout>:smc-gpu-03:29878:29878 [0] NCCL INFO Bootstrap : Using eno1:10.0.0.3<0>",
        {"formats": ("mpi", "nccl"), "rank": 0, "gpu": 0, "pid": 29878, "message": "NCCL INFO Bootstrap : Using eno1:10.0.0.3<0>"},
    ),
    (
        "stderr:     self.state = AcceleratorState(fp16=fp16, cpu=cpu, _from_accelerator=True)",
        {"formats": ("subprocess-tee",),
         "message": "    self.state = AcceleratorState(fp16=fp16, cpu=cpu, _from_accelerator=True)"},
    ),
    (
        "(pid=909608) z-pc:909608:909608 [0] NCCL INFO NET/IB : No device found.",
        {"formats": ("ray", "nccl"), "pid": 909608, "message": "NCCL INFO NET/IB : No device found."},
    ),
    (
        "10.0.0.2: kern:     err: [2026-04-22T21:25:20.466440686Z]: nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007",
        {"formats": ("talos-kern",), "program": "kernel", "level": "error", "host": "10.0.0.2",
         "message": "nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007"},
    ),
    (  # a node's CRI log file (/var/log/pods/…/0.log): stamp, stream, full/partial tag, then the program's line
        "2026-11-29T10:00:01.123456789Z stderr F (EngineCore_DP0 pid=270) ERROR 11-29 10:00:01 [core.py:946] boom",
        {"formats": ("cri", "vllm-process", "vllm"), "level": "error", "pid": 270,
         "timestamp": "2026-11-29T10:00:01.123456789Z", "message": "boom"},
    ),
    (  # a bare local stamp before a program's own format (a terminal's copy, `ts`, Python's asctime)
        "2026-11-29 10:00:01,123 ERROR 11-29 10:00:01 [core.py:946] boom",
        {"formats": ("timestamped", "vllm"), "level": "error", "timestamp": "2026-11-29 10:00:01,123",
         "message": "boom"},
    ),
    (  # Go's log package
        "2024/01/14 19:50:06 gpu.go:138: CUDA GPU is too old.",
        {"formats": ("timestamped",), "timestamp": "2024/01/14 19:50:06", "message": "gpu.go:138: CUDA GPU is too old."},
    ),
    (  # bracketed, no zone (LM Studio's `[stamp][LEVEL]`); SGLang's `[stamp TP0]` is its own head and stays
        "[2026-11-29 10:00:01][ERROR] Failed to load model",
        {"formats": ("timestamped",), "message": "[ERROR] Failed to load model"},
    ),
    (
        "[2026-11-29 10:00:01 TP0] Scheduler hit an exception",
        {"formats": (), "message": "[2026-11-29 10:00:01 TP0] Scheduler hit an exception"},
    ),
    (  # a word that is not a stream after the stamp is the message
        "2026-11-29T10:00:01Z stdoutput F x",
        {"formats": ("timestamped",), "message": "stdoutput F x"},
    ),
    ("Traceback (most recent call last):", {"formats": (), "message": "Traceback (most recent call last):"}),
    (
        "[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ERROR 02-24 20:21:58 [core.py:946]     raise ValueError(",
        {"formats": ("timestamped", "vllm-process", "vllm"), "pid": 6940, "level": "error",
         "message": "    raise ValueError("},
    ),
    (  # docker compose around FastChat's `asctime | levelname | name | message`: a traceback keeps its indentation
        "qanything-local  | 2024-02-20 21:46:23 | ERROR | stderr |     _check_dtype(self.model_config.dtype)",
        {"formats": ("compose", "pipe-logger"), "level": "error", "timestamp": "2024-02-20 21:46:23",
         "message": "    _check_dtype(self.model_config.dtype)"},
    ),
    (  # loguru's default format
        "2023-10-20 10:11:09.512 | WARNING  | __main__:load_model:214 - Loading model from base model",
        {"formats": ("pipe-logger",), "level": "warning", "message": "Loading model from base model"},
    ),
    (  # Python logging's `asctime - name - levelname - message` (LMDeploy adds `file:line - `): the logger is kept
        "2025-04-01 03:28:52,036 - lmdeploy - ERROR - base.py:53 - ModuleNotFoundError: No module named 'triton'",
        {"formats": ("dash-logger",), "level": "error", "timestamp": "2025-04-01 03:28:52,036",
         "message": "ModuleNotFoundError: No module named 'triton'", "extra": {"logger": "lmdeploy", "source": "base.py:53"}},
    ),
    (  # GPUStack's stamp carries its zone
        "2026-12-06 08:35:46.775194+00:00 - gpustack.cmd.start - INFO - Server has shut down.",
        {"formats": ("dash-logger",), "level": "info", "message": "Server has shut down.",
         "extra": {"logger": "gpustack.cmd.start"}},
    ),
    (  # a script's logger around a vLLM line: the inner level wins
        "2025-08-13 04:39:39,838 - __main__ - INFO - ERROR 08-13 04:39:39 engine.py:400] RuntimeError: x",
        {"formats": ("dash-logger", "vllm"), "level": "error", "message": "RuntimeError: x"},
    ),
    (  # Ray's own logger
        "2026-02-08 13:33:19,281\tINFO worker.py:1833 -- Connecting to existing Ray cluster at address: 10.0.0.2:6379...",
        {"formats": ("ray-logger",), "level": "info", "extra": {"source": "worker.py:1833"},
         "message": "Connecting to existing Ray cluster at address: 10.0.0.2:6379..."},
    ),
    (  # basicConfig's `LEVEL:name:message`
        "ERROR:hf-to-gguf:Model MiniMindLM is not supported",
        {"formats": ("basic-logger",), "level": "error", "message": "Model MiniMindLM is not supported",
         "extra": {"logger": "hf-to-gguf"}},
    ),
    (  # uvicorn's level padded to ten columns
        "ERROR:    [Errno -2] Name or service not known",
        {"formats": ("basic-logger",), "level": "error", "message": "[Errno -2] Name or service not known"},
    ),
    (  # a message that begins with `ERROR: ` itself is the program's words
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        {"formats": (), "level": None,
         "message": "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."},
    ),
    (  # llama.cpp's common log with timestamps and level letters: minutes since start, not a clock
        "9.49.771.566 E llama_model_load_from_file_impl: failed to load model",
        {"formats": ("llama-log",), "level": "error", "timestamp": None,
         "message": "llama_model_load_from_file_impl: failed to load model"},
    ),
    (  # torch before 2.1: glog's bracket without the date and thread
        "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
        {"formats": ("glog",), "level": "warning", "timestamp": None,
         "message": "[c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."},
    ),
    (  # DeepSpeed's logger after its bracketed stamp
        "[2024-05-01 10:00:00,123] [ERROR] [launch.py:325:sigkill_handler] exits with return code = -9",
        {"formats": ("timestamped", "bracket-logger"), "level": "error", "message": "exits with return code = -9",
         "extra": {"source": "launch.py:325:sigkill_handler"}},
    ),
    (  # axolotl's: the process and the rank are read
        "[INFO] [axolotl.utils.models.load_tokenizer:483] [PID:99566] [RANK:3] No Chat template selected.",
        {"formats": ("bracket-logger",), "level": "info", "pid": 99566, "rank": 3,
         "message": "No Chat template selected."},
    ),
    (  # transformers' logging as LLaMA-Factory formats it
        "[INFO|trainer.py:2405] 2025-03-06 12:04:09,913 >> ***** Running training *****",
        {"formats": ("hf-logger",), "level": "info", "timestamp": "2025-03-06 12:04:09,913",
         "message": "***** Running training *****", "extra": {"source": "trainer.py:2405"}},
    ),
    (  # a bracketed word is not a logger's head
        "[INFO] plain words",
        {"formats": (), "message": "[INFO] plain words"},
    ),
    (  # a version number is no llama.cpp stamp
        "1.2.3 released",
        {"formats": (), "message": "1.2.3 released"},
    ),
    (  # kubectl logs --timestamps before an argparse error: no zone offset and no pid, so no journald head
        "2026-12-07T01:02:38.123456789Z sglang serve: error: argument --tp-size: invalid int value: '2.5'",
        {"formats": ("timestamped",), "host": None, "program": None,
         "message": "sglang serve: error: argument --tp-size: invalid int value: '2.5'"},
    ),
    (  # an offset stamp, but a level is no host name and a program is no level
        "2026-12-07T01:02:38.123+00:00 rocBLAS error: Cannot read TensileLibrary.dat: Illegal seek",
        {"formats": ("timestamped",), "host": None,
         "message": "rocBLAS error: Cannot read TensileLibrary.dat: Illegal seek"},
    ),
    (  # nor is a PCI address a program (the kernel's line under an offset stamp)
        "2026-12-07T01:02:38.123+00:00 pcieport 0000:00:01.0: AER: Corrected error received",
        {"formats": ("timestamped",), "message": "pcieport 0000:00:01.0: AER: Corrected error received"},
    ),
    (  # journald / rsyslog print an offset: host and tag, a pid or not
        "2025-08-16T01:06:25.036456-04:00 host1 nvidia-persistenced: Verbose syslog connection opened",
        {"formats": ("journald-iso",), "host": "host1", "program": "nvidia-persistenced",
         "message": "Verbose syslog connection opened"},
    ),
    (  # Rust's tracing after its stamp: level, target (the crate is the program), message
        "2025-09-03T20:28:47.089394Z ERROR dynamo_runtime::system_status_server: Failed to bind to address "
        "0.0.0.0:8083: Address already in use (os error 98)",
        {"formats": ("timestamped", "tracing"), "level": "error", "program": "dynamo_runtime",
         "message": "Failed to bind to address 0.0.0.0:8083: Address already in use (os error 98)"},
    ),
    (  # TGI pads the level to five columns; a span without fields stays the message's first word
        "2024-05-01T01:17:22.647761Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready...",
        {"formats": ("timestamped", "tracing"), "level": "info",
         "message": "text_generation_launcher: Waiting for shard to be ready..."},
    ),
    (  # journalctl -o short-monotonic: the kernel's uptime stamp, then the journal's host and tag
        "[  196.310573] host1 ollama[2303]: Error: llama runner process has terminated: exit status 2",
        {"formats": ("journald",), "host": "host1", "program": "ollama", "pid": 2303,
         "message": "Error: llama runner process has terminated: exit status 2"},
    ),
    (  # dmesg's own `comm[pid]: ` has no host before it: the kernel's line
        "[ 1234.567890] python3[4242]: segfault at 0 ip 00007f0000000000 sp 00007ffc00000000 error 4",
        {"formats": ("dmesg",), "host": None, "program": "kernel",
         "message": "python3[4242]: segfault at 0 ip 00007f0000000000 sp 00007ffc00000000 error 4"},
    ),
    (  # Logs Explorer: the severity is the stream's, the vLLM line inside gives the level
        "INFO 2025-11-19T20:16:36.096625454Z [resource.labels.containerName: vllm] (EngineCore_DP0 pid=270) "
        "ERROR 11-19 12:16:36 [v1/engine/core.py:842]            ^^^^^^^^",
        {"formats": ("cloud-logging", "vllm-process", "vllm"), "level": "error", "pid": 270,
         "message": "           ^^^^^^^^"},
    ),
    (  # srun --label: the task, then the rank's own prefix
        "15: [rank15]: AssertionError: num_layers should be divisible by pipeline_model_parallel_size",
        {"formats": ("slurm-label", "torch-rank"), "rank": 15,
         "message": " AssertionError: num_layers should be divisible by pipeline_model_parallel_size"},
    ),
    (  # DeepSpeed's multi-node launcher (pdsh): the host, then DeepSpeed's own stamp and logger
        "node1: [2024-01-05 15:02:14,103] [INFO] [launch.py:146:main] WORLD INFO DICT: {'node1': [0, 1]}",
        {"formats": ("pdsh", "timestamped", "bracket-logger"), "host": "node1", "level": "info",
         "message": "WORLD INFO DICT: {'node1': [0, 1]}"},
    ),
    (  # pdsh over pdsh, then NCCL's own prefix
        "10.0.0.2: 10.0.0.2: host1:149:298 [5] NCCL INFO Channel 00/02 :    0   1",
        {"formats": ("pdsh", "pdsh", "nccl"), "host": "10.0.0.2", "message": "NCCL INFO Channel 00/02 :    0   1"},
    ),
    (  # a tool that names itself is no host: python3's loader error, gcc's collect2, a container layer's id
        "python3: symbol lookup error: /venv/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
        {"formats": (), "host": None,
         "message": "python3: symbol lookup error: /venv/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister"},
    ),
    (
        "collect2: error: ld returned 1 exit status",
        {"formats": (), "message": "collect2: error: ld returned 1 exit status"},
    ),
    (
        "f7eb321dd245: Pull complete",
        {"formats": (), "message": "f7eb321dd245: Pull complete"},
    ),
    (  # nor is a device the kernel names (dmesg -t)
        "loop0: detected capacity change from 0 to 8",
        {"formats": (), "message": "loop0: detected capacity change from 0 to 8"},
    ),
    (  # kubectl logs --prefix: the pod and container, then vLLM's line
        "[pod/vllm-7d9f8c-abcde/vllm] ERROR 12-01 10:00:00 [core.py:586] EngineCore failed to start.",
        {"formats": ("kubectl-prefix", "vllm"), "level": "error", "message": "EngineCore failed to start."},
    ),
    (  # moreutils' ts: a syslog stamp and no host; the words after it are the program's
        "Dec 07 01:02:03 vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'",
        {"formats": ("timestamped",), "host": None,
         "message": "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'"},
    ),
    (  # the journal's short form keeps its host and tag: a pid, or the kernel's
        "Dec 07 01:02:03 host1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        {"formats": ("journald",), "host": "host1", "program": "kernel",
         "message": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."},
    ),
    (  # SkyPilot's node prefix (the node's rank, not a process group's), then vLLM's line
        "(worker1, rank=1, pid=3120, ip=10.0.0.3) ERROR 12-01 10:00:00 [core.py:586] EngineCore failed to start.",
        {"formats": ("skypilot", "vllm"), "pid": 3120, "host": "10.0.0.3", "rank": None,
         "message": "EngineCore failed to start."},
    ),
    (  # Ray's own processes have no pid in their prefix
        "(autoscaler +1m7s) Error: No available node types can fulfill resource request {'CPU': 8.0, 'GPU': 8.0}.",
        {"formats": ("ray",), "process": "autoscaler",
         "message": "Error: No available node types can fulfill resource request {'CPU': 8.0, 'GPU': 8.0}."},
    ),
]


@pytest.mark.parametrize(("line", "fields"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_fields(line: str, fields: dict) -> None:
    rec = normalize(line, "f.log", 7)
    assert rec.path == "f.log" and rec.line == 7 and rec.text == line
    for name, value in fields.items():
        assert getattr(rec, name) == value, name


@pytest.mark.parametrize("line", [c[0] for c in CASES])
def test_message_is_a_substring_of_the_line(line: str) -> None:
    # the prefilter sees raw lines; it may only miss what the message lacks
    assert normalize(line).message in line


def test_crlf_is_stripped() -> None:
    assert normalize("INFO 11-29 10:00:01 [a.py:1] hi\r").message == "hi"


def test_decode_handles_ansi_nul_and_bad_utf8() -> None:
    text = decode_line(b"\x1b[1;31mERROR\x1b[0m \xff\xfe bad\x00byte")
    assert text == "ERROR \ufffd\ufffd badbyte"


def test_field_lookup_for_where() -> None:
    rec = normalize("[ 1.0] NVRM: x")
    assert rec.field("program") == "kernel"
    assert rec.field("format") == "dmesg"
    assert rec.field("rank") is None


def _formats_the_normaliser_names() -> set[str]:
    """Every format the normaliser's wrappers record (`_strip_layer` and the helpers it hands a wrapper to), read
    from its source: a wrapper added there without a sample would never be rendered by `rules lint`'s robustness
    check."""
    import inspect
    import re

    from qwen_triage.engine import normalize as module

    source = inspect.getsource(module)
    return set(re.findall(r'formats \+= \("([\w-]+)",\)', source)) | set(re.findall(r'_logger_head\(rec, m, "([\w-]+)"\)', source))


def test_every_wrapper_has_a_sample() -> None:
    named = _formats_the_normaliser_names()
    assert len(named) >= 18 and {"dash-logger", "basic-logger", "bracket-logger"} <= named  # the reading finds them
    assert named <= {fmt for fmt, _ in WRAPPER_SAMPLES}, named - {fmt for fmt, _ in WRAPPER_SAMPLES}


@pytest.mark.parametrize(("fmt", "template"), WRAPPER_SAMPLES, ids=[t for _, t in WRAPPER_SAMPLES])
def test_each_sample_is_stripped_to_its_message(fmt: str, template: str) -> None:
    message = "NCCL WARN Cuda failure 'out of memory'" if fmt == "nccl" else "Failed to load model"
    rec = normalize(template.replace("{}", message))
    assert rec.message == message and rec.formats[0] == fmt, (rec.message, rec.formats)
