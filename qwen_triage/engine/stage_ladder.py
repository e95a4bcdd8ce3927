"""How far a launch got: the stages of ``rules/stages.yaml`` read off a stretch of log.

A launch moves through its stages in order (rank), except stages that mark a fresh start
(``resets``). Two readers need the stage a stretch of log reached: the heartbeat of a stalled
launch (engine.matcher: the stage it repeats in) and the hang analysis (engine.hang: the host whose
log got less far than every other host's). One reading, kept here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StageLadder:
    pattern: re.Pattern[bytes]  # every stage's patterns, a named group per stage (engine.compiled.stage_re)
    stages: dict[str, dict[str, Any]]  # id -> the stage as the pack holds it (rank, resets, label)

    def last(self, data: bytes) -> str | None:
        """The stage ``data`` ends in: launches move forward only, unless a stage is a fresh start."""
        current: dict[str, Any] | None = None
        for m in self.pattern.finditer(data):
            stage = self.stages.get(m.lastgroup or "")
            if stage is not None and (current is None or stage.get("resets") or stage["rank"] >= current["rank"]):
                current = stage
        return current["id"] if current is not None else None

    def later(self, a: str | None, b: str) -> str:
        """Of two stages one host's files reached, the further one."""
        if a is None or a not in self.stages:
            return b
        return b if self.stages[b]["rank"] > self.stages[a]["rank"] else a

    def label(self, stage: str) -> str:
        return str(self.stages[stage]["label"])

    def behind(self, reached: dict[str, str]) -> tuple[str, str, str] | None:
        """The one host whose log got to an earlier stage than every other host's: (host, its stage's label, the
        others'). None when fewer than two hosts say, or no single host is behind all the others."""
        if len(reached) < 2:
            return None
        ranked = sorted(reached.items(), key=lambda hs: self.stages[hs[1]]["rank"])
        (host, low), rest = ranked[0], ranked[1:]
        if self.stages[rest[0][1]]["rank"] <= self.stages[low]["rank"]:
            return None
        others = {s for _, s in rest}
        words = self.label(rest[0][1]) if len(others) == 1 else f"{self.label(rest[0][1])}' or later ('" + \
            "', '".join(self.label(s) for s in sorted(others - {rest[0][1]}, key=lambda s: self.stages[s]["rank"]))
        return host, self.label(low), words
