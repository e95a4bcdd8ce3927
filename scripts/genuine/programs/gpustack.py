"""GPUStack (``pip install gpustack``, the GPU-cluster manager that schedules models onto vLLM / SGLang / llama-box
workers) as users drive it from pip on a host with no GPU and no docker daemon: ``gpustack start`` as a server and as
a worker (``--server-url``), with flags and config-file values its Config refuses, a server whose database nothing
serves, a server whose API port another socket holds, a server on a host with no IPv4 address but loopback, and a
worker on an offline host (it downloads its tools before it registers, so a worker pointed at a closed port stops
there). Healthy: ``gpustack version``, ``--help``, ``start --help``, a server that comes up on a throw-away
PostgreSQL, answers /healthz and is stopped.

What ``gpustack start`` is on this machine (2.3.0): the server keeps its state in PostgreSQL or MySQL only (no SQLite
since 2.0); without ``--database-url`` it connects to 127.0.0.1:5432, where the docker image's s6 services start an
embedded PostgreSQL and a pip install starts none. Its gateway mode ``auto`` means the embedded Higress gateway
(again a service of the image), whose kubeconfig the server loads before anything else and does not find (the case
server-embedded-gateway-missing); ``--gateway-mode disabled``
serves the API itself, on 0.0.0.0 (hard-coded, with the metrics exporter on 0.0.0.0:10161). The cases that start a
server or a worker therefore run inside ``unshare -n`` (a network namespace of their own: loopback and one veth end
with 10.0.0.2, since GPUStack looks for a non-loopback IPv4 address to advertise): what binds 0.0.0.0 there is
reachable from nowhere else, and the fixed ports clash with no other run. The throw-away
PostgreSQL 15 (this machine's /usr/lib/postgresql/15, run as the ``postgres`` user, which initdb requires) is
started by the case's ``pg.sh`` on 127.0.0.1 inside that namespace and dies with the case. Nothing is downloaded:
HF_HUB_OFFLINE=1, and the server's refresh of its OTA index fails on the unresolvable name, a warning.
"""

from case import OFFLINE_ENV, PORT_HOLDER, Case, Program, Release

OLD = "0.7.1"
NEW = "2.3.0"

ENV = dict(OFFLINE_ENV)

# a throw-away PostgreSQL on 127.0.0.1:$1 with its files in $2/pg, database and user "gpustack" (trust auth)
PG = """\
# Starts a throw-away PostgreSQL 15 for GPUStack on 127.0.0.1:$1, files in $2/pg (as the postgres user: initdb
# refuses root); its output goes to files, not to the case's log.
P=$1; W=$2; B=/usr/lib/postgresql/15/bin
chmod 755 "$W"; mkdir -p "$W/pg"; chown postgres "$W/pg"
runuser -u postgres -- $B/initdb -D "$W/pg/data" -A trust -U gpustack >"$W/pg/initdb.log" 2>&1 || { cat "$W/pg/initdb.log"; exit 98; }
runuser -u postgres -- $B/postgres -D "$W/pg/data" -h 127.0.0.1 -p "$P" -k "$W/pg" >"$W/pg/postgres.log" 2>&1 &
for i in $(seq 120); do $B/pg_isready -q -h 127.0.0.1 -p "$P" && break; sleep 0.5; done
$B/createdb -h 127.0.0.1 -p "$P" -U gpustack gpustack || { cat "$W/pg/postgres.log"; exit 98; }
"""

DB = "--database-url 'postgresql://gpustack@127.0.0.1:{port2}/gpustack?sslmode=disable'"
DATA = "--data-dir {work}/data"


# inside the case's network namespace: loopback up, and one veth end with 10.0.0.2 (GPUStack looks for a non-loopback
# IPv4 address to advertise, and stops without one: the case server-no-ipv4-address keeps that)
NETNS = ("ip link set lo up && ip link add gs0 type veth peer name gs1 && ip addr add 10.0.0.2/24 dev gs0 && "
         "ip link set gs0 up && ")


def _cli(id: str, expect: list[str], note: str, cmd: str, *, exit: str = "fail", timeout: float = 240,
         files: dict | None = None, netns: bool = False, pg: bool = False, netns_lo: bool = False,
         releases: tuple[str, ...] = (NEW,)) -> Case:
    """One shell line running ``gpustack ...``; with ``netns`` inside a network namespace of its own (loopback and
    the veth end up), with ``netns_lo`` in one with loopback only, with ``pg`` after the throw-away PostgreSQL is up on
    {port2}."""
    line = cmd
    if pg:
        line = "bash pg.sh {port2} {work} || exit 98; " + line
    if netns:
        line = NETNS + line
    if netns_lo:
        line = "ip link set lo up && " + line
    written = {**({"pg.sh": PG} if pg else {}), **(files or {})}
    argv = (["unshare", "-n", "bash", "-c", line] if netns or netns_lo else ["bash", "-c", line])
    return Case(id=id, expect=expect, argv=argv, files=written, env=dict(ENV), input="mixed", note=note,
                timeout=timeout, exit=exit, releases=releases)


SERVE = "{bin}/gpustack start " + DATA + " --gateway-mode disabled "

# wait for the API (30080 with the gateway disabled) to answer /healthz, then stop the server with SIGINT. GPUStack's
# handler (utils/process.py handle_termination_signal) ends by killing its own process tree, itself with SIGKILL, and
# bash would add its job notice "line 1: PID Killed ..." to the log: the shell's words, not GPUStack's, so kept out
def serve_until_healthy(start: str, port: int) -> str:
    """Run ``start`` in the background until 127.0.0.1:``port``/healthz answers (or it dies), then stop it with
    SIGINT; exit 0 only if it answered."""
    return ("{ " + start + " & } ; SRV=$!; rc=1; for i in $(seq 240); do "
            f"curl -sf http://127.0.0.1:{port}/healthz && {{ rc=0; break; }}; kill -0 $SRV 2>/dev/null || break; "
            "sleep 1; done; echo; kill -INT $SRV; { wait $SRV; } 2>/dev/null; exit $rc")


HEALTHY = serve_until_healthy(SERVE + DB, 30080)

CASES = [
    # --- healthy --------------------------------------------------------------------------------------------------
    _cli("version-healthy", [], "healthy: gpustack version", "exec {bin}/gpustack version", exit="ok",
         releases=(OLD, NEW)),
    _cli("help-healthy", [], "healthy: gpustack --help (the sub-commands)", "exec {bin}/gpustack --help", exit="ok",
         releases=(OLD, NEW)),
    _cli("start-help-healthy", [], "healthy: gpustack start --help (every server and worker flag)",
         "exec {bin}/gpustack start --help", exit="ok"),
    _cli("server-healthy", [], "healthy: a server on a throw-away PostgreSQL (--database-url), gateway disabled: it "
         "migrates the database, answers /healthz and is stopped with SIGINT (its OTA index refresh fails offline, a "
         "warning)", HEALTHY, netns=True, pg=True, timeout=360, exit="ok"),
    # --- the server's database -----------------------------------------------------------------------------------------
    _cli("server-no-database", ["dist.rendezvous_failed"],
         "a pip-installed server started without --database-url: it connects to the embedded PostgreSQL on "
         "127.0.0.1:5432 that only the docker image starts, and the migration fails on a refused connection",
         "exec " + SERVE, netns=True),
    # gateway mode auto (the default) outside the image and outside Kubernetes: the embedded Higress gateway, whose
    # kubeconfig (DATA_DIR/higress/kubeconfig) only the image's s6 services write
    _cli("server-embedded-gateway-missing", ["config.bad_argument"],
         "a pip-installed server started with the defaults (gateway mode auto, i.e. the embedded Higress gateway that "
         "only the docker image runs): its kubeconfig is not there and the start stops on it (--gateway-mode disabled "
         "is the way)", "exec {bin}/gpustack start " + DATA + " " + DB, netns=True),
    _cli("database-url-sqlite", ["config.bad_argument"],
         "--database-url sqlite:///... (what 0.x used): 2.x supports only postgresql:// and mysql://",
         "exec " + SERVE + "--database-url sqlite:///{work}/data/database.db"),
    _cli("server-no-ipv4-address", ["config.bad_argument"],
         "a server on a host (a container started with --network none) whose only IPv4 address is loopback, no "
         "--advertise-address: it migrates, then finds no address to advertise and stops",
         "exec " + SERVE + DB, netns_lo=True, pg=True, timeout=360),
    # --- ports -------------------------------------------------------------------------------------------------------
    _cli("server-port-in-use", ["server.port_in_use"],
         "a server whose API port (--api-port, gateway disabled) another socket holds: it migrates, then the bind fails",
         "exec {python} hold.py {port} " + SERVE + DB + " --api-port {port}", files={"hold.py": PORT_HOLDER},
         netns=True, pg=True, timeout=360),
    _cli("port-not-integer", ["config.bad_argument"], "--port http (the flag takes an integer)",
         "exec " + SERVE + "--port http"),
    _cli("service-port-range-reversed", ["config.bad_argument"],
         "--service-port-range 41000-40000 (the low end first)",
         "exec " + SERVE + "--service-port-range 41000-40000"),
    # --- config file ---------------------------------------------------------------------------------------------------
    _cli("config-file-bad-value", ["config.bad_argument"],
         "a --config-file whose gateway_mode is not one of auto/embedded/incluster/external/disabled",
         "exec {bin}/gpustack start " + DATA + " --config-file {work}/config.yaml",
         files={"config.yaml": "port: 8080\ngateway_mode: nginx\ndebug: false\n"}),
    _cli("config-file-missing", ["config.bad_argument"], "--config-file naming a file that is not there",
         "exec {bin}/gpustack start " + DATA + " --config-file /etc/gpustack/config.yaml"),
    # --- data directory ------------------------------------------------------------------------------------------------
    _cli("data-dir-not-a-directory", ["config.bad_argument"],
         "--data-dir below a regular file (the data dir cannot be created, nothing can be written there)",
         "echo not a directory > {work}/gpustack; exec " + SERVE.replace(DATA, "--data-dir {work}/gpustack/data")),
    # --- the worker ----------------------------------------------------------------------------------------------------
    _cli("worker-no-token", ["config.bad_argument"], "a worker (--server-url) started without --token",
         "exec {bin}/gpustack start " + DATA + " --server-url http://127.0.0.1:{port}"),
    _cli("worker-server-url-invalid", ["config.bad_argument"],
         "--server-url without its scheme (127.0.0.1:PORT): the Config refuses it as a URL",
         "exec {bin}/gpustack start " + DATA + " --server-url 127.0.0.1:{port} --token abc"),
    # a worker first fetches its tools (gguf-parser) from github.com or GPUStack's mirror (worker/tools_manager.py),
    # before it registers: on an offline host it stops there, so a worker pointed at a closed port never gets as far
    # as its registration retries ("Failed to register worker: ...") here
    _cli("worker-offline-tools", ["download.incomplete"],
         "a worker (--server-url http://127.0.0.1:PORT, nothing listening, --token given) on an offline host: it must "
         "download its dependency tools from the internet first and cannot reach any mirror",
         "exec {bin}/gpustack start " + DATA + " --server-url http://127.0.0.1:{port} --token abc", netns=True,
         timeout=240),
]

# --- 0.7.1 (mid 2025: the last 0.x, what most reports of that year ran) ----------------------------------------------
# One process is server and worker unless --disable-worker; the database is an SQLite file in the data dir unless
# --database-url; the API listens on 0.0.0.0:80 (--port); the worker first downloads llama-box and gguf-parser.
# "Config error: …" is printed and the command exits 0 (0.x's cmd/start.py catches the Config exception and returns),
# so those cases take any exit status.
V07 = "{bin}/gpustack start --data-dir {work}/data "

V07_HEALTHY = serve_until_healthy(V07 + "--disable-worker --port 8080", 8080)


def _v07(id: str, expect: list[str], note: str, cmd: str, **kw) -> Case:
    return _cli("v07-" + id, expect, note, cmd, releases=(OLD,), **kw)


CASES += [
    _v07("server-healthy", [], "healthy: a 0.7 server alone (--disable-worker) on its SQLite file, migrated, answering "
         "/healthz on --port 8080, stopped with SIGINT (uvicorn's lifespan task is cancelled with a traceback)",
         V07_HEALTHY, netns=True, exit="ok"),
    _v07("server-worker-offline-tools", ["download.incomplete"],
         "gpustack start with its defaults (server and worker in one) on an offline host: the server serves, the "
         "worker must download llama-box from github.com or GPUStack's mirror and dies; the server stays up (killed)",
         "exec " + V07, netns=True, exit="timeout", timeout=60),
    _v07("worker-no-token", ["config.bad_argument"], "a worker (--server-url) started without --token",
         "exec " + V07 + "--server-url http://127.0.0.1:{port}", exit="any"),
    _v07("worker-server-url-invalid", ["config.bad_argument"], "--server-url 127.0.0.1:PORT (no scheme)",
         "exec " + V07 + "--server-url 127.0.0.1:{port} --token abc", exit="any"),
    _v07("database-scheme-unsupported", ["config.bad_argument"],
         "--database-url mongodb://… (0.x takes sqlite, postgresql and mysql)",
         "exec " + V07 + "--disable-worker --database-url mongodb://localhost/gpustack", exit="any"),
    _v07("database-unreachable", ["dist.rendezvous_failed"],
         "--database-url postgresql://…@127.0.0.1:PORT where no PostgreSQL listens: the migration fails",
         "exec " + V07 + "--disable-worker --database-url postgresql://gpustack@127.0.0.1:{port}/gpustack",
         netns=True, exit="any"),
    _v07("service-port-range-reversed", ["config.bad_argument"], "--service-port-range 41000-40000",
         "exec " + V07 + "--service-port-range 41000-40000", exit="any"),
    _v07("port-not-integer", ["config.bad_argument"], "--port http (argparse wants an integer)",
         "exec " + V07 + "--port http"),
    _v07("config-file-unknown-key", ["config.bad_argument"],
         "a --config-file with a key 0.7's Config does not have (pydantic forbids extra inputs)",
         "exec " + V07 + "--config-file {work}/config.yaml",
         files={"config.yaml": "port: 8080\ndisable_worker: true\nfoo_bar: 1\n"}, exit="any"),
    _v07("server-port-in-use", ["server.port_in_use"], "a server whose --port another socket holds",
         "exec {python} hold.py {port} " + V07 + "--disable-worker --port {port}", files={"hold.py": PORT_HOLDER},
         netns=True, exit="any"),
]

PROGRAM = Program(
    name="gpustack",
    dist="gpustack",
    # 0.7.1's wheel does not list cachetools, which its scheduler imports (gpustack/scheduler/evaluator.py): a clean
    # pip install stops at "No module named 'cachetools'"; the release installs it beside, as the image has it
    releases=[Release(label=OLD, requirements=[f"gpustack=={OLD}", "cachetools"]),
              Release(label=NEW, requirements=[f"gpustack=={NEW}"])],
    cases=CASES,
)
