"""xFormers whose compiled extensions do not match the installed torch: the newest wheel (built for a CUDA torch of
another release) on a CPU torch, checked the way its README and bug template ask, with ``python -m xformers.info``.
"""

from case import Case, Program, Release

CASES = [
    Case(
        id="info-extensions-mismatch",
        expect=["runtime.backend_mismatch"],
        argv=["{python}", "-m", "xformers.info"],
        input="mixed",
        note="the wheel was built for another torch / CUDA / Python than the installed one, so its C++/CUDA "
        "extensions do not load and the memory-efficient attention kernels are listed unavailable "
        "(https://github.com/facebookresearch/xformers/issues/982)",
        exit="any",
        timeout=300,
    ),
]

PROGRAM = Program(
    name="xformers",
    releases=[
        Release(label="0.0.35", requirements=["xformers==0.0.35", "torch==2.13.0", "numpy"]),
    ],
    cases=CASES,
    dist="xformers",
)
