"""The `qwen-triage` command line."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import click

from qwen_triage import __version__
from qwen_triage.cli.exiting import conclude, fail
from qwen_triage.cli.options import engine_option, format_option, pack_options, rules_option
from qwen_triage.exits import EXIT_CLEAN, EXIT_FOUND, Failure
from qwen_triage.report.emit import FORMATS
from qwen_triage.report.formats import JSONL, PLAIN, write_format
from qwen_triage.rulepack.errors import RuleFileError

# Commands that live in their own subpackages, imported only when asked for, so
# that `scan` starts fast and a broken optional part cannot take it down.
LAZY_COMMANDS = {
    "run": "qwen_triage.cli.live",
    "attach": "qwen_triage.cli.live",
    "journal": "qwen_triage.cli.live",
    "plan": "qwen_triage.cli.preflight",
    "check-model": "qwen_triage.cli.preflight",
    "doctor": "qwen_triage.cli.preflight",
    "relaunch": "qwen_triage.cli.relaunch",
    "check": "qwen_triage.cli.fleet",
    "report": "qwen_triage.cli.bugreport",
}


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except Failure as exc:
            fail(str(exc))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None or name not in LAZY_COMMANDS:
            return command
        target = LAZY_COMMANDS[name]
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name and target.startswith(exc.name):
                return None  # that part is not in this build
            raise
        return next((c for c in getattr(module, "COMMANDS", ()) if c.name == name), None)

def load_rule_pack(rule_dirs: tuple[str, ...]):
    """The bundled pack plus ``rule_dirs``, uncompiled; a bad rule file stops with exit status 2."""
    from qwen_triage.rulepack.pack import load_pack
    from qwen_triage.rulepack.paths import extra_rule_dirs

    try:
        return load_pack(extra_rule_dirs(list(rule_dirs)))
    except RuleFileError as exc:
        fail(str(exc))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="qwen-triage")
def cli() -> None:
    """Find the root cause of a failing Ollama / vLLM / llama.cpp server from its logs."""


@cli.command()
@click.argument("paths", nargs=-1)
@click.option("--format", "fmt", type=click.Choice([*FORMATS, JSONL]), default="text",
              show_default=True, help="jsonl: one JSON report per input, in input order.")
@pack_options
@click.option("--max-line", type=click.IntRange(256, 64 * 2**20), default=64 * 1024, show_default=True,
              help="Lines longer than this many bytes are matched on this prefix.")
@click.option("--follow", "-f", is_flag=True, help="Keep reading as the file (or stdin) grows, like tail -F.")
@click.option("--fail-on", "fail_on", type=click.Choice(["diagnosis", "unrecognised"]), default="diagnosis",
              show_default=True,
              help="Exit 1 on a diagnosis (default), or also on error lines no rule explains.")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=None,
              help="Worker processes (0: every CPU this process may use). A plain file of --split-above or more is "
                   "scanned in parts over them (default: every CPU); with --format jsonl, each input on its own "
                   "(default: one process).")
@click.option("--split-above", "split_above", metavar="SIZE", default=None,
              help="Scan plain files this big or bigger in parts over --jobs workers (e.g. 256M, 1G; a bare number "
                   "is MiB)  [default: $QWEN_TRIAGE_SPLIT_ABOVE, else 256M]")
def scan(paths: tuple[str, ...], fmt: str, rule_dirs: tuple[str, ...], engine: str, max_line: int, follow: bool,
         fail_on: str, jobs: int | None, split_above: str | None) -> None:
    """Triage logs: files (plain or gzip), or stdin when no path or `-` is given."""
    from qwen_triage.cli.scan_command import scan_and_exit
    from qwen_triage.engine.scan import ScanOptions

    per_input = fmt == JSONL
    if per_input and follow:
        fail("--follow reads one stream; it does not go with --format jsonl")
    scan_and_exit(ScanOptions(paths=paths, rule_dirs=rule_dirs, engine=engine, max_line=max_line, fail_on=fail_on,
                              per_input=per_input, jobs=jobs, split_above=_size(split_above, "--split-above")),
                  fmt, follow)


def _size(text: str | None, option: str) -> int | None:
    """A size option's bytes (a bare number: MiB); a bad one is a usage error."""
    if text is None:
        return None
    from qwen_triage.units import MiB, SizeError, parse_size

    try:
        return parse_size(text, bare=MiB)
    except SizeError as exc:
        fail(f"{option}: {exc}")


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the report (`scan --format json`)."""
    from qwen_triage.report.model import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


@cli.group()
def rules() -> None:
    """List, show, lint and test rules."""


@rules.command("list")
@format_option
@rules_option
def rules_list(fmt: str, rule_dirs: tuple[str, ...]) -> None:
    """Every class, rule and built-in check of the pack."""
    from qwen_triage.authoring.catalog import catalog_json, catalog_markdown, print_catalog

    pack = load_rule_pack(rule_dirs)
    write_format(fmt, {
        "json": lambda _: click.echo(catalog_json(pack)),
        "markdown": lambda _: click.echo(catalog_markdown(pack), nl=False),
        "text": lambda s: print_catalog(pack, _console(s)),
    })


@rules.command("classes")
@click.option("--format", "fmt", type=click.Choice(PLAIN), default="text", show_default=True)
@rules_option
def rules_classes(fmt: str, rule_dirs: tuple[str, ...]) -> None:
    """Every failure class id a rule's `class:` may name, with its title and fix."""
    from qwen_triage.report.formats import json_renderer
    from qwen_triage.textsafe import clean

    pack = load_rule_pack(rule_dirs)
    classes = sorted(pack.classes.values(), key=lambda c: c.id)

    def as_json() -> str:
        rows = [{"id": c.id, "title": c.title, "fix": c.fix, "explains": list(c.explains)} for c in classes]
        return json.dumps({"classes": rows}, indent=2, ensure_ascii=False)

    def as_text(_: object) -> None:
        width = max((len(c.id) for c in classes), default=0)
        for c in classes:
            click.echo(clean(f"{c.id:<{width}}  {c.title}"))
            click.echo(clean(f"{'':<{width}}  fix: {c.fix}"))

    write_format(fmt, {"json": json_renderer(as_json), "text": as_text})


@rules.command("show")
@click.argument("rule_id")
@rules_option
def rules_show(rule_id: str, rule_dirs: tuple[str, ...]) -> None:
    """One rule, as loaded (YAML-equivalent JSON) with its file and line."""
    pack = load_rule_pack(rule_dirs)
    lr = pack.rule(rule_id)
    if lr is None:
        fail(f"no rule {rule_id!r}")
    click.echo(f"# {lr.path}:{lr.position.line}")
    click.echo(json.dumps(lr.rule.shown(), indent=2))


@rules.command("warm")
@rules_option
def rules_warm(rule_dirs: tuple[str, ...]) -> None:
    """Validate and compile the pack into the cache now (an image build), so no later run pays for it.

    The cache is the user cache directory, or $XDG_CACHE_HOME/qwen-triage; `check` uses
    <state>/cache/qwen-triage when XDG_CACHE_HOME is not set.
    """
    from qwen_triage.engine.scanner import cache_dir, load_compiled

    compiled = load_compiled(rule_dirs, engine="hyperscan" if _hyperscan() else "literal")
    click.echo(f"{len(compiled.rules)} rules, {len(compiled.patterns)} patterns "
               f"({compiled.prefilter.name} prefilter) cached in {cache_dir()}")


def _hyperscan() -> bool:
    from qwen_triage.engine.prefilter import hyperscan_available

    return hyperscan_available()


@rules.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--strict", is_flag=True, help="Warnings fail too.")
@click.option("--select", multiple=True, metavar="ID", help="Only these checks (an id, or a prefix: `pattern`).")
@click.option("--ignore", multiple=True, metavar="ID", help="Not these checks (an id, or a prefix: `overlap`).")
@click.option("--level", "level_pairs", multiple=True, metavar="ID=LEVEL",
              help="Report these checks at another level (error, warning, info): `overlap=error`.")
@click.option("--list-checks", is_flag=True, help="List every check (id, level, what it finds) and exit.")
@click.option("--format", "fmt", type=click.Choice(PLAIN), default="text", show_default=True)
def rules_lint(paths: tuple[str, ...], strict: bool, select: tuple[str, ...], ignore: tuple[str, ...],
               level_pairs: tuple[str, ...], list_checks: bool, fmt: str) -> None:
    """Schema, patterns, ids, classes, actions, examples, backtracking probes, overlapping rules."""
    from qwen_triage.authoring.lint.check import parse_levels, unknown_selectors
    from qwen_triage.authoring.lint.listing import checks_json, checks_text, problems_json
    from qwen_triage.authoring.lint.registry import CHECKS
    from qwen_triage.authoring.lint.run import lint_paths

    try:
        levels = parse_levels(level_pairs)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--level") from None
    unknown = unknown_selectors(CHECKS, [*select, *ignore, *(sel for sel, _ in levels)])
    if unknown:
        raise click.BadParameter(f"no check {', '.join(map(repr, unknown))} (`rules lint --list-checks`)",
                                 param_hint="--select/--ignore/--level")
    if list_checks:
        write_format(fmt, {"json": lambda _: checks_json(CHECKS) + "\n",
                           "text": lambda _: checks_text(CHECKS) + "\n"})
        return
    problems = lint_paths([Path(p) for p in paths], select=select, ignore=ignore, levels=levels)
    errors = [p for p in problems if p.level == "error" or strict]
    write_format(fmt, {"json": lambda _: problems_json(problems, len(errors)) + "\n",
                       "text": lambda _: "".join(f"{p}\n" for p in problems)})
    click.echo(f"{len(errors)} error(s), {len(problems) - len(errors)} warning(s)", err=True)
    sys.exit(EXIT_FOUND if errors else EXIT_CLEAN)


@rules.command("test")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@engine_option
def rules_test(paths: tuple[str, ...], engine: str) -> None:
    """Every `match` example fires its rule; no `no_match` example does."""
    from qwen_triage.authoring.rules_test import RulesTestOptions, run

    result = run(RulesTestOptions(paths=paths, engine=engine))
    for r in result.failed:
        want = "should match but did not" if r.kind == "match" else "should not match but did"
        click.echo(f"{r.path}:{r.line}: [{r.rule}] {r.kind} example {want}: {r.example!r}")
    click.echo(f"{len(result.examples) - len(result.failed)} passed, {len(result.failed)} failed")
    wrapped = result.wrapper_misses
    for v in wrapped:
        click.echo(f"{v.loaded.path}:{v.loaded.position.line}: [{v.loaded.rule.id}] match example {v.describe()}")
    click.echo(f"{len(result.variants)} variants (wrappers, heads, drift): {len(wrapped)} wrapper misses, "
               f"{result.drift_misses} head or drift misses (warnings: rules lint --select robust)")
    sys.exit(EXIT_CLEAN if result.ok else EXIT_FOUND)


@rules.command("actions")
@click.option("--format", "fmt", type=click.Choice(PLAIN), default="text", show_default=True)
def rules_actions(fmt: str) -> None:
    """Every fix action type a rule may carry: its parameters and safety class."""
    from qwen_triage.rulepack.actions import allow_lists, describe_actions

    actions = describe_actions()

    def as_text(_: object) -> None:
        for a in actions:
            params = ", ".join(
                f"{p['name']}: {p['type']}" + ("" if p["required"] else f" = {p['default']!r}")
                for p in a["parameters"]  # type: ignore[attr-defined]
            )
            click.echo(f"{a['type']:<30} {a['safety']:<16} {params or '-'}")
            if a["summary"]:
                click.echo(f"{'':<30} {a['summary']}")
        allowed = allow_lists()
        click.echo("")
        click.echo("safe only with a valid value for: " + " ".join(allowed["args"]))
        click.echo("and the variables: " + " ".join(allowed["env"]))
        click.echo("anything else is printed as a step for you (caution), whatever the rule says.")

    write_format(fmt, {
        "json": lambda _: click.echo(json.dumps({"actions": actions, "allowed": allow_lists()}, indent=2, default=str)),
        "text": as_text,
    })


@rules.command("suggest")
@click.argument("paths", nargs=-1, required=True)
@pack_options
@click.option("--prefix", default="local", show_default=True, help="Rule id namespace of the drafts.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Write the drafts here instead of stdout.")
def rules_suggest(paths: tuple[str, ...], rule_dirs: tuple[str, ...], engine: str, prefix: str,
                  out_path: str | None) -> None:
    """Draft a rule for each error line no rule explains (fill in the class, then lint and test)."""
    from qwen_triage.authoring.suggest import SuggestOptions, render, run

    drafts = run(SuggestOptions(paths=paths, rule_dirs=rule_dirs, engine=engine, prefix=prefix))
    if not drafts:
        click.echo("qwen-triage: no unrecognised error lines: nothing to suggest", err=True)
        sys.exit(EXIT_CLEAN)
    text = render(drafts)
    if out_path:
        from qwen_triage.atomicfile import write_atomic

        try:
            write_atomic(out_path, text, mode=0o600)  # drafts quote log lines
        except OSError as exc:
            fail(f"{out_path}: {exc.strerror or exc}")
        click.echo(f"qwen-triage: {len(drafts)} draft rule(s) written to {out_path}", err=True)
    else:
        click.echo(text, nl=False)
    sys.exit(EXIT_CLEAN)


# --- rules coverage ---
@rules.command("coverage")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(PLAIN), default="text", show_default=True)
@pack_options
@click.option("--pack", "pack_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Measure the rule files of this directory instead of the bundled ones (another version of "
                   "the pack: `git show REV:rules/…` into a directory).")
@click.option("--limit", type=click.IntRange(min=0), default=0, show_default=True,
              help="Text: list at most this many uncovered templates (0: all).")
@click.option("--drift", nargs=2, metavar="OLD NEW", default=None,
              help="Compare two releases instead: two source trees, or PROGRAM@VERSION twice from the catalogue "
                   "(PROGRAM@ for its oldest / newest pinned release). Lists the templates that changed and each "
                   "rule that matched the old wording and nothing of the new; exit 1 when there is one.")
def rules_coverage(paths: tuple[str, ...], fmt: str, rule_dirs: tuple[str, ...], engine: str,
                   pack_dir: str | None, limit: int, drift: tuple[str, str] | None) -> None:
    """Which of a program's own messages the pack knows: PATH is a source tree or an installed package."""
    if drift is None and not paths:
        fail("rules coverage: give a PATH, or --drift OLD NEW")
    if drift is not None and paths:
        fail("rules coverage: --drift compares its own two releases; give no PATH with it")
    from qwen_triage.authoring.coverage import CoverageOptions, run
    from qwen_triage.authoring.coverage_render import coverage_json, coverage_text

    if drift is not None:
        from qwen_triage.authoring.coverage_render import drift_json, drift_text
        from qwen_triage.authoring.drift import DriftOptions
        from qwen_triage.authoring.drift import run as run_drift

        result = run_drift(DriftOptions(old=drift[0], new=drift[1], rule_dirs=rule_dirs, engine=engine,
                                        pack_dir=pack_dir))
        write_format(fmt, {"json": lambda _: drift_json(result) + "\n",
                           "text": lambda _: drift_text(result, limit=limit)})
        sys.exit(EXIT_FOUND if result.lost else EXIT_CLEAN)
    cov = run(CoverageOptions(paths=paths, rule_dirs=rule_dirs, engine=engine, pack_dir=pack_dir))
    write_format(fmt, {"json": lambda _: coverage_json(cov) + "\n", "text": lambda _: coverage_text(cov, limit=limit)})
    sys.exit(EXIT_CLEAN)
# --- end rules coverage ---


# --- rules export (fleet) ---
@rules.command("export")
@click.option("--to", "target", type=click.Choice(["npd"]), required=True,
              help="npd: node-problem-detector system-log-monitor configs (docs/fleet.md).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write one file per config here (else print JSON on stdout).")
@click.option("--plugin", "plugins", type=click.Choice(["kmsg", "journald", "custom"]), multiple=True,
              help="Only this config (repeatable; default all): the kmsg or journald system-log-monitor, or the "
                   "custom-plugin-monitor that runs `qwen-triage check`.")
@click.option("--identifier", default="systemd", show_default=True,
              help="journald SYSLOG_IDENTIFIER the journald config watches.")
@click.option("--buffer-size", type=click.IntRange(1, 50), default=10, show_default=True)
@click.option("--lookback", default="5m", show_default=True)
@click.option("--strict", is_flag=True, help="Exit 1 when any rule could not be exported.")
@rules_option
def rules_export(target: str, out_dir: str | None, plugins: tuple[str, ...], identifier: str, buffer_size: int,
                 lookback: str, strict: bool, rule_dirs: tuple[str, ...]) -> None:
    """Export the kernel and journal rules for another engine; what cannot be said goes to stderr."""
    pack = load_rule_pack(rule_dirs)
    try:  # the export checks each pattern under RE2 (google-re2, the `fleet` extra)
        from qwen_triage.fleet.npd_export import ExportOptions, run, write_configs

        result = run(pack, ExportOptions(plugins=plugins, identifier=identifier, buffer_size=buffer_size,
                                         lookback=lookback))
    except ImportError as exc:
        fail(str(exc))
    for skipped in result.skipped:
        click.echo(f"qwen-triage: not exported: {skipped}", err=True)
    if out_dir is None:
        docs = list(result.configs.values())
        click.echo(json.dumps(docs[0] if len(docs) == 1 else result.configs, indent=2))
    else:
        for path, n in write_configs(result, Path(out_dir)):
            click.echo(f"qwen-triage: wrote {path} ({n} NPD rules)", err=True)
    sys.exit(EXIT_FOUND if strict and result.skipped else EXIT_CLEAN)
# --- end rules export (fleet) ---


@cli.command("eval")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@format_option
@pack_options
def eval_cmd(directory: str, fmt: str, rule_dirs: tuple[str, ...], engine: str) -> None:
    """Score the pack on a labelled corpus (walks DIR for cases.yaml)."""
    from qwen_triage.authoring.eval_render import eval_markdown, print_eval
    from qwen_triage.authoring.evaluate import EvalOptions, run

    result = run(EvalOptions(directory=directory, rule_dirs=rule_dirs, engine=engine))
    write_format(fmt, {
        "json": lambda _: click.echo(result.model_dump_json(indent=2)),
        "markdown": lambda _: click.echo(eval_markdown(result), nl=False),
        "text": lambda s: print_eval(result, _console(s)),
    })


def _console(stream):
    """rich's console for a command's text format (imported only when text is asked for)."""
    from rich.console import Console

    return Console(file=stream, highlight=False)


def main() -> None:
    """The console script's command line, through click (cli.entry runs a plain scan without it)."""
    conclude(lambda: cli.main(prog_name="qwen-triage", standalone_mode=True))
