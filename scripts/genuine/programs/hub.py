"""huggingface_hub's download tools (``huggingface-cli download`` / ``hf download``, ``hf_hub_download``) with no
way to the hub: offline mode with an empty cache, a closed port, a server that accepts and never answers, and a
tiny local stand-in for the hub (stdlib http.server, started by the case) that answers 401/403/404/500 with the
hub's error headers, or cuts a file short. Healthy cases: a file served from the cache in offline mode, and a
complete download from the local stand-in.
"""

from dataclasses import replace

from case import Case, Program, Release

REPO = "tiny-org/tiny-model"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

# A stand-in for the hub's resolve endpoint. MODE decides the answer; the port goes to ./port.
FAKEHUB = """\
import http.server, socket, sys, time
MODE = sys.argv[1]
BODY = b'{"model_type": "qwen2", "hidden_size": 64}' + b" " * 4000
BIG = bytes(4 << 20)
COMMIT = "%s"


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _err(self, code, error_code, message):
        self.send_response(code)
        self.send_header("X-Error-Code", error_code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        body = ('{"error": "%%s"}' %% message).encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _ok_headers(self, size):
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", '"5d41402abc4b2a76b9719d911017c592"')
        self.send_header("Content-Length", str(size))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_HEAD(self):
        self.handle_any(head=True)

    def do_GET(self):
        self.handle_any(head=False)

    def handle_any(self, head):
        if MODE == "gated":
            return self._err(403, "GatedRepo", "Access to model tiny-org/tiny-model is restricted and you are not in"
                             " the authorized list. Visit https://huggingface.co/tiny-org/tiny-model to ask for access.")
        if MODE == "unauthorized":
            return self._err(401, "RepoNotFound", "Invalid username or password.")
        if MODE == "notfound":
            return self._err(404, "RepoNotFound", "Repository not found")
        if MODE == "entrynotfound":
            return self._err(404, "EntryNotFound", "Entry not found")
        if MODE == "forbidden":  # a token without read access to a private repo of an organisation
            return self._err(403, "", "Forbidden: you don't have permission to access this repository.")
        if MODE == "revisionnotfound":
            return self._err(404, "RevisionNotFound", "Invalid rev id: v9.9")
        if MODE == "ratelimit":
            return self._err(429, "", "You have exceeded our hourly quotas for action: resolve. We invite you to"
                             " retry later.")
        if MODE == "unavailable":
            return self._err(503, "", "Service Unavailable")
        if MODE == "servererror":
            return self._err(500, "", "Internal Error - We're working hard to fix this as soon as possible!")
        if MODE == "badtoken":  # a token the hub does not know (revoked, or copied with a typo)
            return self._err(401, "", "Invalid credentials in Authorization header")
        if MODE == "okapi" and self.path.startswith("/api/models/"):  # model info / tree for snapshot_download
            if "/tree/" in self.path:
                info = ('[{"type": "file", "oid": "5d41402abc4b2a76b9719d911017c592", "size": %%d, '
                        '"path": "config.json"}]' %% len(BODY)).encode()
            else:
                # private / downloads / likes / tags: the hub always sends them, and 0.20's ModelInfo requires them
                info = ('{"id": "tiny-org/tiny-model", "sha": "%%s", "private": false, "downloads": 0, "likes": 0, '
                        '"tags": [], "siblings": [{"rfilename": "config.json"}]}' %% COMMIT).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(info)))
            self.end_headers()
            if not head:
                self.wfile.write(info)
            return
        if MODE == "big":  # a 4 MiB weights file
            self._ok_headers(len(BIG))
            if not head:
                for i in range(0, len(BIG), 65536):
                    self.wfile.write(BIG[i:i + 65536])
            return
        if head or MODE in ("ok", "okapi"):
            self._ok_headers(len(BODY))
            if not head:
                self.wfile.write(BODY)
            return
        if MODE == "short":  # a complete response that is smaller than the HEAD said
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(BODY[:1000])
            return
        if MODE == "cut":  # the connection drops half way
            self._ok_headers(len(BODY))
            self.wfile.write(BODY[:1000])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True


if MODE == "hang":  # accepts connections and never answers
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    open("port", "w").write(str(s.getsockname()[1]))
    conns = []
    while True:
        c, _ = s.accept()
        conns.append(c)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open("port", "w").write(str(srv.server_address[1]))
srv.serve_forever()
""" % COMMIT

CLI = 'if [ -x {bin}/hf ]; then HFCLI="{bin}/hf"; else HFCLI="{bin}/huggingface-cli"; fi; '
WITH_SERVER = (
    "{python} fakehub.py %s >/dev/null 2>&1 & SRV=$!; "
    "for i in $(seq 100); do [ -s port ] && break; sleep 0.1; done; "
    "export HF_ENDPOINT=http://127.0.0.1:$(cat port); "
)
STOP = "; rc=$?; kill $SRV; exit $rc"

BASE_ENV = {"HF_HOME": "{work}/hf-home", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "3",
            "HF_HUB_DOWNLOAD_TIMEOUT": "3", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}

PYDL = """\
import sys
from huggingface_hub import hf_hub_download, snapshot_download
if len(sys.argv) > 1 and sys.argv[1] == "snapshot":
    path = snapshot_download("%s")
elif len(sys.argv) > 1:
    path = hf_hub_download("%s", "config.json", revision=sys.argv[1])
else:
    path = hf_hub_download("%s", "config.json")
print(path)
""" % (REPO, REPO, REPO)

# A hub cache laid out as huggingface_hub writes it, for the healthy offline case.
CACHED = {
    "hf-home/hub/models--tiny-org--tiny-model/refs/main": COMMIT,
    f"hf-home/hub/models--tiny-org--tiny-model/snapshots/{COMMIT}/config.json": '{"model_type": "qwen2"}\n',
}


def _cli(id: str, expect: list[str], mode: str | None, note: str, env: dict | None = None, exit: str = "fail",
         files: dict | None = None, what: str = "config.json", bound: int = 0) -> Case:
    # bound: the user gives up after that many seconds (SIGINT, as Ctrl-C would)
    run = f"timeout -s INT {bound} " if bound else ""
    cmd = CLI + (WITH_SERVER % mode if mode else "") + run + f'"$HFCLI" download {REPO} {what}' + (STOP if mode else "")
    return Case(id=id, expect=expect, argv=["bash", "-c", cmd], files={"fakehub.py": FAKEHUB, **(files or {})},
                env={**BASE_ENV, **(env or {})}, input="mixed", note=note, exit=exit, timeout=150)


def _py(id: str, expect: list[str], mode: str | None, note: str, env: dict | None = None, exit: str = "fail",
        bound: int = 0, arg: str = "", files: dict | None = None) -> Case:
    run = f"timeout -s INT {bound} " if bound else ""
    cmd = (WITH_SERVER % mode if mode else "") + run + "{python} download.py" + (f" {arg}" if arg else "")
    cmd += STOP if mode else ""
    return Case(id=id, expect=expect, argv=["bash", "-c", cmd],
                files={"fakehub.py": FAKEHUB, "download.py": PYDL, **(files or {})},
                env={**BASE_ENV, **(env or {})}, input="mixed", note=note, exit=exit, timeout=150)


CASES = [
    _cli("cli-cached-offline-healthy", [], None, "healthy: offline mode, the file is in the cache",
         env={"HF_HUB_OFFLINE": "1"}, exit="ok", files=CACHED),
    _cli("cli-download-ok-healthy", [], "ok", "healthy: a complete download from a local stand-in for the hub",
         exit="ok"),
    _cli("cli-offline-not-cached", ["download.incomplete"], None, "HF_HUB_OFFLINE=1 and nothing in the cache",
         env={"HF_HUB_OFFLINE": "1"}),
    _py("py-offline-not-cached", ["download.incomplete"], None, "hf_hub_download, HF_HUB_OFFLINE=1, empty cache",
        env={"HF_HUB_OFFLINE": "1"}),
    _cli("cli-connection-refused", ["download.incomplete"], None, "HF_ENDPOINT is a closed local port",
         env={"HF_ENDPOINT": "http://127.0.0.1:9"}),
    _py("py-connection-refused", ["download.incomplete"], None, "hf_hub_download against a closed local port",
        env={"HF_ENDPOINT": "http://127.0.0.1:9"}),
    _cli("cli-read-timeout", ["download.incomplete"], "hang",
         "the endpoint accepts the connection and never answers (3 s timeouts); the user interrupts after 100 s",
         bound=100),
    _py("py-read-timeout", ["download.incomplete"], "hang",
        "hf_hub_download against an endpoint that accepts and never answers (3 s timeouts); interrupted after 100 s",
        bound=100),
    _cli("cli-gated", ["download.incomplete"], "gated", "403 GatedRepo: the account has not been granted access"),
    _cli("cli-unauthorized", ["config.bad_argument"], "unauthorized",
         "401 with RepoNotFound: a private or misspelt repo id without a valid token"),
    _py("py-repo-not-found", ["config.bad_argument"], "notfound", "404 RepoNotFound: the repo id does not exist"),
    _cli("cli-entry-not-found", ["config.bad_argument"], "entrynotfound",
         "404 EntryNotFound: the file name is not in the repo"),
    _cli("cli-server-error", ["download.incomplete"], "servererror", "the hub answers 500 on every request"),
    _py("py-size-mismatch", ["download.incomplete"], "short",
        "the file arrives smaller than the hub announced (consistency check)"),
    _cli("cli-connection-cut", ["download.incomplete"], "cut", "the connection drops half way through the file"),
    # --- more answers of the hub (issue 26) -------------------------------------------------------------
    _py("py-cached-offline-healthy", [], None, "healthy: hf_hub_download in offline mode, the file is in the cache",
        env={"HF_HUB_OFFLINE": "1"}, exit="ok", files=CACHED),
    _py("py-download-ok-healthy", [], "ok", "healthy: hf_hub_download of one file from a local stand-in", exit="ok"),
    _py("py-gated", ["download.incomplete"], "gated", "hf_hub_download, 403 GatedRepo: access not granted"),
    _py("py-unauthorized", ["config.bad_argument"], "unauthorized",
        "hf_hub_download, 401: a private or misspelt repo id without a valid token"),
    _py("py-entry-not-found", ["config.bad_argument"], "entrynotfound",
        "hf_hub_download, 404 EntryNotFound: the file is not in the repo"),
    _py("py-revision-not-found", ["config.bad_argument"], "revisionnotfound",
        "hf_hub_download with a revision (tag) the repo does not have: 404 RevisionNotFound", arg="v9.9"),
    _cli("cli-revision-not-found", ["config.bad_argument"], "revisionnotfound",
         "hf download --revision of a tag the repo does not have: 404 RevisionNotFound",
         what="config.json --revision v9.9"),
    _py("py-forbidden", ["download.incomplete"], "forbidden",
        "403 without the gated code: the token has no read access to the organisation's repo"),
    _cli("cli-rate-limited", ["download.incomplete"], "ratelimit", "429: the hub's rate limit for resolve calls"),
    _py("py-rate-limited", ["download.incomplete"], "ratelimit", "hf_hub_download answered 429 Too Many Requests"),
    _py("py-service-unavailable", ["download.incomplete"], "unavailable", "the hub answers 503 on every request"),
    _py("py-server-error", ["download.incomplete"], "servererror", "hf_hub_download, the hub answers 500"),
    _py("py-snapshot-connection-refused", ["download.incomplete"], None,
        "snapshot_download against a closed local port", env={"HF_ENDPOINT": "http://127.0.0.1:9"}, arg="snapshot"),
]

# --- snapshots, tokens, the cache's disk and locks (issue 31) -------------------------------------------
DL = """\
import sys
from huggingface_hub import hf_hub_download, snapshot_download
kind, repo = sys.argv[1], sys.argv[2]
print(snapshot_download(repo) if kind == "snapshot" else hf_hub_download(repo, "config.json"))
"""

# another process (a download killed half way, a second job on the same cache) holds the file's lock
HOLD_LOCK = """\
import os, sys, time
from filelock import FileLock
path = "hf-home/hub/.locks/models--tiny-org--tiny-model/5d41402abc4b2a76b9719d911017c592.lock"
os.makedirs(os.path.dirname(path), exist_ok=True)
lock = FileLock(path)
lock.acquire()
open("locked", "w").write("1")
time.sleep(600)
"""


def _dl(id: str, expect: list[str], mode: str | None, note: str, *, kind: str = "file", repo: str = REPO,
        env: dict | None = None, exit: str = "fail", pre: str = "", bound: int = 0, wrap: str = "",
        expect_by: dict | None = None) -> Case:
    run = f"timeout -s INT {bound} " if bound else ""
    cmd = pre + (WITH_SERVER % mode if mode else "") + run + f"{{python}} dl.py {kind} {repo}" + (STOP if mode else "")
    if wrap:
        cmd = wrap % cmd.replace("'", "'\\''")
    return Case(id=id, expect=expect, argv=["bash", "-c", cmd],
                files={"fakehub.py": FAKEHUB, "dl.py": DL, "hold_lock.py": HOLD_LOCK},
                env={**BASE_ENV, **(env or {})}, input="mixed", note=note, exit=exit, timeout=150,
                expect_by=expect_by or {})


CASES += [
    _dl("py-snapshot-ok-healthy", [], "okapi", "healthy: snapshot_download of a one-file repo from a local stand-in",
        kind="snapshot", exit="ok"),
    _dl("py-snapshot-offline-not-cached", ["download.incomplete"], None,
        "snapshot_download with HF_HUB_OFFLINE=1 and no snapshot in the cache; "
        "https://github.com/huggingface/huggingface_hub/issues/4487", kind="snapshot", env={"HF_HUB_OFFLINE": "1"}),
    _dl("py-snapshot-gated", ["download.incomplete"], "gated",
        "snapshot_download of a gated repo, access not granted: the model-info call answers 403 GatedRepo; "
        "https://github.com/matatonic/openedai-vision/issues/25",
        kind="snapshot"),
    _dl("py-repo-id-is-local-path", ["config.bad_argument"], None,
        "a local checkpoint path that does not exist passed as the repo id: HFValidationError; "
        "https://github.com/huggingface/huggingface_hub/issues/1008",
        repo="./checkpoints/qwen-sft/final"),
    _dl("py-token-invalid", ["config.bad_argument"], "badtoken",
        "HF_TOKEN holds a revoked or mistyped token: 401 Invalid credentials in Authorization header; "
        "https://github.com/huggingface/sentence-transformers/issues/3436",
        env={"HF_TOKEN": "hf_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}),
    _dl("py-hf-transfer-missing", ["config.bad_argument"], "ok",
        "HF_HUB_ENABLE_HF_TRANSFER=1 without the hf_transfer package (0.x refuses; 1.x+ ignores the variable with "
        "a deprecation warning and downloads); https://github.com/EleutherAI/lm-evaluation-harness/pull/3563",
        env={"HF_HUB_ENABLE_HF_TRANSFER": "1"}, exit="any", expect_by={"2.4.0": []}),
    _dl("py-disk-full", ["node.storage_error"], "big",
        "the cache's filesystem is full (a 1 MiB tmpfs) while a 4 MiB file downloads: Errno 28; "
        "https://github.com/huggingface/diffusers/issues/4957",
        repo=REPO, wrap="unshare -m bash -c 'mkdir -p hf-home && mount -t tmpfs -o size=1m tmpfs hf-home && %s'"),
    _dl("py-cache-lock-held", ["download.incomplete"], "ok",
        "another process holds the file's lock in the cache (a killed download, a second job): hf_hub_download "
        "waits on it, logging at info level (0.20 logs nothing: only its trace stops in `with FileLock(lock_path)`), "
        "until the user interrupts after 25 s; "
        "https://github.com/huggingface/huggingface_hub/issues/2543",
        env={"HF_HUB_VERBOSITY": "info"}, bound=25,
        pre="{python} hold_lock.py & HOLD=$!; for i in $(seq 100); do [ -s locked ] && break; sleep 0.1; done; "),
]

_cli_full = _cli("cli-disk-full", ["node.storage_error"], "big",
                 "hf download into a cache whose filesystem is full (a 1 MiB tmpfs) while a 4 MiB file downloads; "
                 "https://github.com/huggingface/diffusers/issues/4957")
CASES.append(replace(_cli_full, argv=["unshare", "-m", "bash", "-c",
                                      "mkdir -p hf-home && mount -t tmpfs -o size=1m tmpfs hf-home || exit 1; "
                                      + _cli_full.argv[2]]))

CASES += [
    _cli("cli-token-invalid", ["config.bad_argument"], "badtoken",
         "hf download with a revoked or mistyped HF_TOKEN: 401 Invalid credentials in Authorization header; "
         "https://github.com/huggingface/sentence-transformers/issues/3436",
         env={"HF_TOKEN": "hf_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}),
]

# --- offline revisions, local_files_only, a read-only or size-limited cache, a stale partial blob (issue 26, helper 3)
DL3 = """\
import sys
from huggingface_hub import hf_hub_download, snapshot_download
kind = sys.argv[1]
if kind == "file-rev":
    print(hf_hub_download("%s", "config.json", revision="v2.0"))
elif kind == "snapshot-rev":
    print(snapshot_download("%s", revision="v2.0"))
elif kind == "local-only":
    print(hf_hub_download("%s", "tokenizer.json", local_files_only=True))
elif kind == "file":
    print(hf_hub_download("%s", "config.json"))
else:
    print(snapshot_download("%s"))
""" % (REPO, REPO, REPO, REPO, REPO)

STALE = "hf-home/hub/models--tiny-org--tiny-model/blobs/5d41402abc4b2a76b9719d911017c592.incomplete"


def _dl3(id: str, expect: list[str], mode: str | None, note: str, kind: str, *, env: dict | None = None,
         exit: str = "fail", files: dict | None = None, wrap: str = "", expect_by: dict | None = None) -> Case:
    cmd = (WITH_SERVER % mode if mode else "") + f"{{python}} dl3.py {kind}" + (STOP if mode else "")
    if wrap:
        cmd = wrap % cmd.replace("'", "'\\''")
    return Case(id=id, expect=expect, argv=["bash", "-c", cmd],
                files={"fakehub.py": FAKEHUB, "dl3.py": DL3, **(files or {})},
                env={**BASE_ENV, **(env or {})}, input="mixed", note=note, exit=exit, timeout=150,
                expect_by=expect_by or {})


CASES += [
    _dl3("py-offline-revision-not-cached", ["download.incomplete"], None,
         "HF_HUB_OFFLINE=1, the cache holds main but the script pins revision v2.0, never fetched on this node; "
         "https://github.com/huggingface/huggingface_hub/issues/1651",
         "file-rev", env={"HF_HUB_OFFLINE": "1"}, files=CACHED),
    _dl3("py-snapshot-offline-revision-not-cached", ["download.incomplete"], None,
         "snapshot_download(revision='v2.0') offline while only main is cached; "
         "https://github.com/huggingface/huggingface_hub/issues/2235",
         "snapshot-rev", env={"HF_HUB_OFFLINE": "1"}, files=CACHED),
    _dl3("py-local-files-only-file-missing", ["download.incomplete"], None,
         "hf_hub_download(local_files_only=True) of tokenizer.json: the snapshot in the cache has config.json only "
         "(a partial copy of the cache to an offline node); https://github.com/huggingface/transformers/issues/30345",
         "local-only", env={"HF_ENDPOINT": "http://127.0.0.1:9"}, files=CACHED),
    _dl3("py-snapshot-offline-cached-healthy", [], None,
         "healthy: snapshot_download in offline mode with the snapshot in the cache", "snapshot",
         env={"HF_HUB_OFFLINE": "1"}, files=CACHED, exit="ok"),
    _dl3("py-cache-read-only", ["node.storage_error"], "big",
         "HF_HOME on a read-only filesystem (a read-only volume mount of a shared cache): Errno 30; "
         "https://github.com/huggingface/huggingface_hub/issues/1216",
         "file", wrap="unshare -m bash -c 'mkdir -p hf-home && mount -t tmpfs -o size=8m,ro tmpfs hf-home && %s'"),
    _dl3("py-file-size-limit", ["node.storage_error"], "big",
         "a 4 MiB download under a 1 MiB file-size limit (ulimit -f, as a batch scheduler's quota sets it): Errno 27 "
         "File too large; https://github.com/huggingface/huggingface_hub/issues/2017",
         "file", wrap="bash -c 'ulimit -f 1024; %s'"),
    _dl3("py-stale-incomplete-blob", ["download.incomplete"], "ok",
         "a stale .incomplete blob from a killed download and a server (a proxy) that ignores the Range header: "
         "0.26 appends the whole file to the partial one and fails its consistency check, 2.x starts over, and "
         "0.20 (resume_download=False by default: a fresh temporary file) never reads the stale blob; "
         "https://github.com/huggingface/huggingface_hub/issues/1498",
         "file", files={STALE: "x" * 1500}, exit="any", expect_by={"0.20.3": [], "2.4.0": []}),
]

_cli_fsize = _cli("cli-file-size-limit", ["node.storage_error"], "big",
                  "hf download of a 4 MiB file under a 1 MiB file-size limit (ulimit -f, a batch scheduler's limit): "
                  "Errno 27 File too large; https://github.com/huggingface/huggingface_hub/issues/2017")
CASES.append(replace(_cli_fsize, argv=["bash", "-c", "ulimit -f 1024; " + _cli_fsize.argv[2]]))

PROGRAM = Program(
    name="hub",
    releases=[
        Release(label="0.20.3", requirements=["huggingface_hub==0.20.3"]),
        Release(label="0.26.5", requirements=["huggingface_hub==0.26.5"]),
        Release(label="2.4.0", requirements=["huggingface_hub==2.4.0"]),
    ],
    cases=CASES,
)
