"""Message templates of Python source, read with the ``ast`` module (the code is parsed, never run).

What a Python program prints when it fails: the last line of a traceback
(``ExcName: message`` for ``raise ExcName(message)``), its logger's error and
warning lines, and ``warnings.warn`` (``file:line: Category: message``). The
message is a literal, an f-string, a ``%`` format, a ``str.format`` call, a
concatenation of those, or a local name assigned one of them earlier in the
same function (``msg = f"…"; raise ValueError(msg)``).
"""

from __future__ import annotations

import ast
import builtins
import string
import warnings
from typing import Iterator

from qwen_triage.authoring.msg_template import MAX_TEMPLATE, Field, Template, printf_parts, text_of

LOG_LEVELS = {
    "error": "error", "exception": "error", "critical": "critical", "fatal": "critical",
    "warning": "warning", "warn": "warning", "warning_once": "warning", "error_once": "error",
    "warning_advice": "warning",
}
_BUILTIN_EXC = frozenset(n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                         and issubclass(getattr(builtins, n), BaseException))
MAX_DEPTH = 40  # nesting of a message expression followed (a + b + c…)


def _name_of(node: ast.expr) -> str:
    """``a.b.c`` of a call's function, '' for anything else."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
        return ".".join(reversed(names))
    if isinstance(node, ast.Call):  # logging.getLogger(__name__).error(...)
        inner = _name_of(node.func)
        return ".".join([inner + "()", *reversed(names)]) if inner else ""
    return ""


def _hint(node: ast.expr) -> str:
    try:
        return ast.unparse(node)[:80]
    except (ValueError, RecursionError, AttributeError):
        return ""


class _Visitor(ast.NodeVisitor):
    def __init__(self, rel: str, module: str):
        self.rel = rel
        self.module = module  # dotted module of the file, for its own exception classes
        self.out: list[Template] = []
        self.scopes: list[dict[str, ast.expr]] = [{}]  # per function: name -> last string-ish value
        self.appends: list[dict[str, list[ast.expr]]] = [{}]  # per function: list name -> messages appended
        # per function: name -> the string-ish values assigned before the last one (``msg = …`` in each branch)
        self.earlier: list[dict[str, list[ast.expr]]] = [{}]
        self.funcs: list[str] = [""]
        self.imported: dict[str, str] = {}  # name -> module it was imported from
        self.local_classes: set[str] = set()
        self.warn_names = {"warnings.warn"}

    # -- scopes --------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if len(self.scopes) > MAX_DEPTH:
            return
        self.scopes.append({})
        self.appends.append({})
        self.earlier.append({})
        self.funcs.append(node.name)
        self.generic_visit(node)
        self.scopes.pop()
        self.appends.pop()
        self.earlier.pop()
        self.funcs.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.local_classes.add(node.name)
        if len(self.scopes) <= MAX_DEPTH:
            self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if node.module == "warnings" and alias.name == "warn":
                self.warn_names.add(alias.asname or "warn")
            elif node.module and node.level == 0:
                self.imported[alias.asname or alias.name] = node.module

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self._formatted(node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _stringish(value):
            name = node.targets[0].id
            if value is not node.value and _name_of(node.value.func.value) == name:  # type: ignore[attr-defined]
                # `message = message.format(…)`: every value it had is formatted, none of them stays as it was
                self.earlier[-1][name] = [self._formatted(node.value, v) for v in self.earlier[-1].get(name, [])]
            elif name in self.scopes[-1] and len(earlier := self.earlier[-1].setdefault(name, [])) < MAX_DEPTH:
                earlier.append(self.scopes[-1][name])
            self.scopes[-1][name] = value
        self.generic_visit(node)

    def _formatted(self, node: ast.expr, template: ast.expr | None = None) -> ast.expr:
        """``name.format(…)`` where ``name`` holds a literal (httpx: ``message = message.format(self, …)``): the
        same call on the literal (or on ``template``), so its fields are read as the format's; else ``node``."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and isinstance(node.func.value, ast.Name)):
            return node
        base = template if template is not None else self.scopes[-1].get(node.func.value.id)
        if base is None or not _stringish(base):
            return node
        return ast.Call(func=ast.Attribute(value=base, attr="format", ctx=ast.Load()), args=node.args,
                        keywords=node.keywords)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            prev = self.scopes[-1].get(node.target.id)
            if prev is not None and _stringish(node.value):
                self.scopes[-1][node.target.id] = ast.BinOp(left=prev, op=ast.Add(), right=node.value)
        self.generic_visit(node)

    # -- message sites -------------------------------------------------------
    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            name = _name_of(exc.func)
            short = name.rsplit(".", 1)[-1]
            if short and short[:1].isupper():
                parts = self._message(exc.args[0], [])
                if parts is not None:
                    self._add(node.lineno, "raise", parts, f"{self._qualified(name)}: ")
                for item in [*self._joined_items(exc.args[0]), *self._earlier_values(exc.args[0])]:
                    self._add(node.lineno, "raise", item, f"{self._qualified(name)}: ")
        self.generic_visit(node)

    def _earlier_values(self, node: ast.expr) -> Iterator[list[str | Field]]:
        """``if …: msg = f"{code} Client Error: …" elif …: msg = f"{code} Server Error: …"; raise X(msg)``: the
        message of every branch, not only the last one assigned (requests' raise_for_status)."""
        if isinstance(node, ast.Name):
            for value in self.earlier[-1].get(node.id, []):
                parts = _parts(value, 0, self.scopes[-1])
                if parts is not None and any(isinstance(p, str) and p.strip() for p in parts):  # not `msg = ""`
                    yield parts

    def _joined_items(self, node: ast.expr) -> Iterator[list[str | Field]]:
        """``errors.append(f"…"); …; raise X(" ".join(errors))``: each message appended, one template each."""
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "join"
                    and len(sub.args) == 1 and isinstance(sub.args[0], ast.Name)):
                for value in self.appends[-1].get(sub.args[0].id, []):
                    parts = _parts(value, 0, self.scopes[-1])
                    if parts is not None:
                        yield parts

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "append" and isinstance(node.func.value, ast.Name)
                and len(node.args) == 1 and _stringish(node.args[0])):
            items = self.appends[-1].setdefault(node.func.value.id, [])
            if len(items) < MAX_DEPTH:
                items.append(node.args[0])
        name = _name_of(node.func)
        if name and node.args:
            head, _, method = name.rpartition(".")
            if method in LOG_LEVELS and head and ("log" in head.lower() or head == "warnings"):
                if head != "warnings":
                    parts = self._message(node.args[0], node.args[1:])
                    if parts is not None:
                        self._add(node.lineno, f"log.{LOG_LEVELS[method]}", parts, "")
            if name in self.warn_names:
                parts = self._message(node.args[0], [])
                if parts is not None:
                    category = _warning_category(node)
                    self._add(node.lineno, "warnings.warn", parts, f"{self.rel}:{node.lineno}: {category}: ")
        self.generic_visit(node)

    def _qualified(self, name: str) -> str:
        """How a traceback names the exception: builtins bare, others by module (as far as the file says)."""
        short = name.rsplit(".", 1)[-1]
        if "." in name or short in _BUILTIN_EXC:
            return short if short in _BUILTIN_EXC else name
        if short in self.imported:
            return f"{self.imported[short]}.{short}"
        if short in self.local_classes and self.module:
            return f"{self.module}.{short}"
        return short

    def _message(self, node: ast.expr, args: list[ast.expr]) -> list[str | Field] | None:
        if isinstance(node, ast.Name):
            node = self.scopes[-1].get(node.id, node)
        node = self._formatted(node)
        parts = _parts(node, 0, self.scopes[-1])
        if parts is None:
            return None
        if args and len(parts) == 1 and isinstance(parts[0], str):  # logger.error("... %s", x)
            return printf_parts(parts[0], [_hint(a) for a in args])
        return parts

    def _add(self, line: int, kind: str, parts: list[str | Field], prefix: str) -> None:
        text = text_of(parts)
        if len(text) > MAX_TEMPLATE:
            return
        self.out.append(Template(file=self.rel, line=line, kind=kind, parts=parts, text=text, prefix=prefix,
                                 function=self.funcs[-1]))


def _warning_category(node: ast.Call) -> str:
    cat = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "category"), None)
    name = _name_of(cat) if cat is not None else ""
    return name.rsplit(".", 1)[-1] if name else "UserWarning"


def _stringish(node: ast.expr) -> bool:
    return (isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
            or (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)) and _stringish(node.left))
            or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and _stringish(node.func.value)))


def _parts(node: ast.expr, depth: int, scope: dict[str, ast.expr] | None = None) -> list[str | Field] | None:
    """Literal text and fields of a message expression; None when it is not a message we can read."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[str | Field] = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append(v.value)
            elif isinstance(v, ast.FormattedValue):
                if (isinstance(v.value, ast.Name) and scope and v.value.id in scope and v.conversion == -1
                        and v.format_spec is None):  # f"...{detail}..." with detail = f"..." before it
                    inner = _parts(scope[v.value.id], depth + 1)
                    if inner is not None:
                        out.extend(inner)
                        continue
                spec = ""
                if isinstance(v.format_spec, ast.JoinedStr):
                    spec = "".join(str(x.value) for x in v.format_spec.values if isinstance(x, ast.Constant))
                conv = {115: "s", 114: "r", 97: "a"}.get(v.conversion, "")
                out.append(Field(_spec_conv(spec) or conv or "s", _hint(v.value)))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _parts(node.left, depth + 1)
        if left is None or len(left) != 1 or not isinstance(left[0], str):
            return None
        right = node.right
        hints = [_hint(e) for e in right.elts] if isinstance(right, ast.Tuple) else [_hint(right)]
        return printf_parts(left[0], hints)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        head = _parts(node.left, depth + 1, scope)
        tail = _parts(node.right, depth + 1, scope)
        if head is None and tail is None:
            return None
        unknown_head: list[str | Field] = [Field("s", _hint(node.left))]
        unknown_tail: list[str | Field] = [Field("s", _hint(node.right))]
        return (head or unknown_head) + (tail or unknown_tail)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        fmt = _parts(node.func.value, depth + 1, scope)  # a literal, or literals joined: `("…\n" "…").format(…)`
        if fmt is not None and all(isinstance(p, str) for p in fmt):
            return _format_parts("".join(str(p) for p in fmt), node)
    return None


def _spec_conv(spec: str) -> str:
    """``.2f`` -> ``.2f``, ``>10`` -> '' (a width is no conversion)."""
    if spec and spec[-1] in "dfegxXobs%":
        return spec
    return ""


def _format_parts(fmt: str, call: ast.Call) -> list[str | Field] | None:
    kw = {k.arg: _hint(k.value) for k in call.keywords if k.arg}
    out: list[str | Field] = []
    auto = 0
    try:
        pieces = list(string.Formatter().parse(fmt))
    except ValueError:
        return None
    for literal, name, spec, conv in pieces:
        if literal:
            out.append(literal)
        if name is None:
            continue
        if name == "":
            hint = _hint(call.args[auto]) if auto < len(call.args) else ""
            auto += 1
        elif name.isdigit():
            i = int(name)
            hint = _hint(call.args[i]) if i < len(call.args) else ""
        else:
            hint = kw.get(name.split(".")[0].split("[")[0], name)
        out.append(Field(_spec_conv(spec or "") or conv or "s", hint))
    return out


def python_templates(source: bytes, rel: str, module: str = "") -> Iterator[Template]:
    """Every message site of one Python file. Raises SyntaxError / ValueError / RecursionError on bad input."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in the scanned code are its own business
        tree = ast.parse(source, filename=rel)
    visitor = _Visitor(rel, module)
    visitor.visit(tree)
    yield from visitor.out
