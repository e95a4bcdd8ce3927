"""`rules coverage`: message templates of real (small) source trees through the bundled pack."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

PY_SOURCE = '''
import logging
from warnings import warn

logger = logging.getLogger(__name__)


class QuuxError(Exception):
    pass


def check_tp(total_num_heads, tp_size):
    if total_num_heads % tp_size != 0:
        raise ValueError(
            f"Total number of attention heads ({total_num_heads}) must be divisible by tensor parallel "
            f"size ({tp_size}).")


def load(path, rank):
    msg = f"frobnicator failed to quuxify {path!r} on rank {rank}"
    raise QuuxError(msg)


def serve(port):
    logger.error("widget pool drained on port %d", port)
    warn("the zorble option is deprecated", FutureWarning)
    raise RuntimeError("gadget spindle misaligned: {}".format(port))
'''

C_SOURCE = r'''
#include <stdio.h>
static ncclResult_t checkDevices(struct ncclComm* comm, int rank, int i) {
  /* WARN("commented out: not a message") */
  if (comm->peerInfo[i].busId == comm->peerInfo[rank].busId) {
    WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx", rank, i, comm->peerInfo[i].busId);
    return ncclInvalidUsage;
  }
  INFO(NCCL_INIT, "zorble transport %s selected for peer %d", name, i);
  return ncclSuccess;
}

static int load_file(const char * fname) {
  LLAMA_LOG_ERROR("%s: the blorb table in %s is upside down\n", __func__, fname);
  throw std::runtime_error(format("unknown quux type %" PRIu64 " in file", t));
}
'''

GO_SOURCE = '''
package ggml

import (
	"errors"
	"fmt"
	"log/slog"
)

var ErrMagic = errors.New("invalid file magic")

func Decode(path string) error {
	slog.Error("the flux capacitor is unplugged", "path", path)
	return fmt.Errorf("cannot wibble %s: %w", path, ErrMagic)
}
'''


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "prog"
    (root / "engine").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "native").mkdir()
    (root / "tests").mkdir()
    (root / "config" / "parallel.py").write_text(PY_SOURCE)
    (root / "engine" / "transport.cc").write_text(C_SOURCE)
    (root / "native" / "ggml.go").write_text(GO_SOURCE)
    (root / "tests" / "test_x.py").write_text('raise ValueError("a test\'s own message, not the program\'s")\n')
    return root


def qt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qwen_triage", *args], capture_output=True, timeout=300, cwd=ROOT)


def _by_template(doc: dict) -> dict[str, dict]:
    return {t["template"]: t for t in doc["templates"]}


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = _tree(tmp_path_factory.mktemp("src"))
    proc = qt("rules", "coverage", str(root), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_json_shape(doc: dict) -> None:
    assert set(doc) == {"templates", "summary"}
    for t in doc["templates"]:
        assert set(t) == {"file", "line", "kind", "template", "example", "class", "rule"}
        assert t["file"].startswith("prog/") and isinstance(t["line"], int) and t["line"] > 0
    s = doc["summary"]
    assert s["templates"] == len(doc["templates"])
    assert s["covered"] == sum(t["rule"] is not None for t in doc["templates"])
    assert 0 < s["share"] < 1
    assert s["files"] == 3  # the tests directory is not the program's output
    assert not any("test_x" in t["file"] for t in doc["templates"])
    assert set(s["by_module"]) == {"prog/config", "prog/engine", "prog/native"}
    assert sum(m["templates"] for m in s["by_module"].values()) == s["templates"]


def test_python_messages_classified(doc: dict) -> None:
    t = _by_template(doc)
    tp = next(v for k, v in t.items() if k.startswith("Total number of attention heads"))
    assert tp["kind"] == "raise"
    assert tp["example"].startswith("ValueError: Total number of attention heads (")
    assert (tp["class"], tp["rule"]) == ("config.tp_indivisible", "vllm.tp-heads-indivisible")
    # a message assigned to a name first, raised with an exception class of the file's own module
    quux = t["frobnicator failed to quuxify {path} on rank {rank}"]
    assert quux["example"].startswith("prog.config.parallel.QuuxError: frobnicator failed to quuxify '/")
    assert quux["example"].endswith("on rank 0")  # a rank is a GPU index, not any number
    assert quux["rule"] is None and quux["class"] is None
    assert t["widget pool drained on port %d"]["kind"] == "log.error"
    assert t["widget pool drained on port %d"]["example"] == "widget pool drained on port 29500"
    warned = t["the zorble option is deprecated"]
    assert warned["kind"] == "warnings.warn" and ": FutureWarning: the zorble option" in warned["example"]
    assert t["gadget spindle misaligned: {port}"]["example"] == "RuntimeError: gadget spindle misaligned: 29500"


def test_c_and_go_messages_classified(doc: dict) -> None:
    t = _by_template(doc)
    dup = t["Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx"]
    assert dup["kind"] == "WARN" and " NCCL WARN Duplicate GPU detected : rank 0 and rank " in dup["example"]
    assert dup["rule"] == "nccl.duplicate-gpu"
    assert not any("commented out" in k for k in t)
    assert t["zorble transport %s selected for peer %d"]["kind"] == "INFO"
    blorb = t["%s: the blorb table in %s is upside down\n"]
    assert blorb["example"] == "load_file: the blorb table in /data/models/model-a/config.json is upside down"
    assert t["unknown quux type %llu in file"]["kind"] == "throw"
    assert t["unknown quux type %llu in file"]["example"] == "unknown quux type 4 in file"
    magic = t["invalid file magic"]
    assert magic["kind"] == "errors.New" and magic["rule"] == "ollama.invalid-file-magic"
    flux = t["the flux capacitor is unplugged"]
    assert flux["kind"] == "slog.Error" and 'level=ERROR source=ggml.go:' in flux["example"]
    assert flux["example"].endswith('msg="the flux capacitor is unplugged"')
    assert t["cannot wibble %s: %w"]["kind"] == "fmt.Errorf"


def test_text_groups_uncovered_by_module_start_up_first(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    proc = qt("rules", "coverage", str(root))
    assert proc.returncode == 0
    out = proc.stdout.decode()
    assert "message templates in 3 files" in out
    listed = out.split("not covered:", 1)[1]
    # config (start-up) before engine start, and a module no stage names after both; covered ones not listed
    assert listed.index("prog/config  [config]") < listed.index("prog/engine  [engine start]") < listed.index(
        "prog/native  [other]")
    assert "frobnicator failed" in listed and "Duplicate GPU detected" not in listed


def test_pack_option_measures_another_pack(tmp_path: Path) -> None:
    """--pack DIR replaces the bundled rules: an empty rules dir knows nothing."""
    root = _tree(tmp_path)
    empty = tmp_path / "rules"
    empty.mkdir()
    proc = qt("rules", "coverage", str(root), "--format", "json", "--pack", str(empty))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"]["templates"] > 5 and doc["summary"]["covered"] == 0


def test_hostile_input_is_skipped_or_bounded(tmp_path: Path, compiled) -> None:
    from qwen_triage.authoring import coverage

    root = tmp_path / "evil"
    root.mkdir()
    (root / "blob.c").write_bytes(b"\x7fELF\0\0\0" + bytes(range(256)) * 100)
    (root / "huge.py").write_bytes(b"x = 1\n" * (coverage.MAX_FILE_BYTES // 6 + 10))
    (root / "nested.py").write_text("x = " + "(" * 5000 + ")" * 5000 + "\n")
    (root / "deep.py").write_text("raise ValueError(" + "'abcd ' + " * 3000 + "'end')\n")
    (root / "unterminated.c").write_text("/* " * 50000 + 'WARN("never %s"' * 20000)
    (root / "calls.cc").write_text('WARN("spindle %s",' * 20000)
    (root / "bad.go").write_text("package x\n`" + "fmt.Errorf(\"x\" " * 10000)
    (root / "ok.py").write_text('raise KeyError("the real message survives")\n')
    (root / "link.py").symlink_to("/etc/hostname")  # never followed (and never read)
    started = time.process_time()
    cov = coverage.measure([root], compiled)
    assert time.process_time() - started < 120  # bounded, not quadratic (a generous ceiling, CPU time)
    skipped = dict(cov.skipped)
    assert "binary" in skipped["evil/blob.c"]
    assert "larger than" in skipped["evil/huge.py"]
    assert "not parsed" in skipped["evil/nested.py"]
    texts = [r.template.text for r in cov.results]
    assert "the real message survives" in texts
    assert not any(r.template.file == "evil/link.py" for r in cov.results)


def test_fstring_and_format_rendering() -> None:
    from qwen_triage.authoring.msg_template import render
    from qwen_triage.authoring.msgs_python import python_templates

    src = b'''
def f(self, gpu_id, free_bytes, ratio, model_name):
    raise torch.OutOfMemoryError(f"CUDA out of memory on GPU {gpu_id}: {free_bytes} bytes free, "
                                 f"{ratio:.2f} used by {model_name!r}")
'''
    (t,) = list(python_templates(src, "pkg/mem.py", "pkg.mem"))
    assert t.text == "CUDA out of memory on GPU {gpu_id}: {free_bytes} bytes free, {ratio} used by {model_name}"
    assert render(t) == ("torch.OutOfMemoryError: CUDA out of memory on GPU 0: 4 bytes free, 0.90 used by "
                         "'org/model-a'")


def test_c_literals_macro_parameters_and_plain_throws() -> None:
    """A macro parameter between literals is a field; a thrown plain literal keeps its '%' as written."""
    from qwen_triage.authoring.msg_template import render
    from qwen_triage.authoring.msgs_clike import clike_templates

    src = r'''
#define SYSCHECK(call, name) do { WARN("Call to " name " failed: %s", strerror(errno)); } while (0)
void f() {
  throw std::runtime_error("Failed to find %LOCALAPPDATA%\\directory");
  GGML_LOG_ERROR("%s: tensor '%s' has offset %" PRIu64 ", expected %zu\n", __func__, name, off, exp);
}
'''
    got = {t.text: render(t) for t in clike_templates(src, "prog/src/x.cc")}
    assert got["Call to %s failed: %s"] == "node1:1234:1240 [0] NCCL WARN Call to value failed: error detail"
    assert got["Failed to find %LOCALAPPDATA%\\directory"] == "Failed to find %LOCALAPPDATA%\\directory"
    assert got["%s: tensor '%s' has offset %llu, expected %zu\n"] == "f: tensor 'value' has offset 4, expected 4"


def test_concatenating_check_macros_make_one_template_of_their_arguments() -> None:
    """Gloo's GLOO_ENFORCE / GLOO_ERROR_MSG and torch's TORCH_CHECK join their arguments (MakeString, c10::str):
    the literals are the text, every other argument a field, the condition and compared values left out."""
    from qwen_triage.authoring.msg_template import typed_regex
    from qwen_triage.authoring.msgs_clike import clike_templates

    src = r'''
void Pair::handleRead() {
  if (rv == 0) { signalException(GLOO_ERROR_MSG("Connection closed by peer ", peer_.str())); }
  GLOO_ENFORCE_EQ(op.nbytes, nbytes, "Expected ", nbytes, " bytes, got ", op.nbytes);
  TORCH_CHECK(ok, "wait timeout after ", ms, "ms, keys: ", keys);
  GLOO_ENFORCE(ready);
}
'''
    got = {t.text: t for t in clike_templates(src, "gloo/transport/tcp/pair.cc")}
    assert set(got) == {"Connection closed by peer {peer_.str()}", "Expected {nbytes} bytes, got {op.nbytes}",
                        "wait timeout after {ms}ms, keys: {keys}"}
    assert all(t.kind == "throw" and t.function == "handleRead" for t in got.values())
    import re
    pattern = re.compile(typed_regex(got["Connection closed by peer {peer_.str()}"].parts))
    assert pattern.search("Connection closed by peer [127.0.0.1]:18596. This is typically caused by a remote worker")


def test_triton_status_streams_and_tensorrt_llm_checks() -> None:
    """Triton's error codes (the message the argument after ``Status::Code::…`` / ``TRITONSERVER_ERROR_…``, through
    ``std::string(…)``, brackets and ``.c_str()``), its ``LOG_ERROR << …`` streams and ``LOG_MESSAGE`` levels, and
    TensorRT-LLM's printf-style TLLM_CHECK_WITH_INFO / TLLM_THROW."""
    from qwen_triage.authoring.catalogue_build import kind_of
    from qwen_triage.authoring.msg_template import render
    from qwen_triage.authoring.msgs_clike import clike_templates

    src = r'''
Status ModelRepositoryManager::Poll() {
  return Status(
      Status::Code::INVALID_ARG, "must specify 'platform' or 'backend' for '" + config.name() + "'");
  Status status(Status::Code::INTERNAL, "Model repository location is not set");
  LOG_ERROR << "Failed to delete previously acquired location '" << location_ << "': " << status.AsString();
  LOG_INFO << "loading: " << name;
  return TRITONSERVER_ErrorNew(
      TRITONSERVER_ERROR_INTERNAL,
      (std::string("failed to allocate contiguous buffer for input '") + input_name + "'").c_str());
  RETURN_ERROR_IF_FALSE(
      false, TRITONSERVER_ERROR_INVALID_ARG, std::string("unexpected batch input kind '" + kind + "'"));
  LOG_MESSAGE(TRITONSERVER_LOG_WARN, (std::string("Failed to stub: ") + err.what()).c_str());
  LOG_MESSAGE(TRITONSERVER_LOG_INFO, "started");
  TLLM_CHECK_WITH_INFO(headSize == 128, "Unsupported head size %d for %s", headSize, name.c_str());
  TLLM_THROW("Unknown dtype %d", (int) dtype);
}
'''
    got = {t.text: t for t in clike_templates(src, "src/model_repository_manager.cc")}
    assert set(got) == {
        "must specify 'platform' or 'backend' for '{config.name()}'", "Model repository location is not set",
        "Failed to delete previously acquired location '{location_}': {status.AsString()}",
        "failed to allocate contiguous buffer for input '{input_name}'", "unexpected batch input kind '{kind}'",
        "Failed to stub: {err.what()}", "Unsupported head size %d for %s", "Unknown dtype %d"}
    assert all(t.function == "Poll" for t in got.values())
    kinds = {text: kind_of(t)[:2] for text, t in got.items()}
    assert kinds["Model repository location is not set"] == ("raise", None)
    assert kinds["Failed to delete previously acquired location '{location_}': {status.AsString()}"] == ("printf", "error")
    assert kinds["Failed to stub: {err.what()}"] == ("printf", "warning")
    assert render(got["Unknown dtype %d"]) == "[TensorRT-LLM][ERROR] Unknown dtype 4"
    assert render(got["Unsupported head size %d for %s"]).startswith(
        "[TensorRT-LLM][ERROR] Assertion failed: Unsupported head size 4 for ")
