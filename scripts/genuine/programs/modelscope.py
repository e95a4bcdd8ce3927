"""ModelScope's ``modelscope download`` with no way to its hub: a closed port, a server that accepts and never
answers, and (1.40+, whose ``MODELSCOPE_ENDPOINT`` takes a plain-http URL) a local stand-in that answers
404 / 500 the way the hub's API does. Older releases only speak https to ``MODELSCOPE_DOMAIN``, so they get the
cases that need no server answer.
"""

from dataclasses import replace

from case import Case, Program, Release

OLD, NEW = "1.20.1", "1.40.2"

FAKE = """\
import http.server, json, socket, sys
MODE = sys.argv[1]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        if MODE == "notfound":
            code, body = 404, dict(Code=10010205001, Message="Model not found or not accessible", Success=False,
                                   RequestId="0a1b2c3d-0000-4000-8000-000000000000")
        elif MODE == "unauthorized":
            code, body = 401, dict(Code=10010205002, Message="Unauthorized: please login with a valid token",
                                   Success=False, RequestId="0a1b2c3d-0000-4000-8000-000000000001")
        elif MODE in ("ok", "big") and "/repo?" in self.path:  # the file itself
            raw = b'{"model_type": "qwen2"}' if MODE == "ok" else bytes(4 << 20)
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            if self.command != "HEAD":
                for i in range(0, len(raw), 65536):
                    self.wfile.write(raw[i:i + 65536])
            return
        elif MODE in ("ok", "big"):  # other API calls (the acceleration info): an empty success
            code, body = 200, dict(Code=200, Data={}, Success=True)
        elif MODE == "ratelimit":
            code, body = 429, dict(Code=429, Message="Too many requests, please retry later", Success=False)
        else:
            code, body = 500, dict(Code=500, Message="internal server error", Success=False)
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_HEAD = do_GET


if MODE == "hang":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    open("port", "w").write(str(s.getsockname()[1]))
    conns = []
    while True:
        conns.append(s.accept()[0])
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open("port", "w").write(str(srv.server_address[1]))
srv.serve_forever()
"""

START = (
    "{python} fake.py %s >/dev/null 2>&1 & SRV=$!; "
    "for i in $(seq 100); do [ -s port ] && break; sleep 0.1; done; PORT=$(cat port); "
)
DOWNLOAD = "{bin}/modelscope download --model Qwen/Qwen2.5-0.5B-Instruct config.json"
ENV = {"MODELSCOPE_CACHE": "{work}/ms-cache"}


def _case(id: str, expect: list[str], note: str, *, mode: str | None = None, endpoint: str = "",
          releases: tuple[str, ...] | None = None, bound: int = 0) -> Case:
    run = f"timeout -s INT {bound} " if bound else ""
    if mode:
        cmd = START % mode + endpoint + " " + run + DOWNLOAD + "; rc=$?; kill $SRV; exit $rc"
    else:
        cmd = endpoint + " " + run + DOWNLOAD
    return Case(id=id, expect=expect, argv=["bash", "-c", cmd], files={"fake.py": FAKE}, env=dict(ENV),
                input="mixed", note=note, releases=releases, timeout=200)


CASES = [
    _case("connection-refused", ["download.incomplete"], "MODELSCOPE_DOMAIN is a closed local port",
          endpoint="MODELSCOPE_DOMAIN=127.0.0.1:9"),
    _case("read-timeout", ["download.incomplete"],
          "the endpoint accepts the connection and never answers; the user interrupts after 100 s",
          mode="hang", endpoint="MODELSCOPE_DOMAIN=127.0.0.1:$PORT", bound=100, releases=(NEW,)),
    # (1.20.1 sets no timeout on its API requests: against the same endpoint it waits silently until interrupted,
    # and its log holds only the KeyboardInterrupt traceback: nothing that names a failure, so no case)
    _case("model-not-found", ["config.bad_argument"], "the hub's API answers 404: no such model id",
          mode="notfound", endpoint="MODELSCOPE_ENDPOINT=http://127.0.0.1:$PORT", releases=(NEW,)),
    _case("server-error", ["download.incomplete"], "the hub's API answers 500 on every request",
          mode="servererror", endpoint="MODELSCOPE_ENDPOINT=http://127.0.0.1:$PORT", releases=(NEW,)),
    # --- more of what users hit (issue 26) --------------------------------------------------------------
    # ModelScope's own E3001 (authentication failed) files an account without access with the failed downloads
    _case("unauthorized", ["download.incomplete"], "the hub's API answers 401: a private model without a valid token",
          mode="unauthorized", endpoint="MODELSCOPE_ENDPOINT=http://127.0.0.1:$PORT", releases=(NEW,)),
    _case("rate-limited", ["download.incomplete"], "the hub's API answers 429 Too Many Requests",
          mode="ratelimit", endpoint="MODELSCOPE_ENDPOINT=http://127.0.0.1:$PORT", releases=(NEW,)),
]

# --- the Python API, offline use of the cache, the CLI's own arguments (issue 31) -------------------------
PYDL = """\
import sys
from modelscope import snapshot_download
from modelscope.hub.file_download import model_file_download
kind, repo = sys.argv[1], sys.argv[2]
if kind == "snapshot-local":
    print(snapshot_download(repo, local_files_only=True))
elif kind == "file-local":
    print(model_file_download(repo, "config.json", local_files_only=True))
else:
    print(snapshot_download(repo))
"""
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
# the cache as modelscope 1.40's hub client lays it out (models/<org>--<name>/refs + snapshots)
CACHED_NEW = {
    "ms-cache/models/Qwen--Qwen2.5-0.5B-Instruct/refs/master": "abc123",
    "ms-cache/models/Qwen--Qwen2.5-0.5B-Instruct/snapshots/abc123/config.json": '{"model_type": "qwen2"}\n',
}


def _py(id: str, expect: list[str], note: str, kind: str, *, endpoint: str = "MODELSCOPE_DOMAIN=127.0.0.1:9",
        releases: tuple[str, ...] | None = None, exit: str = "fail", files: dict | None = None) -> Case:
    return Case(id=id, expect=expect, argv=["bash", "-c", f"{endpoint} {{python}} dl.py {kind} {MODEL}"],
                files={"dl.py": PYDL, **(files or {})}, env=dict(ENV), input="mixed", note=note,
                releases=releases, timeout=200, exit=exit)


CASES += [
    _py("py-snapshot-local-only-not-cached", ["download.incomplete"],
        "snapshot_download(local_files_only=True) on a machine whose cache lacks the model; "
        "https://github.com/pengzhendong/pysilero/issues/19", "snapshot-local"),
    _py("py-file-local-only-not-cached", ["download.incomplete"],
        "model_file_download(local_files_only=True): the file is not in the cache; "
        "https://github.com/pengzhendong/pysilero/issues/19", "file-local"),
    _py("py-file-local-only-cached-healthy", [],
        "healthy: model_file_download(local_files_only=True) with the file in the cache (1.40 warns that it uses "
        "the cached revision)", "file-local", releases=(NEW,), exit="ok", files=CACHED_NEW),
    _py("py-snapshot-connection-refused", ["download.incomplete"],
        "snapshot_download from Python with MODELSCOPE_DOMAIN a closed local port; "
        "https://github.com/modelscope/ms-swift/issues/1616", "snapshot"),
    Case(id="cli-unrecognized-argument", expect=["config.bad_argument"],
         argv=["bash", "-c", "MODELSCOPE_DOMAIN=127.0.0.1:9 {bin}/modelscope download --model " + MODEL +
               " --revison v1.0 config.json"],
         env=dict(ENV), input="mixed", timeout=120,
         note="modelscope download with a misspelt flag (--revison): argparse refuses it"),
]

CASES += [
    replace(_case("download-ok-healthy", [], "healthy: modelscope download of one file from a local stand-in for the "
                  "hub (its banner and progress bar)", mode="ok", endpoint="MODELSCOPE_ENDPOINT=http://127.0.0.1:$PORT",
                  releases=(NEW,)), exit="ok"),
]
_full = _case("disk-full", ["node.storage_error"],
              "the cache's filesystem is full (a 1 MiB tmpfs) while a 4 MiB file downloads; "
              "https://github.com/instructlab/instructlab/issues/2206",
              mode="big", endpoint="MODELSCOPE_ENDPOINT=http://127.0.0.1:$PORT", releases=(NEW,))
CASES.append(Case(id=_full.id, expect=_full.expect,
                  argv=["unshare", "-m", "bash", "-c",
                        "mkdir -p ms-cache && mount -t tmpfs -o size=1m tmpfs ms-cache || exit 1; " + _full.argv[2]],
                  files=_full.files, env=_full.env, input="mixed", note=_full.note, releases=_full.releases,
                  timeout=200))

# --- issue 26 (helper 3): a revision not in the cache, a cache that cannot be written -------------------------
PYDL3 = """\
import sys
from modelscope import snapshot_download
kind = sys.argv[1]
if kind == "rev-local":
    print(snapshot_download("%s", revision="v2.0.0", local_files_only=True))
else:
    print(snapshot_download("%s", local_files_only=True))
""" % (MODEL, MODEL)


def _py3(id: str, expect: list[str], note: str, kind: str, *, exit: str = "fail") -> Case:
    return Case(id=id, expect=expect, argv=["bash", "-c", f"MODELSCOPE_DOMAIN=127.0.0.1:9 {{python}} dl3.py {kind}"],
                files={"dl3.py": PYDL3, **CACHED_NEW}, env=dict(ENV), input="mixed", note=note, releases=(NEW,),
                timeout=200, exit=exit)


CASES += [
    _py3("py-revision-local-only-not-cached", ["download.incomplete"],
         "snapshot_download(revision='v2.0.0', local_files_only=True): the cache holds master only; "
         "https://github.com/modelscope/modelscope/issues/1107", "rev-local"),
    _py3("py-snapshot-local-only-cached-healthy", [],
         "healthy: snapshot_download(local_files_only=True) with the snapshot in the cache", "snap-local", exit="ok"),
]
_ro = _case("cache-read-only", ["node.storage_error"],
            "MODELSCOPE_CACHE on a read-only filesystem (a read-only mount of a shared cache) while a file downloads; "
            "https://github.com/modelscope/modelscope/issues/584",
            mode="ok", endpoint="MODELSCOPE_ENDPOINT=http://127.0.0.1:$PORT", releases=(NEW,))
CASES.append(replace(_ro, argv=["unshare", "-m", "bash", "-c",
                                "mkdir -p ms-cache && mount -t tmpfs -o size=8m,ro tmpfs ms-cache || exit 1; "
                                + _ro.argv[2]]))

PROGRAM = Program(
    name="modelscope",
    releases=[
        Release(label=OLD, requirements=[f"modelscope=={OLD}"]),
        Release(label=NEW, requirements=[f"modelscope=={NEW}"]),
    ],
    cases=CASES,
)
