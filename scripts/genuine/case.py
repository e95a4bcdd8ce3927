"""What one genuine-output case is: a real program, a pinned release, a command that drives it into a failure.

The harness (``scripts/genuine/run.py``) installs each ``Release`` of a ``Program`` into its own venv outside
the repository, writes a case's ``files`` into a fresh work directory, runs ``argv`` there with stdout and
stderr through one pipe, neutralises paths, and records the output as
``fixtures/genuine/<program>/<case id>-<release label>.log`` with an entry in that folder's ``cases.yaml``
(``../shared/corpus/FORMAT.md`` plus ``program: NAME VERSION``).

Stdlib only: the harness runs under any python3.11+, the programs under their venv's python.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True)
class Case:
    """One way to drive a program into a failure (or into a healthy start with its scary warnings).

    ``argv`` and ``env`` values may use ``{python}`` (the release's venv python), ``{bin}`` (its bin
    folder), ``{work}`` (the case's work directory, the command's cwd), ``{port}`` and ``{port2}`` (free ports
    in 29400-29999, picked per run, for ranks on 127.0.0.1); ``files`` are written into
    ``{work}`` first (text, or bytes for damaged binaries), with the same placeholders in text.
    """

    id: str
    expect: list[str]
    argv: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    also: list[str] = field(default_factory=list)
    input: str = "mixed"
    note: str = ""
    releases: tuple[str, ...] | None = None  # labels of Program.releases to run on; None: every release
    # a release whose build reaches another root cause (a CPU-only torch, say): its label -> expected classes
    expect_by: dict[str, list[str]] = field(default_factory=dict)
    timeout: float = 180.0
    exit: str = "fail"  # "fail": must exit non-zero, "ok": must exit 0, "timeout": must be killed, "any"


@dataclass(frozen=True)
class Release:
    """One pinned release of a program: its label (the program's own version) and what pip installs."""

    label: str
    requirements: list[str]
    # installed before ``requirements`` (an sdist that imports torch in its setup.py needs it first)
    first: list[str] = field(default_factory=list)
    pip_args: list[str] = field(default_factory=list)  # e.g. --no-build-isolation
    pip_env: dict[str, str] = field(default_factory=dict)  # e.g. DS_BUILD_OPS=0 while building
    # commands run once in the built venv ({python}, {bin}, {venv} filled in), e.g. a JIT op built ahead so
    # that no case records the build; rerun whenever they change, without reinstalling
    after: list[list[str]] = field(default_factory=list)


@dataclass(frozen=True)
class Program:
    """A program of the stack, the releases the pack claims to support (oldest and newest), its cases."""

    name: str
    releases: list[Release]
    cases: list[Case]
    dist: str | None = None  # distribution named in `program: NAME VERSION`; default: first requirement's


def script_case(id: str, expect: list[str], script: str, note: str, *, exit: str = "fail", input: str = "mixed",
                env: dict[str, str] | None = None, timeout: float = 180.0, prelude: str = "") -> Case:
    """A case whose whole scenario is one Python script: written as ``run.py`` in the work directory and run with the
    release's python (the shape most program modules share). ``prelude`` (a program's import) goes before it, so a
    module binds its settings once: ``_case = partial(script_case, prelude="import paddle\\n", timeout=180)``."""
    return Case(id=id, expect=expect, argv=["{python}", "run.py"], files={"run.py": prelude + script},
                env=dict(env or {}), input=input, note=note, exit=exit, timeout=timeout)


# A script the scenarios of a port already taken run: it binds the port given first, then runs the rest of its
# command line (the program under test) while holding it.
PORT_HOLDER = '''\
import socket
import subprocess
import sys

sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("0.0.0.0", int(sys.argv[1])))
sock.listen(16)
sys.exit(subprocess.call(sys.argv[2:]))
'''


def start_server(command: str, ready_url: str) -> str:
    """A shell fragment that starts ``command`` in the background (its pid in ``$SRV``) and waits up to 150 s until
    ``ready_url`` answers; if the server dies first, the case exits with its status. The client that follows leaves
    its status in ``$rc`` and ``STOP_SERVER`` ends the case."""
    return ("{ " + command + " & } ; SRV=$!; "
            "for i in $(seq 150); do curl -sf " + ready_url + " >/dev/null && break; "
            "kill -0 $SRV 2>/dev/null || { wait $SRV; exit $?; }; sleep 1; done; ")


# stop the server (SIGINT, as Ctrl-C), wait for it, exit with the client's status
STOP_SERVER = "kill -INT $SRV; wait $SRV; exit $rc"


# The script that writes the tiny random Qwen2 the model-loading scenarios use (``make_tiny_qwen.py DIR``); a case
# ships it in its ``files`` and runs it in its work directory.
MAKE_TINY = (Path(__file__).resolve().parents[1] / "make_tiny_qwen.py").read_text()


# Build the tiny model quietly, then run the user's command (a shell line continues it): only the command's output
# is the case, and a failed build exits 97, which no scenario expects.
BUILD_TINY = "{python} make_tiny_qwen.py {work}/tiny >/dev/null 2>&1 || { echo 'tiny model build failed'; exit 97; }; "

# ... and then damage it with the case's ``damage.py`` (``tiny_files``), as quietly: a failed step exits 97 as well.
BUILD_DAMAGED_TINY = "{python} make_tiny_qwen.py {work}/tiny >/dev/null 2>&1 && {python} damage.py || exit 97; "


def tiny_model_case(id: str, expect: list[str], name: str, script: str, args: str, note: str, *,
                    build: bool = True, exit: str = "fail", timeout: float = 420.0) -> Case:
    """A case whose scenario is the user's script ``name`` run on the tiny model with ``args`` (the model path
    first): it builds the tiny model quietly first, unless ``build`` is off (the scenario names a model that is
    not there), and runs offline."""
    line = (BUILD_TINY if build else "") + f"exec {{python}} {name} {args}"
    return Case(id=id, expect=expect, argv=["bash", "-c", line], files={"make_tiny_qwen.py": MAKE_TINY, name: script},
                env=dict(OFFLINE_ENV), input="transformers", note=note, exit=exit, timeout=timeout)


def per_release(cases: list[Case], releases: dict[str, tuple[str, ...]] | None = None,
                expect_by: dict[str, dict[str, list[str]]] | None = None) -> list[Case]:
    """``cases`` with a program's tables of what its releases differ in applied, by case id: ``releases`` (the
    releases a scenario runs on: an older build lacks its flag or binary, or serves what a newer one refuses) and
    ``expect_by`` (the classes a release reaches instead: it fails there for another reason); the rest unchanged."""
    releases, expect_by = releases or {}, expect_by or {}
    return [replace(c, **({"releases": releases[c.id]} if c.id in releases else {}),
                    **({"expect_by": expect_by[c.id]} if c.id in expect_by else {})) for c in cases]


def damage_script(damage: str = "") -> str:
    """A case's ``damage.py``: ``damage`` (e.g. ``config_edit``'s lines) run with ``M``, the tiny model's directory."""
    return "import json, pathlib\nM = pathlib.Path('{work}/tiny')\n" + damage + "\n"


def tiny_files(damage: str = "") -> dict[str, str]:
    """The files of a case that builds the tiny model and then damages it: ``make_tiny_qwen.py`` and ``damage.py``."""
    return {"make_tiny_qwen.py": MAKE_TINY, "damage.py": damage_script(damage)}


def config_edit(**changes: object) -> str:
    """Lines of a case's ``damage.py`` (where ``M`` is the tiny model's directory) that set keys of its config.json."""
    return ("c = json.loads((M / 'config.json').read_text())\n"
            + "".join(f"c[{k!r}] = {v!r}\n" for k, v in changes.items())
            + "(M / 'config.json').write_text(json.dumps(c))")


# A release's ``after`` step for programs installed beside the CPU torch: pip resolves torchvision to a build for CUDA
# whose ``torchvision::nms`` does not load, which breaks transformers' imports; CPU hosts users run them on have none.
DROP_TORCHVISION = [["{python}", "-m", "pip", "uninstall", "-y", "-q", "torchvision"]]


# The environment of scenarios that must never reach a hub and stay on one CPU thread.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_TELEMETRY": "1",
               "OMP_NUM_THREADS": "1"}

# torchrun's rendezvous on this host only, at the case's free port
TORCHRUN_LOCAL = ["--master-addr", "127.0.0.1", "--master-port", "{port}"]
