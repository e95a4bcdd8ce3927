"""Code tables (``rules/codes/*.yaml``): closed sets upstream defines, each code mapped to a failure class.

CUDA's ``cudaError_t`` and ``CUresult``, NCCL's ``ncclResult_t``, NVML's return codes,
errno, HTTP statuses: a program prints one of these as a number, a name or a text
(``2``, ``cudaErrorMemoryAllocation``, ``out of memory``), and what the failure is
follows from the code whatever program printed it. Each table file lists the codes
as upstream's header has them (cited in the file), with the class a code means
where it means one; a rule captures the code as a fact and names the table
(``table: {key: err, codes: [cuda_runtime]}``), and the finding takes the class of
the code it printed (:func:`table_rows`).

Validated with pydantic like the rule files; a rule that names a table is resolved
at load, so the engine sees plain table rows (``spec.TableSpec``) and never these
files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from qwen_triage.rulepack.errors import RuleFileError
from qwen_triage.rulepack.paths import CODES_DIR, code_files  # noqa: F401 - names this module has long given
from qwen_triage.rulepack.severity import Severity
from qwen_triage.rulepack.spec import RowSpec, table_value

MAX_CODES = 1000  # a catalogue, not a dump: the biggest (cudaError_t) has ~140
TABLE_NAME = r"^[a-z][a-z0-9_]{1,40}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Code(_Strict):
    """One code: its number, its name, the text its library prints for it, older wordings, what it means."""

    code: int
    name: str = Field(min_length=2, max_length=80)
    text: str | None = Field(default=None, min_length=2, max_length=300)
    aliases: list[str] = Field(default_factory=list, max_length=20)
    class_: str | None = Field(default=None, alias="class")
    severity: Severity | None = None

    def forms(self) -> list[str]:
        """Every printed form of the code, as the lookup compares them."""
        out = [table_value(self.code), table_value(self.name)]
        out += [table_value(t) for t in ([self.text] if self.text else []) + self.aliases]
        return list(dict.fromkeys(out))

    @model_validator(mode="after")
    def _severity_needs_class(self) -> "Code":
        if self.severity is not None and self.class_ is None:
            raise ValueError(f"code {self.name}: a severity without a class (an unmapped code takes the rule's)")
        return self


class CodeTable(_Strict):
    """A table file: its name (what rules say in ``codes:``), where the codes come from, the codes."""

    table: str = Field(pattern=TABLE_NAME)
    title: str = Field(min_length=3)
    source: str = Field(description="URL of the upstream catalogue the codes follow")
    version: str = Field(min_length=3, description="the header / release the codes were read from")
    codes: list[Code] = Field(min_length=1, max_length=MAX_CODES)

    @model_validator(mode="after")
    def _consistent(self) -> "CodeTable":
        if not self.source.startswith(("https://", "http://")):
            raise ValueError(f"table source {self.source!r} is not a URL")
        ids: set[str] = set()
        for code in self.codes:
            for form in (table_value(code.code), table_value(code.name)):
                if form in ids:
                    raise ValueError(f"code {code.name}: {form!r} is listed twice")
                ids.add(form)
        texts: dict[str, Code] = {}
        for code in self.codes:
            for form in code.forms()[2:]:
                if form in ids and form not in (table_value(code.code), table_value(code.name)):
                    raise ValueError(f"code {code.name}: text {form!r} is another code's number or name")
                other = texts.setdefault(form, code)
                if (other.class_, other.severity) != (code.class_, code.severity):
                    raise ValueError(f"text {form!r} is shared by {other.name} and {code.name}, which mean "
                                     "different classes: the text cannot tell them apart")
        return self


CodeTables = dict[str, CodeTable]


def load_code_table(path: Path, classes: dict[str, Any], text: str | None = None) -> CodeTable:
    """One table file, validated; every class it names must be in the catalogue."""
    from qwen_triage.rulepack.yamlload import load_yaml

    loaded = load_yaml(path, text)
    table: CodeTable = loaded.validate(CodeTable)
    for i, code in enumerate(table.codes):
        if code.class_ is not None and code.class_ not in classes:
            pos = loaded.position_of(("codes", i, "class"))
            raise RuleFileError(path, pos.line, pos.column, f"code {code.name}: unknown class {code.class_!r}")
    return table


def load_code_tables(files: list[Path], classes: dict[str, Any],
                     texts: dict[Path, str] | None = None) -> CodeTables:
    """The tables of ``files`` by name; two files naming one table is an error."""
    out: CodeTables = {}
    for path in files:
        table = load_code_table(path, classes, (texts or {}).get(path))
        if table.table in out:
            raise RuleFileError(path, 1, 1, f"code table {table.table!r} is defined twice")
        out[table.table] = table
    return out


def table_rows(names: list[str], tables: CodeTables, taken: set[str] | None = None) -> tuple[RowSpec, ...]:
    """The rows a rule's ``codes: [names…]`` stands for: one per code that means a class, first table first.

    Each row lists every printed form of its code and adds facts naming it (``code_name``,
    ``code_text``, ``code_table``) so that a finding says which code it saw whatever form
    the log printed. A form an earlier table (or ``taken``: the rule's own rows) lists stays with that one.
    Codes without a class give no row: the rule's ``otherwise`` decides for them.
    """
    rows: list[RowSpec] = []
    taken = set(taken or ())
    for name in names:
        table = tables[name]
        for code in table.codes:
            if code.class_ is None:
                taken.update(code.forms())
                continue
            forms = tuple(f for f in code.forms() if f not in taken)
            taken.update(forms)
            if not forms:
                continue
            facts = {"code_table": table.table, "code_name": code.name, "code_number": str(code.code)}
            if code.text:
                facts["code_text"] = code.text
            rows.append(RowSpec(values=forms, class_=code.class_, severity=code.severity, facts=facts))
    return tuple(rows)


def expand_row_values(values: list[str | int], names: list[str], tables: CodeTables) -> tuple[str, ...]:
    """A rule's own row that names a code in one form (``ECONNREFUSED``) covers every form of that code."""
    out: list[str] = []
    for value in values:
        wanted = table_value(value)
        out.append(wanted)
        for name in names:
            code = next((c for c in tables[name].codes if wanted in c.forms()), None)
            if code is not None:
                out += code.forms()
                break
    return tuple(dict.fromkeys(out))


def resolve_rows(names: tuple[str, ...], own: tuple[RowSpec, ...], tables: CodeTables) -> tuple[RowSpec, ...]:
    """A rule's table rows: its own first (each value standing for every form of its code), then the tables'."""
    expanded = tuple(replace(r, values=expand_row_values(list(r.values), list(names), tables)) for r in own)
    return expanded + table_rows(list(names), tables, {v for r in expanded for v in r.values})


# Tables whose texts say which library printed a line on their own: a CUDA runtime or driver text, NCCL's,
# NVML's, a C library's strerror. HTTP reason phrases (``Not Found``) are not: any server prints them.
LOCATING_TABLES = ("cuda_runtime", "cuda_driver", "nccl", "nvml", "errno")


@dataclass(frozen=True)
class PrintedCode:
    """A code whose exact text (or name) a line printed: its table's name and title, the code."""

    table: str
    title: str
    version: str
    code: int
    name: str
    text: str


def printed_codes(texts: dict[Path, str]) -> dict[str, PrintedCode]:
    """Each code of the locating tables among the table files ``texts`` (path -> its text, as the caller read it)
    by its exact printed text and by its name, as the library writes them (case kept: CUDA's ``invalid argument``
    is not strerror's ``Invalid argument``).

    Read without the class check (a located line is never classed by its code here); a text two tables share
    stays with the first, in LOCATING_TABLES' order."""
    from qwen_triage.rulepack.yamlload import load_yaml

    tables: dict[str, CodeTable] = {}
    for path, text in texts.items():
        table = load_yaml(path, text).validate(CodeTable)
        tables[table.table] = table
    out: dict[str, PrintedCode] = {}
    for key in LOCATING_TABLES:
        table = tables.get(key)
        if table is None:
            continue
        for code in table.codes:
            found = PrintedCode(table.table, table.title, table.version, code.code, code.name, code.text or code.name)
            for form in (code.name, *([code.text] if code.text else []), *code.aliases):
                out.setdefault(form, found)
    return out
