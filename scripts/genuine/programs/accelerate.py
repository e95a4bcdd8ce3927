"""accelerate: its config files, `accelerate launch` flags, and what it refuses on a CPU machine.

Each case runs with its own empty HOME, so no default config of this machine leaks in; a config file the
case needs is written into the work directory and passed with --config_file.
"""

from case import PORT_HOLDER, Case, Program, Release

TRAIN = '''\
import sys

import torch
from accelerate import Accelerator

mp = sys.argv[1] if len(sys.argv) > 1 else None
acc = Accelerator(mixed_precision=mp) if mp else Accelerator()
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
x = torch.randn(8, 4, device=acc.device)
loss = model(x).sum()
acc.backward(loss)
opt.step()
acc.print(f"step ok on {acc.device}, {acc.num_processes} processes, mixed_precision={acc.mixed_precision}")
if len(sys.argv) > 2 and sys.argv[2] == "sigkill":
    import os
    import signal
    if os.environ.get("RANK") == "1":  # this rank is killed as the OOM killer does while the other waits for it
        os.kill(os.getpid(), signal.SIGKILL)
acc.wait_for_everyone()
'''

# another server holds the port while the launcher behind it checks it
HOLD = PORT_HOLDER

BASE = "compute_environment: LOCAL_MACHINE\nmachine_rank: 0\nnum_machines: 1\nmain_training_function: main\nuse_cpu: true\n"
FILES = {
    "train.py": TRAIN,
    "hold.py": HOLD,
    "unknown_key.yaml": BASE + "distributed_type: 'NO'\nnum_processes: 1\nmixed_precision: 'no'\ngpu_idz: all\n",
    "no_type.yaml": "compute_environment: LOCAL_MACHINE\nnum_processes: 2\nmixed_precision: 'no'\n",
    "bad_type.yaml": BASE + "distributed_type: MULTI_GPUS\nnum_processes: 2\nmixed_precision: 'no'\n",
    "bad_precision.yaml": BASE + "distributed_type: 'NO'\nnum_processes: 1\nmixed_precision: fp32\n",
    "ok.yaml": BASE + "distributed_type: 'NO'\nnum_processes: 1\nmixed_precision: 'no'\n",
    "not_yaml.yaml": "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n  num_processes: [1\n",
}
ACC = "{bin}/accelerate"

# --- scripts that diverge across ranks, CUDA calls on a CPU-only torch, env and flag values (issue 31) ----
HANG = """\
import time
from datetime import timedelta

from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs

acc = Accelerator(kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=10))])
acc.print(f"{acc.num_processes} processes up")
if acc.process_index == 1:  # this rank is stuck in its own work (a data loader, a slow disk) and misses the barrier
    time.sleep(60)
acc.wait_for_everyone()
"""

CUDA = """\
import torch
from accelerate import Accelerator

acc = Accelerator()
model = torch.nn.Linear(4, 2).cuda()  # the script moves the model by hand instead of acc.prepare
"""

RESUME = """\
import torch
from accelerate import Accelerator

acc = Accelerator()
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
acc.load_state("output/checkpoint-500")  # resume from a checkpoint folder that was never written here
"""

FILES31 = {**FILES, "train_hang.py": HANG, "train_cuda.py": CUDA, "train_resume.py": RESUME}

# --- issue 26 (helper 3): FSDP on a node without accelerators, device-map sizes -----------------------------
MAXMEM = """\
import torch
from accelerate import infer_auto_device_map

model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64))
print(infer_auto_device_map(model, max_memory={"cpu": "10XB"}))  # a typo'd unit (GiB/GB/MiB are the valid ones)
"""


FILES_H3 = {**FILES31, "maxmem.py": MAXMEM}

PROGRAM = Program(
    name="accelerate",
    dist="accelerate",
    releases=[
        Release(label="0.34.2", requirements=["torch==2.13.0", "accelerate==0.34.2", "numpy<2"]),
        Release(label="1.15.0", requirements=["torch==2.13.0", "accelerate==1.15.0", "numpy"]),
        Release(label="1.16.0", requirements=["torch==2.13.0", "accelerate==1.16.0", "numpy"]),
    ],
    cases=[
        # --- healthy starts with their usual warnings --------------------------------------------------
        Case(
            id="launch-defaults-ok",
            expect=[],
            argv=[ACC, "launch", "train.py"],
            files=FILES,
            exit="ok",
            timeout=120,
            note="healthy: no config file; accelerate lists the defaults it used instead",
        ),
        Case(
            id="launch-multi-gpu-on-cpu-ok",
            expect=[],
            argv=[ACC, "launch", "--multi_gpu", "--num_processes", "2", "--main_process_port", "{port}", "train.py"],
            files=FILES,
            exit="ok",
            timeout=150,
            note="healthy: --multi_gpu on a machine without GPUs runs two gloo CPU ranks through torchrun",
        ),
        Case(
            id="env-ok",
            expect=[],
            argv=[ACC, "env"],
            exit="ok",
            timeout=60,
            note="healthy: accelerate env with no config file",
        ),
        # --- config files --------------------------------------------------------------------------------
        Case(
            id="config-unknown-key",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--config_file", "unknown_key.yaml", "train.py"],
            files=FILES,
            timeout=90,
            note="a config key accelerate does not know (a typo or another release's key)",
        ),
        Case(
            id="config-no-distributed-type",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--config_file", "no_type.yaml", "train.py"],
            files=FILES,
            timeout=90,
            note="a config file without distributed_type",
        ),
        Case(
            id="config-bad-distributed-type",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--config_file", "bad_type.yaml", "train.py"],
            files=FILES,
            timeout=90,
            note="distributed_type MULTI_GPUS: not a DistributedType",
        ),
        Case(
            id="config-bad-mixed-precision",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--config_file", "bad_precision.yaml", "train.py"],
            files=FILES,
            timeout=90,
            note="mixed_precision fp32 in the config file: not a PrecisionType",
        ),
        # --- launcher flags ------------------------------------------------------------------------------
        Case(
            id="flags-cpu-and-multi-gpu",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--cpu", "--multi_gpu", "train.py"],
            files=FILES,
            timeout=90,
            note="two launch modes at once",
        ),
        Case(
            id="flags-multi-gpu-one-process",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--multi_gpu", "--num_processes", "1", "train.py"],
            files=FILES,
            timeout=90,
            note="--multi_gpu with a single process",
        ),
        Case(
            id="flags-unknown-mixed-precision",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--mixed_precision", "bf32", "train.py"],
            files=FILES,
            timeout=90,
            note="--mixed_precision value outside its choices: argparse rejects it",
        ),
        Case(
            id="launch-port-in-use",
            expect=["server.port_in_use"],
            argv=["{python}", "hold.py", "{port}", ACC, "launch", "--multi_gpu", "--num_processes", "2",
                  "--main_process_port", "{port}", "train.py"],
            files=FILES,
            timeout=90,
            note="the main process port is held by another server; accelerate checks it before launching",
            # 1.x no longer stops here on one machine: it goes on and the launch succeeds
            releases=("0.34.2",),
        ),
        # --- mixed precision this machine cannot do ------------------------------------------------------
        Case(
            id="fp8-not-available",
            expect=["config.dtype_unsupported"],
            argv=[ACC, "launch", "--mixed_precision", "fp8", "train.py"],
            files=FILES,
            timeout=90,
            note="fp8 mixed precision without Transformer Engine / MS-AMP / torchao",
        ),
        # --- more of what users hit (issue 26) --------------------------------------------------------------
        Case(
            id="launch-bf16-cpu-ok",
            expect=[],
            argv=[ACC, "launch", "--cpu", "--mixed_precision", "bf16", "train.py", "bf16"],
            files=FILES,
            exit="ok",
            timeout=120,
            note="healthy: bf16 autocast on the CPU",
        ),
        Case(
            id="launch-config-file-ok",
            expect=[],
            argv=[ACC, "launch", "--config_file", "ok.yaml", "train.py"],
            files=FILES,
            exit="ok",
            timeout=120,
            note="healthy: a complete config file for one CPU process",
        ),
        Case(
            id="launch-rank-sigkill",
            expect=["memory.host_oom"],
            argv=[ACC, "launch", "--multi_gpu", "--num_processes", "2", "--main_process_port", "{port}", "train.py",
                  "no", "sigkill"],
            files=FILES,
            timeout=150,
            note="rank 1 is SIGKILLed (as the OOM killer does) after its step; the launcher reports signal 9",
        ),
        Case(
            id="launch-second-node-no-master",
            expect=["dist.rendezvous_failed"],
            argv=[ACC, "launch", "--multi_gpu", "--num_machines", "2", "--machine_rank", "1", "--num_processes", "2",
                  "--main_process_ip", "127.0.0.1", "--main_process_port", "{port}", "--rdzv_conf", "timeout=8",
                  "train.py"],
            files=FILES,
            timeout=150,
            note="machine 1 of 2 started while machine 0 (the master) is not up: its store client never connects",
        ),
        Case(
            id="config-file-missing",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--config_file", "default_config.yaml", "train.py"],
            files=FILES,
            timeout=90,
            note="--config_file names a file that does not exist",
        ),
        Case(
            id="config-not-yaml",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--config_file", "not_yaml.yaml", "train.py"],
            files=FILES,
            timeout=90,
            note="a config file that is not valid YAML (a bad indent)",
        ),
        Case(
            id="script-missing",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--cpu", "trian.py"],
            files=FILES,
            timeout=90,
            note="the training script's name is misspelt: python cannot open it",
        ),
        Case(
            id="use-deepspeed-not-installed",
            expect=["runtime.backend_mismatch"],
            argv=[ACC, "launch", "--use_deepspeed", "--num_processes", "1", "--zero_stage", "2", "train.py"],
            files=FILES,
            timeout=90,
            note="--use_deepspeed in a venv without DeepSpeed",
        ),
        # --- issue 31 ------------------------------------------------------------------------------------
        Case(
            id="config-default-then-launch-ok",
            expect=[],
            argv=["bash", "-c", f"{ACC} config default --config_file cfg.yaml && {ACC} launch --config_file cfg.yaml "
                  "train.py"],
            files=FILES31,
            exit="ok",
            timeout=150,
            note="healthy: `accelerate config default` writes a config file and a launch with it trains one step",
        ),
        Case(
            id="launch-fp16-cpu-ok",
            expect=[],
            argv=[ACC, "launch", "--mixed_precision", "fp16", "train.py", "fp16"],
            files=FILES31,
            exit="ok",
            timeout=120,
            note="healthy: fp16 mixed precision on a machine without GPUs; accelerate of old refused it (\"fp16 mixed "
                 "precision requires a GPU\", https://github.com/bmaltais/kohya_ss/issues/639), these releases on "
                 "torch 2.13 autocast to fp16 on the CPU",
        ),
        Case(
            id="accelerator-mixed-precision-invalid",
            expect=["config.bad_argument"],
            argv=["{python}", "train.py", "fp32"],
            files=FILES31,
            timeout=120,
            note="Accelerator(mixed_precision='fp32') in the script: not a precision accelerate knows",
        ),
        Case(
            id="flags-dynamo-backend-invalid",
            expect=["config.bad_argument"],
            argv=[ACC, "launch", "--dynamo_backend", "inductorr", "train.py"],
            files=FILES31,
            timeout=90,
            note="--dynamo_backend with a backend name accelerate does not list (a misspelling, or a value another "
                 "release's scripts pass); https://github.com/sdbds/musubi-tuner-scripts/issues/5",
        ),
        Case(
            id="script-cuda-on-cpu-torch",
            expect=["runtime.backend_mismatch"],
            argv=[ACC, "launch", "train_cuda.py"],
            files=FILES31,
            timeout=120,
            note="the script calls .cuda() and the environment has a CPU-only torch build; "
                 "https://github.com/karpathy/nanoGPT/issues/281",
        ),
        Case(
            id="load-state-missing-dir",
            expect=["model.file_missing"],
            argv=[ACC, "launch", "train_resume.py"],
            files=FILES31,
            timeout=120,
            note="Accelerator.load_state of a checkpoint folder that does not exist (a resume path from another "
                 "machine or run); https://github.com/instructlab/training/issues/272",
        ),
        Case(
            id="launch-master-node-alone",
            expect=["dist.rendezvous_failed"],
            argv=[ACC, "launch", "--multi_gpu", "--num_machines", "2", "--machine_rank", "0", "--num_processes", "2",
                  "--main_process_ip", "127.0.0.1", "--main_process_port", "{port}", "--rdzv_conf", "timeout=8",
                  "train.py"],
            files=FILES31,
            timeout=150,
            note="machine 0 of 2 (the master) started and machine 1 never joins: the master's rendezvous waits for "
                 "the missing node until its timeout; https://github.com/openvla/openvla/issues/175",
        ),
        Case(
            id="launch-rank-misses-barrier",
            expect=["nccl.timeout"],
            argv=[ACC, "launch", "--multi_gpu", "--num_processes", "2", "--main_process_port", "{port}",
                  "train_hang.py"],
            files=FILES31,
            timeout=180,
            note="rank 1 is stuck in its own work and misses wait_for_everyone: rank 0's barrier times out after "
                 "the 10 s InitProcessGroupKwargs timeout; https://github.com/huggingface/accelerate/issues/1752",
            # 1.x on a machine without GPUs runs the --multi_gpu processes as two independent single processes (no
            # process group: "1 processes up" twice), so the barrier is a no-op and the launch succeeds
            releases=("0.34.2",),
        ),
        # --- issue 26 (helper 3) ----------------------------------------------------------------------------
        Case(
            id="launch-fsdp-no-accelerator",
            expect=["runtime.no_gpu_visible"],
            argv=[ACC, "launch", "--use_fsdp", "--num_processes", "2", "--main_process_port", "{port}", "train.py"],
            files=FILES_H3,
            timeout=150,
            note="--use_fsdp on a node where no GPU is visible (a CPU-only torch here; CUDA_VISIBLE_DEVICES empty or a "
                 "container without the GPUs elsewhere): the FSDP plugin finds no device; "
                 "https://github.com/huggingface/accelerate/issues/2927",
        ),
        Case(
            id="max-memory-bad-unit",
            expect=["config.bad_argument"],
            argv=["{python}", "maxmem.py"],
            files=FILES_H3,
            timeout=90,
            note="infer_auto_device_map with a max_memory size whose unit accelerate cannot parse ('10XB'); "
                 "https://github.com/huggingface/accelerate/issues/1779",
        ),
    ],
)
