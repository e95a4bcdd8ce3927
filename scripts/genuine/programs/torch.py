"""torch.distributed as users launch it: torchrun, elastic rendezvous, c10d TCPStore, gloo, NCCL asked for on CPU."""

from case import Case, Program, Release

PROGRAM = Program(
    name="torch",
    releases=[
        Release(label="2.13.0", requirements=["torch==2.13.0", "numpy"]),
        Release(label="2.14.1", requirements=["torch==2.14.1", "numpy"]),
    ],
    cases=[
        Case(
            id="import-ok",
            expect=[],
            argv=["{python}", "-c", "import torch, torch.distributed as dist; print(torch.__version__, dist.is_available())"],
            exit="ok",
            timeout=60,
            note="healthy: torch imports and has torch.distributed",
        ),
    ],
)
