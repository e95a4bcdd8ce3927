"""The GPU-to-GPU link matrix (``nvidia-smi topo -m`` labels) and TP group placement.

Tensor parallelism does two all-reduces per layer, so its groups should sit
on the fastest links; pipeline stages only pass activations on, so they can
cross slow ones. Placement searches for TP groups whose worst link is as good
as possible and reports which groups still cross a slow link.
"""

from __future__ import annotations

import itertools
import re

# The link kinds, fastest first, with what each means in words: their order is the rank `worst_link` compares.
# NV# (bonded NVLinks) is fastest whatever the count; X is a GPU with itself.
_LINKS = (
    ("X", "the same GPU"),
    ("NV", "NVLink"),
    ("PIX", "one PCIe switch"),
    ("PXB", "several PCIe switches"),
    ("PHB", "through a PCIe host bridge"),
    ("NODE", "across host bridges of one NUMA node"),
    ("SYS", "across CPU sockets"),
)
_RANK = {label: i for i, (label, _) in enumerate(_LINKS)}
LINK_WORDS = {label: words for label, words in _LINKS if label != "X"}
SLOW = ("PHB", "NODE", "SYS")
_NV = re.compile(r"^NV\d+$")


def kind(label: str) -> str:
    label = label.strip().upper()
    return "NV" if _NV.match(label) else label


def rank(label: str) -> int:
    return _RANK.get(kind(label), 7)


def is_slow(label: str) -> bool:
    return kind(label) in SLOW


def describe(label: str) -> str:
    return LINK_WORDS.get(kind(label), label)


def worst_link(matrix: list[list[str]], group: tuple[int, ...]) -> tuple[str, tuple[int, int] | None]:
    worst, pair = "X", None
    for a, b in itertools.combinations(group, 2):
        label = matrix[a][b]
        if rank(label) > rank(worst):
            worst, pair = label, (a, b)
    return worst, pair


class Placement:
    """TP groups in rank order (DP-major, then PP stage, then TP rank)."""

    def __init__(self, groups: list[tuple[int, ...]], matrix: list[list[str]] | None):
        self.groups = groups
        self.matrix = matrix

    @property
    def order(self) -> list[int]:
        return [g for group in self.groups for g in group]

    def slow_links(self) -> list[str]:
        if self.matrix is None:
            return []
        out = []
        for group in self.groups:
            label, pair = worst_link(self.matrix, group)
            if pair is not None and is_slow(label):
                out.append(f"GPU{pair[0]}-GPU{pair[1]} {kind(label)}")
        return out

    def crosses_slow(self) -> bool | None:
        if self.matrix is None:
            return None
        return bool(self.slow_links())

    def worst(self) -> str | None:
        if self.matrix is None or not self.groups or len(self.groups[0]) < 2:
            return None
        labels = [worst_link(self.matrix, g)[0] for g in self.groups]
        return max(labels, key=rank)


def place(n_gpus: int, tp: int, n_groups: int, matrix: list[list[str]] | None, budget: int = 20000) -> Placement:
    """Choose ``n_groups`` disjoint TP groups of size ``tp`` from ``n_gpus`` GPUs.

    Without a matrix the GPUs go in index order. With one, a bounded search
    minimises (worst link over all groups, how many groups have it, sum of
    link ranks); the bound keeps 16-GPU boxes fast and falls back to the best
    found so far.
    """
    default = [tuple(range(i * tp, (i + 1) * tp)) for i in range(n_groups)]
    if matrix is None or tp < 2 or len(matrix) < n_gpus:
        return Placement(default, matrix)

    def cost(groups: list[tuple[int, ...]]) -> tuple[int, int, int, list[int]]:
        worsts = [rank(worst_link(matrix, g)[0]) for g in groups]
        total = sum(rank(matrix[a][b]) for g in groups for a, b in itertools.combinations(g, 2))
        top = max(worsts) if worsts else 0
        # Index order last, so ties keep the natural order.
        return (top, worsts.count(top), total, [i for g in groups for i in g])

    best_groups, best_cost = default, cost(default)
    visits = 0

    def search(chosen: list[tuple[int, ...]], free: list[int], floor: int) -> None:
        nonlocal visits, best_groups, best_cost
        visits += 1
        if visits > budget:
            return
        if len(chosen) == n_groups:
            c = cost(chosen)
            if c < best_cost:
                best_groups, best_cost = list(chosen), c
            return
        for group in itertools.combinations(free, tp):
            if group[0] < floor:
                continue
            if rank(worst_link(matrix, group)[0]) > best_cost[0]:
                continue
            rest = [g for g in free if g not in group]
            search(chosen + [group], rest, group[0])

    search([], list(range(n_gpus)), 0)
    return Placement(best_groups, matrix)
