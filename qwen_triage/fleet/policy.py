"""Node policy, read from the class catalogue (rules/classes.yaml), never written in code.

Which classes are about the node rather than one workload (``node_level``: a node-problem-detector
condition, a Slurm drain, taken only from the system's own records) and which the kernel's word holds
until the node boots again (``held_until_boot``) are fields of each class. Every fleet channel asks
this one object, built from the pack the check runs with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from qwen_triage.rulepack.spec import ClassSpec

# The severities that act on a node (a drain, a hold until reboot). A warning (a lost carrier, a non-fatal
# SXid the fabric corrected) is reported and counted, but it may clear by itself: it neither drains the
# node nor outlives the hold.
ACTING_SEVERITIES = frozenset({"critical", "error"})


def acts_on_node(severity: str) -> bool:
    """Whether a diagnosis of this severity may drain the node or be held until it reboots."""
    return severity in ACTING_SEVERITIES


@dataclass(frozen=True)
class NodePolicy:
    node_level: frozenset[str] = frozenset()
    held_until_boot: frozenset[str] = frozenset()

    @classmethod
    def of(cls, classes: Mapping[str, ClassSpec]) -> NodePolicy:
        return cls(frozenset(c.id for c in classes.values() if c.node_level),
                   frozenset(c.id for c in classes.values() if c.held_until_boot))

    def drains(self, class_id: str) -> bool:
        """A failure of the node: a node condition, a Slurm drain."""
        return class_id in self.node_level

    def until_boot(self, class_id: str) -> bool:
        """Held until the node boots again (at an acting severity)."""
        return class_id in self.held_until_boot

    def about_node(self, class_id: str) -> bool:
        """Either: the system's own records are the only evidence taken for it."""
        return self.drains(class_id) or self.until_boot(class_id)
