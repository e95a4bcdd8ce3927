"""engine.clock: timestamps of the formats engine.normalize lifts, read as seconds; offsets from shared events."""

from __future__ import annotations

import pytest

from qwen_triage.engine.clock import offsets, seconds
from qwen_triage.engine.normalize import normalize

BASE = seconds("2000-11-29T10:00:01Z")


@pytest.mark.parametrize("line, delta", [
    ("INFO 11-29 10:00:01 [core.py:586] hello", 0),  # vLLM
    ("W1129 10:00:01.500000 1234 torch/distributed/run.py:793] hello", 0.5),  # glog, bare
    ("[W1129 10:00:02.250000000 ProcessGroupGloo.cpp:524] hello", 1.25),  # glog
    ("Nov 29 10:00:01 host1 kernel: hello", 0),  # syslog
    ("2000-11-29T12:00:01.000000+02:00 host1 kernel: hello", 0),  # ISO with a zone
    ("[Wed Nov 29 10:00:01 2000] hello", 0),  # dmesg -T
    ("Nov 29 10:00:01.750000 host1 ollama[1234]: hello", 0.75),  # journalctl -o short-precise
    ("Wed 2000-11-29 10:00:01 UTC host1 ollama[1234]: hello", 0),  # journalctl -o short-full
    ("Nov 29 10:00:03 hello", 2),  # moreutils' ts
    ("worker-1: [2000-11-29 10:00:01,500] [INFO] [launch.py:146:main] hello", 0.5),  # pdsh, DeepSpeed's stamp
])
def test_each_format_reads_to_the_same_clock(line, delta):
    rec = normalize(line, "x.log")
    assert seconds(rec.timestamp) == pytest.approx(BASE + delta)


@pytest.mark.parametrize("ts", [None, "", "1234.567890", "13-45 99:99:99", "x" * 100, "Foo 31 10:00:01"])
def test_unreadable_or_relative_is_none(ts):
    assert seconds(ts) is None


def test_offsets_are_the_median_over_shared_events():
    anchors = {"a": {"init": 100.0, "rdzv": 90.0, "nccl": 110.0},
               "b": {"init": 137.0, "rdzv": 127.0, "nccl": 200.0},  # nccl: a late outlier; the median holds
               "c": {"other": 5.0}}  # shares no event with the reference: left out
    assert offsets(anchors) == {"a": 0.0, "b": 37.0}
