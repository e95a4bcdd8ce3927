"""PyTorch Lightning's Trainer on a machine without GPUs: a healthy fit (one process, and DDP over two CPU
processes with gloo), a strategy whose package is missing, a device count it refuses, a resume from a checkpoint
that was never written, and a rank that misses a barrier.

Lightning launches the DDP ranks itself (it re-runs the script as child processes), so the two-process cases need
only ``MASTER_PORT``: the case's free port.
"""

from functools import partial

from case import Program, Release, script_case

TRAIN = '''\
import time
from datetime import timedelta

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 2)

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


data = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=16, num_workers=0)
KW = dict(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False)
'''

_case = partial(script_case, prelude=TRAIN, env={"OMP_NUM_THREADS": "1", "MASTER_PORT": "{port}"}, timeout=180)

STUCK = '''\
from lightning.pytorch.strategies import DDPStrategy


class Stuck(Tiny):
    def on_train_start(self):
        if self.global_rank == 1:  # this rank is stuck in its own work (a slow disk, a data loader) past the timeout
            time.sleep(40)
        self.trainer.strategy.barrier()


trainer = L.Trainer(accelerator="cpu", devices=2, strategy=DDPStrategy(timeout=timedelta(seconds=10)), **KW)
trainer.fit(Stuck(), data)
'''

CASES = [
    _case("fit-cpu-healthy", [], 'L.Trainer(accelerator="cpu", **KW).fit(Tiny(), data)\nprint("fit done")\n',
          "healthy: one epoch on the CPU, with Lightning's banner and its usual hints", exit="ok"),
    _case("fit-ddp-two-cpu-ranks-healthy", [],
          'L.Trainer(accelerator="cpu", devices=2, strategy="ddp", **KW).fit(Tiny(), data)\nprint("fit done")\n',
          "healthy: DDP over two CPU processes (gloo); both ranks register and train one epoch", exit="ok"),
    _case("fit-fp16-mixed-cpu-healthy", [],
          'L.Trainer(accelerator="cpu", precision="16-mixed", **KW).fit(Tiny(), data)\nprint("fit done")\n',
          "healthy: 16-bit mixed precision on the CPU (autocast to fp16), which these releases accept", exit="ok"),
    _case("devices-zero", ["config.bad_argument"], 'L.Trainer(accelerator="cpu", devices=0, **KW)\n',
          "Trainer(devices=0): not a device count Lightning accepts"),
    _case("strategy-deepspeed-not-installed", ["runtime.backend_mismatch"],
          'L.Trainer(accelerator="cpu", devices=1, strategy="deepspeed_stage_2", **KW)\n',
          "the DeepSpeed strategy asked for in a venv without DeepSpeed"),
    _case("resume-checkpoint-missing", ["model.file_missing"],
          'L.Trainer(accelerator="cpu", **KW).fit(Tiny(), data, ckpt_path="checkpoints/last.ckpt")\n',
          "fit(ckpt_path=...) of a checkpoint that was never written here (a resume path from another run)"),
    _case("ddp-rank-misses-barrier", ["nccl.timeout"], STUCK,
          "rank 1 is stuck in its own work and misses the barrier: rank 0's gloo collective times out after the "
          "strategy's 10 s timeout, and rank 1 then finds its peer gone"),
]

PROGRAM = Program(
    name="lightning",
    releases=[
        # 2.2 imports pkg_resources, which setuptools 70 and later no longer ship; torch 2.13 asks for setuptools
        # 77+, so the older one goes in after the resolve
        Release(label="2.2.5", requirements=["torch==2.13.0", "lightning==2.2.5", "numpy<2"],
                after=[["{python}", "-m", "pip", "install", "-q", "setuptools<70"]]),
        Release(label="2.6.6", requirements=["torch==2.13.0", "lightning==2.6.6", "numpy"]),
    ],
    cases=CASES,
    dist="lightning",
)
