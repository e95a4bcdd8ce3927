"""Several hosts, one clock: a record's timestamp as seconds, and each host's offset from a reference host.

Files from several hosts carry their own clocks (skewed, another zone, no year). engine.normalize keeps each
line's timestamp as the text printed it (``LineRecord.timestamp``); :func:`seconds` reads the formats it lifts
(glog's ``1202 08:47:52.88``, vLLM's ``11-29 10:00:01``, syslog's ``Dec  2 10:00:01``, dmesg -T's, ISO-8601
with or without a zone, the journal's ``__REALTIME_TIMESTAMP`` as ISO and its ``-o short-full``). A format without
a year is read in one fixed year: only differences matter, and the offset estimate absorbs a zone that a format
does not print.

:func:`offsets` estimates each host's offset from events every host logs at the same moment (the process
group's init, the rendezvous): for each such event, a host's first time minus the reference host's, the median
over events. Aligned time is a host's time minus its offset.
"""

from __future__ import annotations

from qwen_triage.lazyre import lazy

YEARLESS = 2000  # a leap year: Feb 29 of a year-less format still reads
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                       "Nov", "Dec"), 1)}
_HMS = r"(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?:[.,](?P<frac>\d{1,9}))?"
_GLOG = lazy(rf"(?P<mo>\d{{1,2}})(?P<d>\d\d) {_HMS}$")  # 1202 08:47:52.882583110
_VLLM = lazy(rf"(?P<mo>\d\d)-(?P<d>\d\d) {_HMS}$")  # 11-29 10:00:01
_SYSLOG = lazy(rf"(?:\w{{3}} )?(?P<mon>\w{{3}}) +(?P<d>\d{{1,2}}) {_HMS}(?: (?P<y>\d{{4}}))?$")
_ISO = lazy(rf"(?P<y>\d{{4}})-(?P<mo>\d\d)-(?P<d>\d\d)[T ]{_HMS}(?P<zone>Z|[+-]\d\d:?\d\d)?$")
# `journalctl -o short-full`'s `Mon 2026-12-07 01:02:03 UTC`: the weekday and the zone's name around an ISO date and
# time (a named zone reads as none: the offset estimate absorbs it)
_FULL = lazy(r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?)(?: [A-Z]{1,5})?$")


def seconds(ts: str | None) -> float | None:
    """A timestamp as seconds since the epoch (UTC where the text names no zone); None when unreadable or
    relative (dmesg's seconds since boot)."""
    if not ts or len(ts) > 64:
        return None
    ts = ts.strip().strip('"')
    if (full := _FULL.match(ts)) is not None:
        ts = full["iso"]
    m = _ISO.match(ts) or _GLOG.match(ts) or _VLLM.match(ts) or _SYSLOG.match(ts)
    if m is None:
        return None
    parts = m.groupdict()
    month = _MONTHS.get(parts["mon"]) if parts.get("mon") else int(parts["mo"])
    if month is None:
        return None
    year = int(parts["y"]) if parts.get("y") else YEARLESS
    from datetime import datetime, timezone  # here, not at import: a log without ranks never reads a time

    try:
        dt = datetime(year, month, int(parts["d"]), int(parts["H"]), int(parts["M"]), int(parts["S"]),
                      tzinfo=timezone.utc)
    except ValueError:
        return None
    value = dt.timestamp() + (float("0." + parts["frac"]) if parts.get("frac") else 0.0)
    zone = parts.get("zone")
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        value -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return value


def offsets(anchors: dict[str, dict[str, float]], reference: str | None = None) -> dict[str, float]:
    """Each host's clock offset (seconds ahead of the reference host) from the events both logged.

    ``anchors``: host -> event -> the host's (first) time of it. The reference is the given host, else the one
    that logged the most events (ties: by name). A host that shares no event with it is left out: its clock
    cannot be told."""
    if not anchors:
        return {}
    from statistics import median  # decimal and fractions with it: a tenth of a small scan's start-up

    if reference is None or reference not in anchors:
        reference = min(anchors, key=lambda h: (-len(anchors[h]), h))
    ref = anchors[reference]
    result = {reference: 0.0}
    for host, events in anchors.items():
        diffs = [t - ref[e] for e, t in events.items() if e in ref]
        if host != reference and diffs:
            result[host] = round(median(diffs), 3)
    return result
