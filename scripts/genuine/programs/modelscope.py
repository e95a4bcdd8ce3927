"""ModelScope's ``modelscope download`` with no way to its hub: a closed port, a server that accepts and never
answers, and (1.40+, whose ``MODELSCOPE_ENDPOINT`` takes a plain-http URL) a local stand-in that answers
404 / 500 the way the hub's API does. Older releases only speak https to ``MODELSCOPE_DOMAIN``, so they get the
cases that need no server answer.
"""

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

PROGRAM = Program(
    name="modelscope",
    releases=[
        Release(label=OLD, requirements=[f"modelscope=={OLD}"]),
        Release(label=NEW, requirements=[f"modelscope=={NEW}"]),
    ],
    cases=CASES,
)
