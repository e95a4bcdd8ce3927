"""DeepSpeed built without its ops (DS_BUILD_OPS=0) on the CPU torch: ZeRO config validation, the launcher and
its hostfile, and ops that need a JIT build.

The installed sdist needs torch while it builds, so torch goes in first and pip builds without isolation.
"""

from case import Case, Program, Release

TRAIN = '''\
import argparse

import deepspeed
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
parser.add_argument("--mode", default="ok")
parser = deepspeed.add_config_arguments(parser)
args = parser.parse_args()

deepspeed.init_distributed(dist_backend="gloo")
model = torch.nn.Linear(8, 2)
optimizer = None
if args.mode == "cpu_adam":
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    optimizer = DeepSpeedCPUAdam(model.parameters(), lr=1e-3)
elif args.mode == "fused_adam":
    from deepspeed.ops.adam import FusedAdam

    optimizer = FusedAdam(model.parameters(), lr=1e-3)
engine, optimizer, _, _ = deepspeed.initialize(
    args=args, model=model, model_parameters=model.parameters(), optimizer=optimizer
)
x = torch.randn(4, 8)
loss = engine(x).sum()
engine.backward(loss)
engine.step()
print(f"rank {engine.global_rank}: step ok, loss {loss.item():.4f}", flush=True)
if args.mode == "sigkill":  # the rank is killed as the OOM killer does, after its first step
    import os
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
'''


OK_CONFIG = '{"train_batch_size": 4, "optimizer": {"type": "Adam", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 1}}'

FILES = {
    "train.py": TRAIN,
    "ds_ok.json": OK_CONFIG,
    # no optimizer in these: on the CPU accelerator Adam would JIT-build cpu_adam
    # ZeRO stage 4 does not exist
    "ds_stage.json": '{"train_batch_size": 1, "zero_optimization": {"stage": 4}}',
    # a key of another release (offload_optimizer is a dict now)
    "ds_extra.json": '{"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer_device": "cpu"}}',
    # the three batch numbers that must multiply out
    "ds_batch.json": '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}',
    "ds_json_broken.json": '{"train_batch_size": 4, "zero_optimization": {"stage": 1},}',
    "ds_cpu_offload.json": '{"train_batch_size": 4, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}, "optimizer": {"type": "Adam", "params": {"lr": 0.001}}}',
    # an optimizer DeepSpeed takes from torch (Adam would JIT-build cpu_adam on the CPU accelerator)
    "ds_sgd.json": '{"train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.01}}}',
    "hostfile_bad": "worker-0 slots=2\nworker-1 slot=2\n",
    "hostfile_ok": "localhost slots=1\n",
    "hostfile_empty": "# nodes of the job\n",
}

# --- issue 31: precision the CPU accelerator refuses, ZeRO-3, the launcher's port and hostfile ------------
FILES31 = {
    **FILES,
    "ds_fp16_bf16.json": '{"train_batch_size": 4, "fp16": {"enabled": true}, "bf16": {"enabled": true}, '
                         '"optimizer": {"type": "SGD", "params": {"lr": 0.01}}}',
    "ds_zero3_sgd.json": '{"train_batch_size": 4, "zero_optimization": {"stage": 3}, '
                         '"optimizer": {"type": "SGD", "params": {"lr": 0.01}}}',
    "ds_zero3_sgd_ok.json": '{"train_batch_size": 4, "zero_optimization": {"stage": 3}, '
                            '"zero_allow_untested_optimizer": true, '
                            '"optimizer": {"type": "SGD", "params": {"lr": 0.01}}}',
    "ds_nvme_no_path.json": '{"train_batch_size": 4, "zero_optimization": {"stage": 3, "offload_param": {"device": '
                            '"nvme"}}, "zero_allow_untested_optimizer": true, '
                            '"optimizer": {"type": "SGD", "params": {"lr": 0.01}}}',
    "hostfile_dup": "worker-0 slots=2\nworker-1 slots=2\nworker-0 slots=2\n",
    # another server holds the port, then runs the launcher behind it
    "hold.py": (
        "import socket, subprocess, sys\n"
        "s = socket.socket()\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
        "s.listen(16)\n"
        "sys.exit(subprocess.call(sys.argv[2:]))\n"
    ),
}

DS = "{bin}/deepspeed"
LOCAL = ["--master_addr", "127.0.0.1", "--master_port", "{port}"]
ENV = {"DS_ACCELERATOR": "cpu"}
# one rank started by hand, as a notebook or a plain `python train.py` does; the comm op built once per venv
SINGLE = {
    "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "{port}",
    "TORCH_EXTENSIONS_DIR": "{bin}/../torch_extensions",
}


# the CPU accelerator's shared-memory comm op, which deepspeed.initialize JIT-builds before it reads the config
BUILD_SHM = (
    "from deepspeed.accelerator import get_accelerator; "
    "get_accelerator().create_op_builder('ShareMemCommBuilder').load()"
)


def release(label: str) -> Release:
    return Release(
        label=label,
        first=["torch==2.13.0", "numpy", "setuptools", "wheel", "packaging", "psutil", "py-cpuinfo"],
        requirements=[f"deepspeed=={label}"],
        pip_args=["--no-build-isolation"],
        pip_env={"DS_BUILD_OPS": "0"},
        after=[["env", "DS_ACCELERATOR=cpu", "TORCH_EXTENSIONS_DIR={venv}/torch_extensions", "{python}", "-c", BUILD_SHM]],
    )


# --- issue 26 (helper 2): what a hand-written or HF-exported ds_config gets wrong ------------------------------
FILES26 = {
    **FILES,
    # an HF Trainer template ("auto" placeholders) passed to plain deepspeed.initialize
    "ds_auto.json": '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
                    '"gradient_accumulation_steps": "auto", '
                    '"optimizer": {"type": "SGD", "params": {"lr": 0.01}}}',
    # Adam's betas copied into an SGD block
    "ds_sgd_betas.json": '{"train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.01, '
                         '"betas": [0.9, 0.999]}}}',
    # a scheduler name DeepSpeed does not have (a torch / HF scheduler name)
    "ds_sched_bad.json": '{"train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.01}}, '
                         '"scheduler": {"type": "cosine", "params": {"warmup_num_steps": 10}}}',
    # a batch size the micro batch does not divide
    "ds_batch_indiv.json": '{"train_batch_size": 5, "train_micro_batch_size_per_gpu": 2, '
                           '"optimizer": {"type": "SGD", "params": {"lr": 0.01}}}',
    # healthy: WarmupLR, gradient clipping, accumulation
    "ds_warmup_ok.json": '{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, '
                         '"gradient_clipping": 1.0, "steps_per_print": 1, '
                         '"optimizer": {"type": "SGD", "params": {"lr": 0.01}}, '
                         '"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}}}',
    # the WarmupLR params of another scheduler
    "ds_sched_params.json": '{"train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.01}}, '
                            '"scheduler": {"type": "WarmupLR", "params": {"warmup_steps": 10}}}',
}

def config_cases(files: dict[str, str], rows: tuple[tuple[str, list[str], str, str], ...]) -> list[Case]:
    """One single-rank ``train.py`` run per (id, expect, ds_config file, note): the config is all that differs."""
    return [
        Case(
            id=cid,
            expect=expect,
            argv=["{python}", "train.py", "--deepspeed_config", cfg],
            files=files,
            env={**ENV, **SINGLE},
            timeout=240,
            note=note,
            exit="ok" if not expect else "fail",
        )
        for cid, expect, cfg, note in rows
    ]


CASES26 = config_cases(FILES26, (
        ("batch-size-auto-outside-trainer", ["config.bad_argument"], "ds_auto.json",
         "an HF Trainer ds_config with \"auto\" values given to deepspeed.initialize directly (nothing fills them); "
         "https://github.com/deepspeedai/DeepSpeed/issues/3302"),
        ("optimizer-param-unknown", ["config.bad_argument"], "ds_sgd_betas.json",
         "optimizer.params carries a keyword the named optimizer does not take (Adam's betas for SGD)"),
        ("scheduler-type-unknown", ["config.bad_argument"], "ds_sched_bad.json",
         "scheduler.type names an HF Trainer scheduler (lr_scheduler_type cosine) that neither DeepSpeed nor torch has"),
        ("batch-size-indivisible", ["config.bad_argument"], "ds_batch_indiv.json",
         "train_batch_size that the micro batch size does not divide (gradient accumulation derived)"),
        ("warmup-lr-grad-accum-ok", [], "ds_warmup_ok.json",
         "healthy: WarmupLR scheduler, gradient clipping and accumulation 2 on one CPU rank"),
        ("scheduler-param-unknown", ["config.bad_argument"], "ds_sched_params.json",
         "scheduler.params with a keyword WarmupLR does not take (warmup_steps for warmup_num_steps)"),
))


PROGRAM = Program(
    name="deepspeed",
    dist="deepspeed",
    releases=[release("0.16.9"), release("0.19.8")],
    # On the CPU accelerator deepspeed.initialize JIT-builds its shared-memory comm op (g++, minutes on two
    # shared cores) before it reads the config: the config cases load the one each release's `after` step
    # built into its venv (TORCH_EXTENSIONS_DIR).
    cases=[
        Case(
            id="ds-report-ok",
            expect=[],
            argv=["{bin}/ds_report"],
            env=ENV,
            exit="ok",
            timeout=240,
            note="healthy: ds_report on a DS_BUILD_OPS=0 install lists every op as not installed, with warnings",
        ),
        Case(
            id="hostfile-bad-entry",
            expect=["config.bad_argument"],
            argv=[DS, "--hostfile", "hostfile_bad", *LOCAL, "train.py", "--deepspeed_config", "ds_ok.json"],
            files=FILES,
            env=ENV,
            timeout=240,
            note="a hostfile line with slot= instead of slots=",
        ),
        Case(
            id="hostfile-empty",
            expect=["config.bad_argument"],
            argv=[DS, "--hostfile", "hostfile_empty", *LOCAL, "train.py", "--deepspeed_config", "ds_ok.json"],
            files=FILES,
            env=ENV,
            timeout=240,
            note="a hostfile with only a comment in it",
        ),
        Case(
            id="include-host-not-in-hostfile",
            expect=["config.bad_argument"],
            argv=[DS, "--hostfile", "hostfile_ok", "--include", "worker-9", *LOCAL, "train.py",
                  "--deepspeed_config", "ds_ok.json"],
            files=FILES,
            env=ENV,
            timeout=240,
            note="--include names a host the hostfile does not list",
        ),
        *[
            Case(
                id=cid,
                expect=["config.bad_argument"],
                argv=["{python}", "train.py", "--deepspeed_config", cfg],
                files=FILES,
                env={**ENV, **SINGLE},
                timeout=240,
                note=note,
            )
            for cid, cfg, note in (
                ("zero-stage-invalid", "ds_stage.json", "zero_optimization.stage 4: the ZeRO config model rejects it"),
                ("zero-config-unknown-key", "ds_extra.json", "a zero_optimization key the config model does not have"),
                ("batch-size-mismatch", "ds_batch.json", "train_batch_size != micro batch x grad accumulation x world"),
                # --- more of what users hit (issue 26) ----------------------------------------------------------
                # (DeepSpeed reads the trailing comma of ds_json_broken.json without a word; what stops it is ZeRO
                # without an optimizer)
                ("zero-without-optimizer", "ds_json_broken.json",
                 "ZeRO stage 1 in a config that names no optimizer (and the script passes none)"),
                ("config-file-missing", "ds_config.json", "--deepspeed_config names a file that does not exist"),
            )
        ],
        Case(
            id="single-rank-sgd-ok",
            expect=[],
            argv=["{python}", "train.py", "--deepspeed_config", "ds_sgd.json"],
            files=FILES,
            env={**ENV, **SINGLE},
            exit="ok",
            timeout=240,
            note="healthy: one rank, ZeRO off, torch's SGD through deepspeed.initialize: one step",
        ),
        *[
            Case(id=cid, expect=expect, argv=[DS, *where, *LOCAL, *script], files=FILES, env=env, timeout=240,
                 note=note)
            for cid, expect, where, script, note, env in (
                ("launcher-rank-sigkill", ["memory.host_oom"], ["--num_gpus", "1"],
                 ["train.py", "--deepspeed_config", "ds_sgd.json", "--mode", "sigkill"],
                 "the rank is SIGKILLed (as the OOM killer does) after its step; the launcher reports return code -9",
                 {**ENV, "TORCH_EXTENSIONS_DIR": "{bin}/../torch_extensions"}),
                ("launcher-script-missing", ["config.bad_argument"], ["--num_gpus", "1"],
                 ["trian.py", "--deepspeed_config", "ds_sgd.json"],
                 "the training script's name is misspelt: python cannot open it, the launcher reports code 2", ENV),
                ("hostfile-ssh-unreachable", ["config.bad_argument"], ["--hostfile", "hostfile_ok"],
                 ["train.py", "--deepspeed_config", "ds_sgd.json"],
                 "a hostfile on a node without passwordless ssh to the hosts it lists: the launcher's ssh check fails",
                 ENV),
            )
        ],
        # --- issue 31 --------------------------------------------------------------------------------------
        *config_cases(FILES31, (
                ("fp16-and-bf16-both-enabled", ["config.bad_argument"], "ds_fp16_bf16.json",
                 "fp16 and bf16 both enabled in one config (a template merged with a launcher flag); "
                 "https://github.com/Snowflake-AI-Research/Arctic-Platform/pull/78"),
                ("zero3-untested-optimizer", ["config.bad_argument"], "ds_zero3_sgd.json",
                 "ZeRO stage 3 with an optimizer DeepSpeed has not tested with ZeRO (torch's SGD) and without "
                 "zero_allow_untested_optimizer; https://github.com/EleutherAI/gpt-neox/pull/1166"),
                ("zero3-nvme-offload-without-path", ["config.bad_argument"], "ds_nvme_no_path.json",
                 "ZeRO-3 parameter offload to nvme without an nvme_path; "
                 "https://github.com/deepspeedai/DeepSpeed/issues/2624"),
                ("zero3-sgd-single-rank-ok", [], "ds_zero3_sgd_ok.json",
                 "healthy: ZeRO stage 3 with torch's SGD (zero_allow_untested_optimizer) on one CPU rank: one step, "
                 "with ZeRO-3's start-up notices"),
        )),
        Case(
            id="launcher-one-rank-ok",
            expect=[],
            argv=[DS, "--num_gpus", "1", *LOCAL, "train.py", "--deepspeed_config", "ds_sgd.json"],
            files=FILES31,
            env={**ENV, "TORCH_EXTENSIONS_DIR": "{bin}/../torch_extensions"},
            exit="ok",
            timeout=240,
            note="healthy: the deepspeed launcher with one local rank (no hostfile: its 'Unable to find hostfile' "
                 "warning) runs one step and exits 0",
        ),
        Case(
            id="launcher-master-port-in-use",
            expect=["server.port_in_use"],
            argv=["{python}", "hold.py", "{port}", DS, "--num_gpus", "1", *LOCAL, "train.py",
                  "--deepspeed_config", "ds_sgd.json"],
            files=FILES31,
            env={**ENV, "TORCH_EXTENSIONS_DIR": "{bin}/../torch_extensions"},
            timeout=240,
            note="--master_port is held by another job on the node: rank 0's TCPStore cannot bind it; "
                 "https://github.com/deepspeedai/DeepSpeed/issues/3916",
        ),
        Case(
            id="hostfile-duplicate-host",
            expect=["config.bad_argument"],
            argv=[DS, "--hostfile", "hostfile_dup", *LOCAL, "train.py", "--deepspeed_config", "ds_sgd.json"],
            files=FILES31,
            env=ENV,
            timeout=240,
            note="a hostfile that lists the same host twice",
        ),
        Case(
            id="include-slot-not-in-hostfile",
            expect=["config.bad_argument"],
            argv=[DS, "--include", "localhost:3", *LOCAL, "train.py", "--deepspeed_config", "ds_sgd.json"],
            files=FILES31,
            env=ENV,
            timeout=240,
            note="no hostfile, --include localhost:3 (a device id of a bigger node or of CUDA_VISIBLE_DEVICES) on a node "
                 "whose local resources have one slot; https://github.com/deepspeedai/DeepSpeed/issues/7155",
            # 0.16's CPU accelerator lists more local slots and launches the rank on slot 3 (no failure)
            releases=("0.19.8",),
        ),
        *CASES26,
    ],
)
