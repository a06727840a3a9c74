"""The lock-free fast path of ``SnowflakeGenerator.next_id()`` (the rules in the comment
above it): the copy in ``django_snowflake.generate()`` is pinned to it, and the one
interleaving that the order "swap, then count" in ``_disarm()`` exists for is forced, not
hoped for."""

from __future__ import annotations

import inspect
import operator
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import django_snowflake
from django_snowflake import generator as generator_module
from django_snowflake import runtime
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.layout import BitLayout
from django_snowflake.observing import SPENT as _SPENT

FAST_PATH_LINES = 6


def fast_path(function: Callable[..., Any], owner: str) -> list[str]:
    lines = [line.strip() for line in inspect.getsource(function).splitlines()]
    start = lines.index("now = time.time_ns()")
    return [line.replace(f"{owner}.", "generator.") for line in lines[start:][:FAST_PATH_LINES]]


def test_generate_is_a_copy_of_next_ids_fast_path() -> None:
    copy = fast_path(django_snowflake.generate, "generator")
    assert copy == fast_path(SnowflakeGenerator.next_id, "self")
    assert copy[-1] == "return value"


class FixedTime:
    """The ``time`` module as the generator sees it, the system clock standing still."""

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def time_ns(self) -> int:
        return self.ns

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


class HookedRange:
    """``range`` for ``_arm()``: counting what is left of the window (``_disarm()``) first
    counts, then runs ``hook``, the other thread's turn, then answers."""

    def __init__(self, start: int, stop: int) -> None:
        self._ids = iter(range(start, stop))
        self.hook: Callable[[], None] | None = None

    def __iter__(self) -> HookedRange:
        return self

    def __next__(self) -> int:
        return next(self._ids)

    def __length_hint__(self) -> int:
        left = operator.length_hint(self._ids)
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return left


class SignallingLock:
    """The generator's lock, telling when another thread waits for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner = threading.get_ident()
        self.waited = threading.Event()

    def __enter__(self) -> SignallingLock:
        if threading.get_ident() != self.owner:
            self.waited.set()
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def count_then_swap(self: SnowflakeGenerator) -> None:
    """``_disarm()`` with its two steps in the wrong order."""
    if self._window_end:
        self._seq = self._max_seq - operator.length_hint(self._ids)
        self._ids = _SPENT
        self._window_start = self._window_end = 0


@pytest.mark.parametrize("entry", ["next_id", "generate"])
@pytest.mark.parametrize("order", ["swap then count", "count then swap"])
def test_a_take_while_the_window_closes(
    monkeypatch: pytest.MonkeyPatch, entry: str, order: str
) -> None:
    # Thread A takes an ID on the fast path exactly while the main thread's batch closes the
    # window: after _disarm() began and before it answered how much of the window was left.
    layout = BitLayout()
    fixed = FixedTime(layout.epoch_ms * 10**6 + 10**15)
    monkeypatch.setattr(generator_module, "time", fixed)
    monkeypatch.setattr(django_snowflake, "time", fixed)
    monkeypatch.setattr(generator_module, "range", HookedRange, raising=False)
    if order == "count then swap":
        monkeypatch.setattr(SnowflakeGenerator, "_disarm", count_then_swap)
    generator = SnowflakeGenerator(layout, 3)
    take = generator.next_id
    if entry == "generate":
        monkeypatch.setattr(runtime, "_generator", generator)
        monkeypatch.setattr(django_snowflake, "_runtime", runtime)
        take = django_snowflake.generate
    first = take()  # the slow path opens the window
    assert isinstance(generator._ids, HookedRange)
    lock = SignallingLock()
    generator._lock = lock  # type: ignore[assignment]
    taken: list[int] = []
    returned = threading.Event()

    def thread_a() -> None:
        taken.append(take())
        returned.set()

    def a_takes_its_turn() -> None:
        threading.Thread(target=thread_a).start()
        # A either returned from the fast path or waits for the lock this thread holds.
        deadline = time.monotonic() + 10
        while not (returned.is_set() or lock.waited.is_set()):
            assert time.monotonic() < deadline, "thread A did neither"
            returned.wait(0.001)

    generator._ids.hook = a_takes_its_turn
    batch = generator.next_ids(10)
    assert returned.wait(10)
    issued = [first, *taken, *batch]
    if order == "swap then count":
        assert lock.waited.is_set()  # the window was closed: A went to the lock
        assert len(set(issued)) == len(issued) == 12
    else:  # the interleaving this test forces finds the wrong order every time
        assert lock.waited.is_set() is False
        assert len(set(issued)) == len(issued) - 1
