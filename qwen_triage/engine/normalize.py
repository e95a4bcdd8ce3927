"""Recognise the wrappers around a log line and lift them into record fields.

Wrappers nest: a journald line can carry an Ollama logfmt line, a docker
compose line a vLLM worker line, and so on. Each layer strips its prefix and
hands the rest to the next, so `message` ends up as the program's own words.
Layers only ever remove a prefix (or a trailing CR): the message stays a
substring of the line, so a prefilter that saw the raw line cannot have missed
a pattern that matches the message.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

from qwen_triage.engine import client_text
from qwen_triage.engine.origin import APP_FORMATS
from qwen_triage.engine.records import REQUEST, LineRecord
from qwen_triage.lazyre import lazy
from qwen_triage.units import bounded_int

ANSI_RE = lazy(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
ANSI_BYTES_RE = lazy(ANSI_RE.pattern.encode())

_LEVELS = {
    "d": "debug",
    "debug": "debug",
    "trace": "debug",
    "i": "info",
    "info": "info",
    "notice": "info",
    "w": "warning",
    "warn": "warning",
    "warning": "warning",
    "e": "error",
    "err": "error",
    "error": "error",
    "f": "critical",
    "fatal": "critical",
    "critical": "critical",
    "crit": "critical",
    "alert": "critical",
    "emerg": "critical",
    "panic": "critical",
}

# syslog priorities as journald's PRIORITY field carries them
PRIORITY_LEVELS = {
    "0": "critical",
    "1": "critical",
    "2": "critical",
    "3": "error",
    "4": "warning",
    "5": "info",
    "6": "info",
    "7": "debug",
}


def level_name(raw: str | None) -> str | None:
    return _LEVELS.get(raw.lower()) if raw else None


_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"


def _wrapper(*parts: str) -> re.Pattern[str]:
    """One wrapper's regex, its parts joined; DOTALL, so the message group takes the rest of the line, CRs too."""
    return lazy("".join(parts), re.S)


# syslog's tag after the timestamp, as journald prints it
_SYSLOG_TAG = r"(?P<host>[^\s:]+) (?P<prog>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: ?(?P<msg>.*)"
# (`-o short-precise` adds the microseconds: `Nov 29 10:00:01.123456 `)
JOURNALD_SHORT = _wrapper(rf"(?P<ts>{_MONTH} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{{1,9}})?) ", _SYSLOG_TAG)
# `journalctl -o short-full`: the weekday, the date and the zone's name (`Mon 2026-12-07 01:02:03 UTC `)
JOURNALD_FULL = _wrapper(r"(?P<ts>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? [A-Z]{1,5}) ",
                         _SYSLOG_TAG)
# the same under a CJK locale, whose abbreviated month is the number and a month sign: zh_CN `2月 25 17:49:00`,
# ja_JP / ko_KR ` 2月` / ` 2월` (padded to two columns)
JOURNALD_SHORT_CJK = _wrapper(r"(?P<ts> ?(?:1[0-2]|[1-9])[\u6708\uc6d4] [ \d]\d \d\d:\d\d:\d\d) ", _SYSLOG_TAG)
JOURNALD_ISO = _wrapper(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) ", _SYSLOG_TAG)
# a syslog stamp with no host after it: moreutils' `ts` (`Dec 07 01:02:03 `, its default format) or a viewer's copy
SYSLOG_STAMP = _wrapper(rf"(?P<ts>{_MONTH} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{{1,9}})?) (?P<msg>.*)")
# The launchers that put the task before each line of many processes: `srun --label` (Slurm's task number, padded to
# the width of the largest: ` 1: `, `12: `; the line's own indentation follows), pdsh / DeepSpeed's multi-node
# launcher (the host: `worker-1: `, `node01: `, `10.0.0.2: `, `localhost: `) and `kubectl logs --prefix`
# (`[pod/vllm-0/vllm] `). Only as the outermost layer; a
# host is a lower-case name that ends in digits, an address or localhost, never a tool that names itself before its
# words (`python3: `, `collect2: `, `cc1: `), a device the kernel names (`loop0: `, `nvidia-nvswitch0: `), an error
# code (CANN's `EI0006: `, `JBD2: `), a GPU or rank label or a container layer's id (`f7eb321dd245: Pull complete`)
SLURM_LABEL = _wrapper(r" {0,5}(?P<task>\d{1,5}): (?P<msg>.*)")
_NOT_HOSTS = (  # names that end in a number and are no host: tools, kernel devices, GPU / rank / layer labels, ISAs
    "python", "pip", "cc", "collect", "gcc", "ld", "nvcc", "clang", "loop", "nvme", "sd", "md", "dm", "nbd", "eth", "ib",
    "en", "wl", "tty", "usb", "card", "mlx", "bond", "veth", "br", "tun", "tap", "gpu", "GPU", "cuda", "CUDA", "rank",
    "Rank", "RANK", "step", "Step", "epoch", "Epoch", "layer", "Layer", "avx", "AVX", "sse", "SSE", "sm", "gfx", "int",
    "fp", "bf", "x86_", "arm", "cpu", "CPU",
)
PDSH_HOST = _wrapper(r"(?P<host>localhost|(?:\d{1,3}\.){3}\d{1,3}",
                     r"|(?![0-9a-f]{12}:)(?!(?:" + "|".join(_NOT_HOSTS) + r")\d)(?!nvidia)[a-z][\w-]{0,62}?\d{1,5}): ",
                     r"(?P<msg>.*)")
KUBECTL_PREFIX = _wrapper(r"\[pod/(?P<pod>[^\s/\]]{1,253})/(?P<container>[^\s\]]{1,253})\] (?P<msg>.*)")
# the kernel's `[%5lu.%06lu]`: seconds since boot, nine digits at most (31 years); a ten-digit stamp is the epoch
# time a program logs (UCX's `[1581060992.288391] [host:1234:0] ib_mlx5_log.c:174 UCX ERROR …`), not the kernel's
_UPTIME = r"\d{1,9}\.\d+"
DMESG = _wrapper(rf"\[\s*(?P<ts>{_UPTIME})\] ?(?P<msg>.*)")
# `journalctl -o short-monotonic`: the same uptime stamp, then the journal's host and tag (a pid, or the kernel's),
# which dmesg never prints (its own lines name a process as `comm[pid]: ` with no host before it)
JOURNALD_MONOTONIC = _wrapper(rf"\[\s*(?P<ts>{_UPTIME})\] ", _SYSLOG_TAG)
DMESG_T = _wrapper(rf"\[(?P<ts>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) {_MONTH} [ \d]\d \d\d:\d\d:\d\d \d{{4}})\] ?(?P<msg>.*)")
# `dmesg --decode` (-x), as node agents and `dmesg -x --time-format iso` print it: facility and level
# padded to their width, then the timestamp if any (`kern  :err   : 2025-02-10T16:28:06,502716+00:00 …`)
DMESG_DECODE = _wrapper(r"(?P<facility>kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])",
                        r" *:(?P<level>emerg|alert|crit|err|warn|notice|info|debug) *: ",
                        r"(?:(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) ",
                        rf"|\[\s*(?P<uptime>{_UPTIME})\] ?)?(?P<msg>.*)")
# A stamp before the line: `kubectl logs --timestamps` and `docker logs -t` (RFC 3339), the CRI log files a node
# keeps (`/var/log/pods/…/0.log`, what log shippers read: the stamp, the stream and the full / partial tag,
# `2026-11-29T10:00:01.123456789Z stderr F …`), and a bare local date and time as a terminal's or a viewer's copy,
# `ts`, a supervisor or Python's `asctime` put it (`2025-03-01 10:11:12,345 `, `2025/03/01 10:11:12 ` of Go's log
# package): not the program's words, so a rule anchored where they start still reads them. Tried after the pipe
# loggers, whose own stamp it would otherwise take.
STAMP_PREFIX = _wrapper(r"(?P<ts>\d{4}([-/])\d\d\2\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?: ?(?:Z|UTC|[+-]\d\d:?\d\d))?) ",
                        r"(?:(?P<stream>stdout|stderr) [FP] )?(?P<msg>.*)")
# the same stamp in brackets: a CI runner's or a log shipper's ``[2026-02-24T20:21:58Z] `` before each line
# (also with a space for the `T`, a comma before the fraction and no zone: an app's or a shipper's `[2025-03-01
# 10:11:12] `, LM Studio's `[2025-03-01 10:11:12][ERROR]`; SGLang's `[… TP0]` holds more and stays the message's head)
RFC3339_BRACKETED = _wrapper(r"\[(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\] ?",
                             r"(?P<msg>.*)")
# a local date and time as Python's `asctime` and most loggers print it (`2026-11-29 10:00:01`, ISO's `T` too)
_DATE_TIME = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d"
# Python loggers that separate their fields with pipes: loguru's default (`2026-11-29 10:00:01.123 | ERROR    |
# module:function:42 - msg`) and the `asctime | levelname | name | message` format of FastChat and the apps built
# on it (QAnything, LLaVA) and of fairseq; the message keeps its own indentation (a traceback's source lines)
PIPE_LOGGER = _wrapper(rf"(?P<ts>{_DATE_TIME}(?:[.,]\d{{1,9}})?) \| (?P<level>[A-Z]{{4,8}}) *\| ",
                       r"(?:(?P<src>[\w.<>-]{1,200}:[\w.<>-]{1,200}:\d{1,6}) - |(?P<logger>[\w.-]{1,64}) {0,16}\| )?(?P<msg>.*)")
# Python logging's `asctime - name - levelname - message` (the logging cookbook's format: LMDeploy's and ModelScope's
# own loggers, and the scripts that wrap an engine, olmOCR's `__main__`), LMDeploy's with `filename:lineno - ` after
# the level; the logger's name is kept (LineRecord.field "logger"), the message keeps its own indentation
DASH_LOGGER = _wrapper(rf"(?P<ts>{_DATE_TIME}(?:[.,]\d{{1,9}})?(?:Z|[+-]\d\d:?\d\d)?) - ",
                       r"(?:(?P<logger>[\w.<>-]{1,120}) - )?(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) - ",
                       r"(?:(?P<src>[\w.-]{1,120}\.py:\d{1,6}) - )?(?P<msg>.*)")
# Ray's own logger (its driver and autoscaler): `asctime<TAB>LEVEL file.py:123 -- message`
RAY_LOGGER = _wrapper(rf"(?P<ts>{_DATE_TIME}(?:,\d{{1,6}})?)\t(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) ",
                      r"(?P<src>[\w.-]{1,120}\.py:\d{1,6}) -- (?P<msg>.*)")
# Python logging's `basicConfig()` default `LEVEL:name:message` (`ERROR:root:…`, `WARNING:transformers.x:…`), and
# uvicorn's `LEVEL:` padded to ten columns (`INFO:     …`, `ERROR:    …`): a message that itself begins with
# `ERROR: ` (one space) is the program's words, not this head
BASIC_LOGGER = _wrapper(r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>[A-Za-z_<][\w.<>-]{0,119}):",
                        r"|(?P<padded>INFO: {5}|DEBUG: {4}|ERROR: {4}|WARNING: {2}|CRITICAL: ))(?P<msg>.*)")
# llama.cpp's common log with --log-timestamps / --log-prefix (llama-server, llama-box): `M.ss.mmm.uuu L ` (minutes,
# seconds, milli- and microseconds since start, the level's letter); the clock is no timestamp (engine.clock reads
# clocks), so its group is not `ts`
LLAMA_LOG = _wrapper(r"(?P<clock>\d{1,6}\.\d\d\.\d{3}\.\d{3}) (?:(?P<level>[IWED]) )?(?P<msg>.*)")
# a line copied out of Google Cloud's Logs Explorer (GKE): its severity, the receive time, the resource's label
CLOUD_LOGGING = _wrapper(r"(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY) ",
                         r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) ",
                         r"\[resource\.labels\.[A-Za-z]{1,40}: [^\]]{0,200}\] (?P<msg>.*)")
COMPOSE = _wrapper(r"(?P<container>[A-Za-z0-9][\w.-]*?)\s+\| (?P<msg>.*)")
# The message starts after `msg="` (or `msg=` for a bare value) and runs to the
# end of the line: the closing quote and the key=value pairs after it stay as
# printed, so the message is a substring of the raw line — what the
# prefilter, which sees raw bytes, relies on. A quoted value that ends the line
# loses its closing quote (still a substring): `$` in a rule means the end of the
# program's words, wherever a logger quoted them.
OLLAMA_LOGFMT = _wrapper(r"time=(?P<ts>\S+) level=(?P<level>[A-Za-z]+)(?: source=(?P<src>\S+))?",
                         r"(?: msg=(?P<quoted>\")?)?(?P<rest>.*)")
# a quoted value's closing quote at the end of the line, no unescaped quote before it in the value
_LAST_VALUE = lazy(r'(?:[^"\\]|\\.)*"\s*', re.S)
VLLM_PREFIX = _wrapper(r"\((?P<proc>[A-Za-z][\w-]*(?: [A-Za-z][\w-]*)?)(?: rank=(?P<rank>\d+))? pid=(?P<pid>\d+)",
                       r"(?:, ip=(?P<ip>[^)]*))?\) ?(?P<msg>.*)")
VLLM_LINE = _wrapper(r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ",
                     r"(?:\[(?P<src>[^\]\s]+)\]|(?P<src_old>[\w.]+:\d+)\]) ?(?P<msg>.*)")
NCCL_LINE = _wrapper(r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<gpu>\d+)\] (?:(?P<loc>[\w/.-]+\.\w+:\d+) )?",
                     r"(?P<msg>NCCL (?P<level>WARN|INFO|ERROR|TRACE|ABORT)\b.*)")
# mpirun --tag-output: `[1,0]<stdout>:…`
MPI_TAG = _wrapper(r"\[(?P<job>\d+),(?P<rank>\d+)\]<(?:stdout|stderr)>:(?P<msg>.*)")
# Ray's worker prefix without a name: `(pid=909608) …`
RAY_PID = _wrapper(r"\(pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)]*))?\) ?(?P<msg>.*)")
# Ray's own processes, which have no pid in their prefix: `(raylet) …`, `(autoscaler +1m7s) …` (the time since the
# driver started), `(raylet, ip=10.0.0.2) …` on another node
RAY_SYSTEM = _wrapper(r"\((?P<proc>raylet|gcs_server|autoscaler|dashboard_agent|dashboard|monitor|log_monitor)",
                      r"(?: \+[\dhms]{1,12})?(?:, ip=(?P<ip>[^)]*))?\) (?P<msg>.*)")
# SkyPilot's multi-node prefix: `(head, rank=0, pid=3373) …`, `(worker1, rank=1, pid=3120, ip=10.0.0.3) …` (the rank
# is the node's, SKYPILOT_NODE_RANK, not a process group's)
SKYPILOT_NODE = _wrapper(r"\((?P<node>head|worker\d{1,4}), rank=(?P<rank>\d{1,6}), pid=(?P<pid>\d{1,9})",
                         r"(?:, ip=(?P<ip>[^)]*))?\) (?P<msg>.*)")
# talosctl dmesg: `10.0.0.2: kern: warning: [2026-04-22T21:25:20.458998481Z]: …`
TALOS_KERN = _wrapper(r"(?P<host>[\w.:-]+): kern: +(?P<level>\w+): \[(?P<ts>[^\]]+)\]: (?P<msg>.*)")
# torchrun's line prefixes: `[rank3]:` (the global rank: --log-line-prefix-template's default, on a worker's
# traceback) and `[default3]:` (role and local rank: every line with --tee, torch 2.13 too; `default` is the role
# unless --role names another)
TORCH_RANK = _wrapper(r"\[(?:rank(?P<rank>\d+)|(?P<role>[a-z][a-z_]{0,30}?)(?P<local>\d+))\]:(?P<msg>.*)")
# vLLM's worker names with pipeline parallelism: `Worker_PP1_TP0` (the tensor-parallel rank within a stage)
VLLM_PP_TP = lazy(r"PP(\d+)_TP(\d+)$")
# torchrun --log-dir --redirects/--tee: `<log_dir>/<run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log`;
# a file or folder named for its rank: `rank3.log`, `rank_3/`, `worker-3.log`
_PATH_LOCAL_RANK = lazy(r"(?:^|/)attempt_\d+/(\d+)/(?:stdout|stderr|error)\.(?:log|json)$")
_PATH_RANK = lazy(r"(?:^|[/_.-])rank[_-]?(\d{1,5})(?:[/_.-]|$)", re.I)
# (torch before 2.1 printed its C++ warnings without the date and thread: `[W socket.cpp:426] `, `[E ProcessGroupNCCL.cpp:456] `)
GLOG = _wrapper(r"\[(?P<level>[IWEF])(?:(?P<ts>\d{3,4} \d\d:\d\d:\d\d\.\d+)(?: +\d+)?)? ",
                r"(?P<src>[^\]\s]+:\d+)\] ?(?P<msg>.*)")
# DeepSpeed's logger after its bracketed stamp: `[INFO] [config.py:1003:print] `, axolotl's with the process and rank
# (`[INFO] [axolotl.utils.models.load_tokenizer:483] [PID:99566] [RANK:0] `)
BRACKET_LOGGER = _wrapper(r"\[(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\] ",
                          r"\[(?P<src>[\w.-]{1,120}:\d{1,6}(?::[\w<>.-]{1,80})?)\] ?",
                          r"(?:\[PID:(?P<pid>\d{1,9})\] ?)?(?:\[RANK:(?P<rank>\d{1,6})\] ?)?(?P<msg>.*)")
# transformers' logging as LLaMA-Factory and other trainers format it: `[INFO|trainer.py:2405] 2025-03-06 12:04:09,913 >> `
HF_LOGGER = _wrapper(r"\[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\|(?P<src>[\w.-]{1,120}:\d{1,6})\] ",
                     rf"(?P<ts>{_DATE_TIME}(?:[.,]\d{{1,6}})?) >> (?P<msg>.*)")
# torch's own logging without brackets: `W1129 16:46:03.146000 11144 torch/_library/triton.py:53] …`
GLOG_BARE = _wrapper(r"(?P<level>[IWEF])(?P<ts>\d{4} \d\d:\d\d:\d\d\.\d+) +\d+ (?P<src>\S+:\d+)\] ?(?P<msg>.*)")

# Each wrapper above as programs print it around a message (`{}`), with the format name the
# record gets: the examples `rules lint` renders every rule's `match` examples under
# (authoring.lint.robustness), so that a rule which stops matching when a line is wrapped is
# found before a log shows it. tests/engine/test_normalisation.py holds every format to a sample.
WRAPPER_SAMPLES: tuple[tuple[str, str], ...] = (
    ("journald", "Nov 29 10:00:01 host1 ollama[1234]: {}"),
    ("journald", "Nov 29 10:00:01 host1 kernel: {}"),
    ("journald", "Nov 29 10:00:01 host1 systemd[1]: {}"),
    ("journald", "[  196.310573] host1 ollama[1234]: {}"),  # journalctl -o short-monotonic
    ("journald", "Nov 29 10:00:01.123456 host1 ollama[1234]: {}"),  # journalctl -o short-precise
    ("journald", "Sun 2026-11-29 10:00:01 UTC host1 ollama[1234]: {}"),  # journalctl -o short-full
    ("journald-iso", "2026-11-29T10:00:01.123456+00:00 host1 vllm[1234]: {}"),
    ("journald-iso", "2026-11-29T10:00:01+0000 host1 kernel: {}"),
    ("dmesg", "[ 1234.567890] {}"),
    ("dmesg-T", "[Sun Nov 29 10:00:01 2026] {}"),
    ("dmesg-decode", "kern  :err   : 2026-11-29T10:00:01,123456+00:00 {}"),
    ("dmesg-decode", "kern  :warn  : [ 1234.567890] {}"),
    ("talos-kern", "10.0.0.2: kern:     err: [2026-11-29T10:00:01.123456789Z]: {}"),
    ("timestamped", "2026-11-29T10:00:01.123456789Z {}"),  # kubectl logs --timestamps, docker logs -t, CI
    ("cri", "2026-11-29T10:00:01.123456789Z stderr F {}"),  # a node's CRI container log file
    ("timestamped", "2026-11-29 10:00:01,123 {}"),  # a terminal's, a viewer's or `asctime`'s local stamp
    ("timestamped", "[2026-11-29 10:00:01] {}"),
    ("timestamped", "Nov 29 10:00:01 {}"),  # moreutils' `ts`
    ("compose", "vllm-1  | {}"),
    ("pipe-logger", "2026-11-29 10:00:01.123 | ERROR    | __main__:main:42 - {}"),  # loguru
    ("pipe-logger", "2026-11-29 10:00:01 | ERROR | stderr | {}"),  # FastChat, QAnything
    ("dash-logger", "2026-11-29 10:00:01,123 - lmdeploy - ERROR - base.py:53 - {}"),  # LMDeploy
    ("dash-logger", "2026-11-29 10:00:01,123 - __main__ - INFO - {}"),  # Python logging's cookbook format
    ("dash-logger", "2026-11-29 10:00:01.123456+00:00 - gpustack.worker.backends.vllm - ERROR - {}"),  # GPUStack
    ("ray-logger", "2026-11-29 10:00:01,123\tERROR worker.py:1833 -- {}"),
    ("basic-logger", "ERROR:root:{}"),
    ("basic-logger", "ERROR:    {}"),  # uvicorn
    ("llama-log", "0.04.466.952 E {}"),
    ("cloud-logging", "ERROR 2026-11-29T10:00:01.123456789Z [resource.labels.containerName: vllm] {}"),
    ("logfmt", 'time=2026-11-29T10:00:01.123Z level=ERROR source=server.go:612 msg="{}"'),
    ("logfmt", 'time="2026-11-29T10:00:01Z" level=error msg="{}"'),  # logrus: containerd, the NVIDIA toolkit
    ("vllm-process", "(APIServer pid=1234) {}"),
    ("vllm-process", "(EngineCore_DP0 pid=1234) {}"),
    ("vllm-process", "(VllmWorker rank=2 pid=1234) {}"),
    ("vllm-process", "(Worker_TP2 pid=1234) {}"),
    ("vllm-process", "(RayWorkerWrapper pid=1234, ip=10.0.0.2) {}"),
    ("ray", "(pid=1234) {}"),
    ("ray", "(raylet) {}"),
    ("ray", "(autoscaler +1m7s) {}"),
    ("skypilot", "(worker1, rank=1, pid=3120, ip=10.0.0.3) {}"),  # SkyPilot's multi-node runs
    ("vllm", "ERROR 11-29 10:00:01 [core.py:586] {}"),
    ("vllm", "INFO 11-29 10:00:01 config.py:1401] {}"),  # before 0.7
    ("nccl", "node1:1234:5678 [3] {}"),  # only around NCCL's own `NCCL WARN …` lines
    ("mpi", "[1,0]<stderr>:{}"),
    ("slurm-label", " 1: {}"),  # srun --label
    ("pdsh", "worker-1: {}"),  # pdsh, DeepSpeed's multi-node launcher
    ("pdsh", "10.0.0.2: {}"),
    ("kubectl-prefix", "[pod/vllm-7d9f8c-abcde/vllm] {}"),  # kubectl logs --prefix
    ("subprocess-tee", "stderr: {}"),  # accelerate test, transformers' and DeepSpeed's execute_subprocess_async
    ("torch-rank", "[rank3]:{}"),
    ("torch-rank", "[default0]:{}"),
    ("glog", "[W1129 10:00:01.123456 1234 ProcessGroupNCCL.cpp:1234] {}"),
    ("glog", "W1129 10:00:01.123000 1234 torch/distributed/run.py:793] {}"),
    ("glog", "[E ProcessGroupNCCL.cpp:456] {}"),  # torch before 2.1
    ("bracket-logger", "[ERROR] [launch.py:325:sigkill_handler] {}"),  # DeepSpeed, after its bracketed stamp
    ("bracket-logger", "[INFO] [axolotl.utils.models.load_model:483] [PID:1234] [RANK:0] {}"),
    ("hf-logger", "[ERROR|trainer.py:2405] 2026-11-29 10:00:01,123 >> {}"),  # LLaMA-Factory
    ("tracing", "ERROR warmup{max_input_length=Some(4095) max_batch_size=None}:warmup: {}"),
    ("timestamped", "2026-11-29T10:00:01.123456Z ERROR text_generation_launcher: {}"),  # then tracing: TGI, Dynamo
)
GPU_IN_PROC = lazy(r"(?:TP|rank|_|-)(\d+)$")
# Rust's tracing (TGI's router and launcher): `LEVEL span{fields}:span2: target: file:line: message`. A span's
# fields are the request's (TGI's `generate{parameters=GenerateParameters { stop: ["…"], … }}`: a client's
# stop strings, grammar), never the event's words: the layer drops the span list, read with its quotes.
TRACING_SPANS = lazy(r"\s{0,4}(?P<level>TRACE|DEBUG|INFO|WARN|ERROR) {1,2}(?=[A-Za-z_][\w-]{0,63}\{)")
MAX_SPANS = 64 * 1024  # characters of span fields read at most
# the same without spans, after the stamp tracing's fmt layer prints first (`2024-05-01T01:17:22.647761Z ERROR
# text_generation_launcher: …`, `…Z  WARN dynamo_runtime::pipeline::network: …`): the level padded to five columns,
# the target a module path (a span without fields, TGI's `shard-manager:`, is the first word of the message)
TRACING_EVENT = lazy(r" ?(?P<level>TRACE|DEBUG|INFO|WARN|ERROR) {1,2}(?P<target>[A-Za-z_][\w-]{0,63}(?:::[\w-]{1,63}){0,8}): (?P<msg>.*)",
                     re.S)


def _set_ts(rec: LineRecord, ts: str) -> None:
    if rec.timestamp is None:
        rec.timestamp = ts


def _claim_program(rec: LineRecord, program: str) -> None:
    """Name the program from a wrapper, unless an outer layer already said who wrote the line.

    A syslog tag or a dmesg timestamp inside an application's line (a prompt it logged,
    a journal unit's output) is that application's text: it must not make the line the
    kernel's (engine.origin decides what the system's own records may say).
    """
    if rec.program is None and APP_FORMATS.isdisjoint(rec.formats):
        rec.program = program


def _journald(rec: LineRecord, m: re.Match[str], fmt: str) -> None:
    _set_ts(rec, m["ts"])
    rec.host = m["host"]
    _claim_program(rec, m["prog"])
    if m["pid"]:
        rec.pid = bounded_int(m["pid"])
    rec.formats += (fmt,)


def _strip_layer(rec: LineRecord, msg: str) -> str | None:
    """Strip one wrapper from ``msg``; return the inner text or None when none applies."""
    c = msg[:1]
    if c in "JFMASOND" and (m := JOURNALD_SHORT.match(msg)) and _syslog_short_tagged(m):
        _journald(rec, m, "journald")
        return m["msg"]
    if c in "JFMASOND" and (m := SYSLOG_STAMP.match(msg)):
        _set_ts(rec, m["ts"])
        rec.formats += ("timestamped",)
        return m["msg"]
    if c in "MTWFS" and (m := JOURNALD_FULL.match(msg)) and _tag_named(m):
        _journald(rec, m, "journald")
        return m["msg"]
    if c.isdigit() and (inner := _strip_dated(rec, msg)) is not None:
        return inner
    if (c.isdigit() or (c == " " and msg[1:2].isdigit())) and (m := JOURNALD_SHORT_CJK.match(msg)):
        _journald(rec, m, "journald")
        return m["msg"]
    if " NCCL " in msg[:160] and (m := NCCL_LINE.match(msg)):
        return _nccl(rec, m)
    if c.isalnum() and ": kern: " in msg[:60] and (m := TALOS_KERN.match(msg)):
        _set_ts(rec, m["ts"])
        rec.host = m["host"]
        _claim_program(rec, "kernel")
        rec.level = level_name(m["level"])
        rec.formats += ("talos-kern",)
        return m["msg"]
    if c in "kumdaslncf" and ":" in msg[4:10] and (m := DMESG_DECODE.match(msg)):
        _set_ts(rec, m["ts"] or m["uptime"])
        if m["facility"] == "kern":
            _claim_program(rec, "kernel")
        rec.level = level_name(m["level"])
        rec.formats += ("dmesg-decode",)
        return m["msg"]
    if c == "[":
        return _strip_bracketed(rec, msg)
    if c == "s" and msg.startswith(("stderr: ", "stdout: ")):
        # the test helpers of transformers, accelerate and DeepSpeed (`accelerate test`, execute_subprocess_async)
        # relay a child's lines as `print(label, line)`: the line, its indentation kept, after the stream's label
        rec.formats += ("subprocess-tee",)
        return msg[8:]
    if c == "t" and (m := OLLAMA_LOGFMT.match(msg)):
        return _logfmt(rec, m)
    if c == "(":
        return _strip_parenthesised(rec, msg)
    if c in "DIWEC" and ":" in msg[4:10] and (m := BASIC_LOGGER.match(msg)):
        if m["padded"]:  # uvicorn's level (basicConfig's is the `level` group _logger_head reads)
            rec.level = level_name(m["padded"].rstrip(": "))
        return _logger_head(rec, m, "basic-logger")
    if c in "DIWEC" and (m := VLLM_LINE.match(msg)):
        _set_ts(rec, m["ts"])
        rec.level = level_name(m["level"])
        rec.extra["source"] = m["src"] or m["src_old"]
        rec.formats += ("vllm",)
        return m["msg"]
    if c in "DINWECA" and "[resource.labels." in msg[:80] and (m := CLOUD_LOGGING.match(msg)):
        _set_ts(rec, m["ts"])  # the severity is the stream's (stderr is ERROR), not the program's: not a level
        rec.formats += ("cloud-logging",)
        return m["msg"]
    if (c == " " or c in "TDIWE") and "{" in msg[:80] and (m := TRACING_SPANS.match(msg)):
        end = _span_list_end(msg, m.end())
        rec.level = level_name(m["level"])
        rec.formats += ("tracing",)
        if end is None:  # fields that do not close (a line cut short): none of it is the event's
            rec.quoted = REQUEST
            return ""
        return msg[end:]
    if c in "IWEF" and msg[1:2].isdigit() and (m := GLOG_BARE.match(msg)):
        _set_ts(rec, m["ts"])
        rec.level = level_name(m["level"])
        rec.formats += ("glog",)
        return m["msg"]
    if c.isalnum() and "| " in msg[:80] and (m := COMPOSE.match(msg)) and not rec.formats:
        rec.extra["container"] = m["container"]
        rec.formats += ("compose",)
        return m["msg"]
    if rec.formats in ((), ("pdsh",)) and ": " in msg[:70]:  # pdsh over pdsh: DeepSpeed's launcher over ssh
        return _launcher_label(rec, msg)
    return None


def _launcher_label(rec: LineRecord, msg: str) -> str | None:
    """The outermost label a multi-process launcher puts before each line: Slurm's task, pdsh's host."""
    if (msg[:1].isdigit() or msg[:1] == " ") and (m := SLURM_LABEL.match(msg)):
        rec.extra["task"] = m["task"].strip()
        rec.formats += ("slurm-label",)
        return m["msg"]
    colon = msg.find(": ")  # a host ends in a digit (a name, an address) or is localhost: the pattern runs only then
    if ((colon > 0 and msg[colon - 1].isdigit()) or msg.startswith("localhost: ")) and (m := PDSH_HOST.match(msg)):
        rec.host = m["host"]
        rec.formats += ("pdsh",)
        return m["msg"]
    return None


_ZONE_OFFSET = lazy(r"[+-]\d\d:?\d\d$")
# a host name (not a date, a glog head `I1220` or the kernel's `[20001.364834]`) and a program name (not a PCI
# address `0000`, a traceback's `"C:\…`): what follows an ISO stamp otherwise is the message
_HOST_NAME = lazy(r"(?!\d{4}-\d\d-\d\d)(?![IWEF]\d{4}$)[A-Za-z0-9][\w.-]*$")
_TAG_NAME = lazy(r"[A-Za-z_(]")


def _syslog_tagged(m: re.Match[str]) -> bool:
    """Whether a line of an ISO stamp and two words and a colon is journald's / rsyslog's: they print the zone as
    an offset (`+01:00`, `+0000`). A stamp that ends in `Z` or in no zone is `kubectl logs --timestamps`', docker's,
    CRI's or a tracing subscriber's, and the words after it are the message (`sglang serve: error: argument …`,
    `rocBLAS error: Cannot read …`); such a line is syslog's only where its tag has a pid or is the kernel's. No
    host or program is named after a level (`… ERROR dynamo_runtime::server: …`, `… rocBLAS error: …`), and a
    host is a name, a program starts with a letter."""
    return _tag_named(m) and bool(_ZONE_OFFSET.search(m["ts"]) or m["pid"] or m["prog"] == "kernel")


def _syslog_short_tagged(m: re.Match[str]) -> bool:
    """Whether a line of a syslog stamp and two words and a colon is journald's / rsyslog's short form: its tag has a
    pid or is the kernel's (the journal prints `prog[pid]:` for every process it knows; nvidia-persistenced logs
    without one), as in :func:`_syslog_tagged`. A stamp moreutils' `ts` put before a program's own words (`vllm
    serve: error: …`) is no journal line."""
    return _tag_named(m) and bool(m["pid"] or m["prog"] in ("kernel", "nvidia-persistenced"))


def _tag_named(m: re.Match[str]) -> bool:
    """A syslog head's host and program are names: neither is a level, the host is no date, glog head or uptime, the
    program starts with a letter."""
    if level_name(m["host"]) or level_name(m["prog"]):
        return False
    return bool(_HOST_NAME.match(m["host"]) and _TAG_NAME.match(m["prog"]))


def _strip_dated(rec: LineRecord, msg: str) -> str | None:
    """The wrappers that open with a digit: journald's ISO form, the Python loggers that start with their stamp
    (pipes, dashes, Ray's tab), llama.cpp's clock since start, and a bare stamp."""
    if (m := JOURNALD_ISO.match(msg)) and _syslog_tagged(m):
        _journald(rec, m, "journald-iso")
        return m["msg"]
    if "| " in msg[19:40] and (m := PIPE_LOGGER.match(msg)):
        return _logger_head(rec, m, "pipe-logger")
    if " - " in msg[19:40] and (m := DASH_LOGGER.match(msg)):
        return _logger_head(rec, m, "dash-logger")
    if "\t" in msg[19:27] and (m := RAY_LOGGER.match(msg)):
        return _logger_head(rec, m, "ray-logger")
    if "." in msg[1:8] and (m := LLAMA_LOG.match(msg)):
        return _logger_head(rec, m, "llama-log")
    if m := STAMP_PREFIX.match(msg):
        _set_ts(rec, m["ts"])
        rec.formats += ("cri",) if m["stream"] else ("timestamped",)
        if m["msg"][:1] in " TDIWE" and (t := TRACING_EVENT.match(m["msg"])) is not None:
            return _tracing_event(rec, t)
        return m["msg"]
    return None


def _tracing_event(rec: LineRecord, m: re.Match[str]) -> str:
    """Rust's tracing after its stamp: the level, then the event's target (its module path); the program is the
    crate the target names (TGI's `text_generation_launcher`, Dynamo's `dynamo_runtime`)."""
    rec.level = level_name(m["level"])
    _claim_program(rec, m["target"].split("::", 1)[0])
    rec.formats += ("tracing",)
    return m["msg"]


def _logger_head(rec: LineRecord, m: re.Match[str], fmt: str) -> str:
    """A logger's head: the stamp, level, logger name and `file:line` its format prints, each where it has one."""
    fields = m.groupdict()
    if fields.get("ts"):
        _set_ts(rec, fields["ts"])
    if fields.get("level"):
        rec.level = level_name(fields["level"]) or rec.level
    if fields.get("logger"):
        rec.extra["logger"] = fields["logger"]
    if fields.get("src"):
        rec.extra["source"] = fields["src"]
    rec.formats += (fmt,)
    return m["msg"]


def _nccl(rec: LineRecord, m: re.Match[str]) -> str:
    """NCCL's own prefix: ``host:pid:tid [gpu] NCCL LEVEL`` (the host, process, GPU and level of the line)."""
    rec.host = rec.host or m["host"]
    rec.pid = bounded_int(m["pid"])
    rec.gpu = bounded_int(m["gpu"])
    rec.level = level_name(m["level"])
    rec.program = rec.program or "nccl"
    rec.formats += ("nccl",)
    if m["loc"]:
        rec.extra["source"] = m["loc"]
    return m["msg"]


def _strip_bracketed(rec: LineRecord, msg: str) -> str | None:
    """The wrappers that open with ``[``: an MPI launcher's rank tag, a bracketed RFC 3339 stamp, the kernel's
    uptime and ``dmesg -T`` clock, torchrun's ``[rank N]:`` / ``[default0]:``, glog's bracketed header, DeepSpeed's
    and transformers' bracketed logger heads."""
    if m := MPI_TAG.match(msg):
        rec.rank = bounded_int(m["rank"])
        rec.formats += ("mpi",)
        return m["msg"]
    if msg.startswith("[pod/") and not rec.formats and (m := KUBECTL_PREFIX.match(msg)):
        rec.extra["pod"], rec.extra["container"] = m["pod"], m["container"]
        rec.formats += ("kubectl-prefix",)
        return m["msg"]
    if msg[1:2].isdigit() and (m := RFC3339_BRACKETED.match(msg)):
        _set_ts(rec, m["ts"])
        rec.formats += ("timestamped",)
        return m["msg"]
    if (m := JOURNALD_MONOTONIC.match(msg)) and _syslog_tagged(m):  # an uptime has no zone: a pid or the kernel
        _journald(rec, m, "journald")
        return m["msg"]
    if m := DMESG.match(msg):
        _set_ts(rec, m["ts"])
        _claim_program(rec, "kernel")
        rec.formats += ("dmesg",)
        return m["msg"]
    if m := DMESG_T.match(msg):
        _set_ts(rec, m["ts"])
        _claim_program(rec, "kernel")
        rec.formats += ("dmesg-T",)
        return m["msg"]
    if m := TORCH_RANK.match(msg):
        if m["rank"] is not None:
            rec.rank = bounded_int(m["rank"])
        else:
            rec.local_rank = bounded_int(m["local"])
        rec.formats += ("torch-rank",)
        return m["msg"]
    if m := GLOG.match(msg):
        if m["ts"]:
            _set_ts(rec, m["ts"])
        rec.level = level_name(m["level"])
        rec.formats += ("glog",)
        return m["msg"]
    if m := BRACKET_LOGGER.match(msg):
        if m["pid"]:
            rec.pid = bounded_int(m["pid"])
        if m["rank"]:
            rec.rank = bounded_int(m["rank"])
        return _logger_head(rec, m, "bracket-logger")
    if m := HF_LOGGER.match(msg):
        return _logger_head(rec, m, "hf-logger")
    return None


def _logfmt(rec: LineRecord, m: re.Match[str]) -> str:
    """Ollama's logfmt (``time=… level=… source=… msg="…"``): the message, unquoted when it is the last value."""
    _set_ts(rec, m["ts"])
    rec.level = level_name(m["level"])
    if m["src"]:
        rec.extra["source"] = m["src"]
    rec.formats += ("logfmt",)
    rest = m["rest"]
    if m["quoted"] and _LAST_VALUE.fullmatch(rest):
        rest = rest[: rest.rindex('"')]
    return rest.lstrip()


def _strip_parenthesised(rec: LineRecord, msg: str) -> str | None:
    """The process prefixes that open with ``(``: Ray's ``(pid=N, ip=…)`` and its own processes', SkyPilot's
    ``(head, rank=0, pid=N)``, and vLLM's ``(Worker_TP1 pid=N)`` / ``(VllmWorker rank=N pid=P)``, whose process name
    may carry the rank, or the PP stage and TP rank."""
    if msg.startswith("(pid=") and (m := RAY_PID.match(msg)):
        rec.pid = bounded_int(m["pid"])
        rec.host = rec.host or m["ip"]
        rec.formats += ("ray",)
        return m["msg"]
    if msg.startswith(("(head, ", "(worker")) and (m := SKYPILOT_NODE.match(msg)) is not None:
        rec.pid = bounded_int(m["pid"])
        rec.host = rec.host or m["ip"]
        rec.extra["node_rank"] = m["rank"]
        rec.formats += ("skypilot",)
        return m["msg"]
    if (m := RAY_SYSTEM.match(msg)) is not None:
        rec.process = m["proc"]
        rec.host = rec.host or m["ip"]
        rec.formats += ("ray",)
        return m["msg"]
    if m := VLLM_PREFIX.match(msg):
        rec.process = m["proc"]
        rec.pid = bounded_int(m["pid"])
        rec.host = rec.host or m["ip"]
        if m["rank"]:
            rec.rank = bounded_int(m["rank"])
        elif pp := VLLM_PP_TP.search(m["proc"]):
            # the rank is pp * tp_size + tp, and the line does not give tp_size: the stage and TP rank only
            rec.extra["pp_rank"], rec.extra["tp_rank"] = pp[1], pp[2]
        elif g := GPU_IN_PROC.search(m["proc"]):
            rec.rank = bounded_int(g[1])
        rec.formats += ("vllm-process",)
        return m["msg"]
    return None


def _span_list_end(msg: str, i: int) -> int | None:
    """Where a tracing span list starting at ``i`` ends (after its `: `), reading quoted strings as Debug prints them."""
    depth, quoted = 0, False
    j, limit = i, min(len(msg), i + MAX_SPANS)
    while j < limit:
        ch = msg[j]
        if quoted:
            if ch == "\\":
                j += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth < 0:
                return None
        elif ch == ":" and depth == 0 and msg[j + 1 : j + 2] == " ":
            return j + 2
        j += 1
    return None


MAX_LAYERS = 5


def normalize(
    text: str,
    path: str = "<stdin>",
    line: int = 0,
    *,
    source_index: int = 0,
    truncated: bool = False,
    preset: Callable[[LineRecord], None] | None = None,
) -> LineRecord:
    """Build a record from one decoded line (already free of ANSI codes and the LF)."""
    if text.endswith("\r"):
        text = text.rstrip("\r")
    rec = LineRecord(path=path, line=line, message=text, text=text, truncated=truncated, source_index=source_index)
    if preset is not None:
        preset(rec)
    msg = text
    for _ in range(MAX_LAYERS):
        inner = _strip_layer(rec, msg)
        if inner is None:
            break
        msg = inner
    rec.message = msg
    if rec.rank is None and rec.local_rank is None:
        rec.rank, rec.local_rank = rank_of_path(path)
    client_text.cut(rec)
    return rec


@functools.lru_cache(maxsize=256)
def rank_of_path(path: str) -> tuple[int | None, int | None]:
    """(rank, local rank) a file's path says its lines are from, when the lines do not say: once per path."""
    name = path.replace("\\", "/")
    if m := _PATH_LOCAL_RANK.search(name):
        return None, bounded_int(m[1])
    if m := _PATH_RANK.search(name):
        return bounded_int(m[1]), None
    return None, None


def decode_line(raw: bytes) -> str:
    """Bytes of one line to text: invalid UTF-8 replaced, ANSI codes and NULs removed."""
    if b"\x1b" in raw:
        raw = ANSI_BYTES_RE.sub(b"", raw)
    text = raw.decode("utf-8", "replace")
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text
