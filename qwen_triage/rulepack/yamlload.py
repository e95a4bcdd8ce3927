"""Safe YAML loading with a position for every value.

Rule files come from contributors, so loading is strict: no tags beyond the
YAML core types (nothing can build a Python object), no anchors or aliases
(no alias bombs), no duplicate keys. Every value keeps its file:line:column so
that schema errors point at the offending spot.

The size limit is checked before reading (:func:`~qwen_triage.rulepack.errors.read_bounded`,
shared with the pack cache's key): the file must be a regular file
(``/dev/zero`` behind a symlink is refused, not read until memory runs out),
and at most one byte past the limit is ever read, whatever ``stat`` said.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from qwen_triage.rulepack.errors import Position, RuleFileError, read_bounded

_CORE_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


Path_ = tuple[Any, ...]

# Bounds no real rule file comes near (the biggest bundled file: ~3,500 YAML events, 8 levels deep),
# checked while parsing, before anything is built: a hostile pack is refused in a fraction of a second,
# not after minutes of loading or with a RecursionError from the composer.
MAX_YAML_DEPTH = 32
MAX_YAML_EVENTS = 20_000


@dataclass
class LoadedYaml:
    path: str
    data: Any
    positions: dict[Path_, Position]

    def position_of(self, loc: Path_) -> Position:
        """Position of the deepest known node on ``loc`` (pydantic error locations)."""
        loc = tuple(loc)
        while loc:
            if loc in self.positions:
                return self.positions[loc]
            loc = loc[:-1]
        return self.positions.get((), Position(1, 1))

    def validate(self, model: type[BaseModel]) -> Any:
        try:
            return model.model_validate(self.data)
        except ValidationError as exc:
            # Every schema error of the file, each at its own file:line:col, so that `rules lint`
            # reports them in one pass; the first is the exception's own place and reason.
            found: list[RuleFileError] = []
            for err in exc.errors(include_url=False):
                loc = tuple(err["loc"])
                pos = self.position_of(_data_path(self.data, loc))
                where = ".".join(str(p) for p in loc)
                found.append(RuleFileError(self.path, pos.line, pos.column, f"{where}: {err['msg']}"))
            first = found[0]
            first.all_errors = found  # type: ignore[attr-defined]
            raise first from None


def _data_path(data: Any, loc: Path_) -> Path_:
    """The part of a pydantic error location that exists in the data.

    Discriminated unions and validators add names (the tag, ``function-after``)
    that are not keys of the document; they are skipped.
    """
    out: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
            out.append(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            out.append(part)
    return tuple(out)


def load_yaml(path: str | Path, text: str | None = None) -> LoadedYaml:
    path = str(path)
    if text is None:
        raw = read_bounded(path)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RuleFileError(path, 1, 1, f"not UTF-8 (byte {exc.start})") from None
    yaml = YAML(typ="safe", pure=True)
    try:
        depth = events = 0
        seen: list[Any] = []
        for event in yaml.parse(text):
            seen.append(event)
            mark = event.start_mark
            events += 1
            if events > MAX_YAML_EVENTS:
                raise RuleFileError(path, mark.line + 1, mark.column + 1,
                                    f"more than {MAX_YAML_EVENTS} YAML nodes (limit for one rule file)")
            if isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise RuleFileError(path, mark.line + 1, mark.column + 1,
                                        f"nested deeper than {MAX_YAML_DEPTH} levels (limit for rule files)")
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
            if isinstance(event, AliasEvent):
                raise RuleFileError(path, mark.line + 1, mark.column + 1, "aliases are not allowed in rule files")
            if isinstance(event, (ScalarEvent, CollectionStartEvent)) and event.anchor:
                raise RuleFileError(path, mark.line + 1, mark.column + 1, "anchors are not allowed in rule files")
        node = _compose(yaml, text, seen)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise RuleFileError(path, line, col, f"YAML syntax: {reason}") from None
    except YAMLError as exc:
        raise RuleFileError(path, 1, 1, f"YAML: {exc}") from None
    except RecursionError:  # a bound above should come first; never a traceback
        raise RuleFileError(path, 1, 1, "YAML nested too deeply") from None
    positions: dict[Path_, Position] = {}
    if node is None:
        return LoadedYaml(path, None, {(): Position(1, 1)})
    data = _to_python(yaml, path, node, (), positions)
    return LoadedYaml(path, data, positions)


class _Replay:
    """The checking pass's events, handed to the composer in place of a parser: the text is parsed once
    (pure-Python parsing is most of what loading a pack costs), not once to check and again to compose."""

    def __init__(self, events: list[Any]):
        self.events, self.at = events, 0

    def check_event(self, *choices: Any) -> bool:
        if self.at >= len(self.events):
            return False
        return not choices or isinstance(self.events[self.at], choices)

    def peek_event(self) -> Any:
        return self.events[self.at] if self.at < len(self.events) else None

    def get_event(self) -> Any:
        event = self.events[self.at]
        self.at += 1
        return event

    def dispose(self) -> None:
        pass


def _compose(yaml: YAML, text: str, events: list[Any]) -> Node | None:
    """``yaml.compose(text)`` from the events already parsed."""
    yaml.get_constructor_parser(text)  # the loader's state for this document; nothing is parsed here
    yaml._parser = _Replay(events)  # type: ignore[attr-defined]  # ruamel's composer reads loader._parser
    try:
        return yaml.composer.get_single_node()
    finally:
        del yaml._parser  # type: ignore[attr-defined]


def _to_python(yaml: YAML, path: str, node: Node, at: Path_, positions: dict[Path_, Position]) -> Any:
    mark = node.start_mark
    positions[at] = Position(mark.line + 1, mark.column + 1)
    if node.tag not in _CORE_TAGS:
        raise RuleFileError(path, mark.line + 1, mark.column + 1, f"tag {node.tag!r} is not allowed in rule files")
    if isinstance(node, MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            km = key_node.start_mark
            if not isinstance(key_node, ScalarNode) or key_node.tag not in _CORE_TAGS:
                raise RuleFileError(path, km.line + 1, km.column + 1, "mapping keys must be plain scalars")
            key = yaml.constructor.construct_object(key_node, deep=True)
            if key in out:
                raise RuleFileError(path, km.line + 1, km.column + 1, f"duplicate key {key!r}")
            out[key] = _to_python(yaml, path, value_node, at + (key,), positions)
        return out
    if isinstance(node, SequenceNode):
        return [_to_python(yaml, path, item, at + (i,), positions) for i, item in enumerate(node.value)]
    return yaml.constructor.construct_object(node, deep=True)
