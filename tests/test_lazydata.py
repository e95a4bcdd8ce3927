"""qwen_triage.lazydata: a class is processed by its first use, and behaves as a plain dataclass throughout."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading

import pytest

from qwen_triage.lazydata import is_processed, lazy_dataclass


@lazy_dataclass
class Point:
    """A point."""

    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


@lazy_dataclass(frozen=True)
class Frozen:
    """A frozen pair."""

    name: str
    size: int = 1


@lazy_dataclass(frozen=True)
class Pickled:
    """Made by the pickle loader before anything else."""

    a: int
    b: str = "b"


@lazy_dataclass
class Copied:
    """Copied before anything else."""

    a: int


@lazy_dataclass
class Raced:
    """First made in eight threads at once."""

    n: int
    items: list[int] = dataclasses.field(default_factory=list)


def test_nothing_is_written_before_the_first_use() -> None:
    @lazy_dataclass
    class Unused:
        """Never used."""

        a: int

    @lazy_dataclass
    class Asked:
        """Only asked about."""

        a: int
        b: int = 2

    assert not is_processed(Unused)
    assert [f.name for f in dataclasses.fields(Asked)] == ["a", "b"] and is_processed(Asked)
    assert dataclasses.is_dataclass(Unused) and is_processed(Unused)  # asking is a use


def test_an_instance_is_a_dataclass_instance() -> None:
    p = Point(1)
    assert p == Point(1, 0, []) and p != Point(2)
    assert repr(p) == "Point(x=1, y=0, tags=[])"
    assert Point(1).tags is not Point(1).tags  # the default factory, not one shared list
    assert dataclasses.replace(p, y=5) == Point(1, 5)
    assert dataclasses.asdict(p) == {"x": 1, "y": 0, "tags": []}
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        hash(p)  # eq=True and not frozen: unhashable, as dataclass makes it


def test_frozen_stays_frozen() -> None:
    f = Frozen("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.name = "b"  # type: ignore[misc]
    assert hash(f) == hash(Frozen("a")) and {f, Frozen("a")} == {f}


def test_an_unpickled_instance_works_before_and_after_the_class_is_processed() -> None:
    bare = Pickled.__new__(Pickled)
    object.__setattr__(bare, "a", 3)
    object.__setattr__(bare, "b", "c")  # as the pickle loader fills an instance: no __init__
    back = pickle.loads(pickle.dumps(bare))
    assert not is_processed(Pickled)
    assert (back.a, back.b) == (3, "c")
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.a = 4  # type: ignore[misc]
    assert is_processed(Pickled)  # the stand-in for __setattr__ processed it
    assert back == Pickled(3, "c") and repr(back) == "Pickled(a=3, b='c')" and hash(back) == hash(Pickled(3, "c"))
    assert dataclasses.replace(back, a=5) == Pickled(5, "c")


def test_a_copied_first_instance_is_a_dataclass_instance() -> None:
    bare = Copied.__new__(Copied)
    bare.a = 7  # an instance no __init__ made, as an unpickler or copy makes one
    twin = copy.copy(bare)
    assert twin == Copied(7) and repr(twin) == "Copied(a=7)"


def test_first_uses_at_once_in_threads_agree() -> None:
    made: list[Raced] = []
    start = threading.Barrier(8)

    def make(i: int) -> None:
        start.wait()
        made.append(Raced(i))

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.n for r in made) == list(range(8))
    assert all(r.items == [] for r in made) and len({id(r.items) for r in made}) == 8
    assert [f.name for f in dataclasses.fields(Raced)] == ["n", "items"]


def test_options_other_than_frozen_are_refused() -> None:
    with pytest.raises(TypeError):
        lazy_dataclass(order=True)  # type: ignore[call-overload]
