"""Races between the lease protocol and the threads that issue IDs (DESIGN section 4,
"Layout" and "Closing"), on the database of ``SNOWFLAKE_TEST_DB``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_snowflake import conf, generate, get_generator, runtime
from django_snowflake.allocators.database import DatabaseAllocator
from django_snowflake.database_slots import DATABASE_HOST
from django_snowflake.exceptions import LayoutMismatch, NoWorkerAvailable, WorkerLeaseLost
from django_snowflake.generator import SnowflakeGenerator
from django_snowflake.layout import PRESETS, BitLayout
from django_snowflake.models import WorkerNode

from .slots import held_slot

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_reset_while_threads_generate_never_repeats_an_id(
    database_generator: Callable[..., SnowflakeGenerator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the runtime is reset again and again, two threads keep the generator they were
    given, as code that caches get_generator() does, and two take the current one. The pause between stopping the old generator
    and releasing its row is widened: a thread that renewed in that gap used to go on issuing
    under a live lease after the release had lowered the slot's high-water mark, and the next
    claimant of the slot issued the same IDs (before the fix: duplicates in every run)."""
    database_generator(LEASE_SECONDS=3)
    relinquish = SnowflakeGenerator.relinquish

    def relinquish_then_pause(self: SnowflakeGenerator, **kwargs: Any) -> Any:
        result = relinquish(self, **kwargs)
        time.sleep(0.05)
        return result

    monkeypatch.setattr(SnowflakeGenerator, "relinquish", relinquish_then_pause)
    stop = threading.Event()
    issued: list[list[int]] = []

    def keep_one() -> None:
        ids: list[int] = []
        generator = get_generator()
        while not stop.is_set():
            try:
                ids.append(generator.next_id())
            except WorkerLeaseLost:
                generator = get_generator()  # closed by a reset: take the current one
            pace(ids)
        issued.append(ids)

    def take_the_current() -> None:
        ids: list[int] = []
        while not stop.is_set():
            ids.append(generate())
            pace(ids)
        issued.append(ids)

    threads = [threading.Thread(target=work) for work in [keep_one, take_the_current] * 2]
    for thread in threads:
        thread.start()
    try:
        for _ in range(15):
            time.sleep(0.06)
            runtime.reset()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    runtime.reset()
    everything = [value for ids in issued for value in ids]
    assert len(everything) > 1000
    assert len(set(everything)) == len(everything), (
        f"{len(everything) - len(set(everything))} duplicate IDs among {len(everything)}"
    )
    # No closed generator claimed a slot that nobody releases.
    held = WorkerNode.objects.filter(released_at__isnull=True).exclude(host_name=DATABASE_HOST)
    assert not held.exists(), list(held.values("worker_id", "process_id"))


def pace(ids: list[int]) -> None:
    """A pause now and then: enough IDs to collide, not millions to hold in memory."""
    if len(ids) % 200 == 0:
        time.sleep(0.001)


def test_a_closed_generator_refuses_to_issue(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    old = database_generator()
    old.next_id()
    runtime.reset()
    with pytest.raises(WorkerLeaseLost, match="closed and its worker slot released"):
        old.next_id()
    assert old.lease is None
    assert get_generator() is not old


def test_two_layouts_never_hold_slots_at_once() -> None:
    """Two processes with different layouts claim on an empty table at the same instant (a
    first deploy, or a rolling deploy that changes bits). The layout check before the claim
    saw nothing in both, and both got slots in every trial before the fix."""
    layouts = [
        BitLayout(**PRESETS["twitter"]),
        BitLayout(**{**PRESETS["twitter"], "worker_bits": 9, "sequence_bits": 13}),
    ]
    settings = {**conf.get_settings(), "LEASE_SECONDS": 10}
    both = 0
    for _ in range(30):
        # The database's own key slot would decide the race for the configured layout.
        WorkerNode.objects.all().delete()
        allocators = [DatabaseAllocator(layout, settings) for layout in layouts]
        generators = [
            SnowflakeGenerator(layout, lease_source=allocator)
            for layout, allocator in zip(layouts, allocators, strict=True)
        ]
        barrier = threading.Barrier(2)
        held: list[str] = []
        threads = [
            threading.Thread(target=claim, args=(generator, barrier, held))
            for generator in generators
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        both += len(held) == 2
        layouts_in_table = set(WorkerNode.objects.values_list("layout", flat=True))
        assert set(held) <= layouts_in_table
        assert len(layouts_in_table) <= 1, "a losing claim left its row behind"
        for allocator in allocators:
            allocator.close()
    assert both == 0, f"both layouts held slots in {both} of 30 trials"


def claim(generator: SnowflakeGenerator, barrier: threading.Barrier, held: list[str]) -> None:
    barrier.wait()
    try:
        generator.ensure_lease()
    except LayoutMismatch:
        return
    held.append(generator.layout.fingerprint)


def test_a_lost_lease_with_no_free_slot_is_worker_lease_lost(
    database_generator: Callable[..., SnowflakeGenerator],
) -> None:
    """DESIGN section 4: the caller sees WorkerLeaseLost, with NoWorkerAvailable as its
    cause (it was NoWorkerAvailable alone)."""
    generator = database_generator(LEASE_SECONDS=3, WORKER_BITS=2)
    # The database's own key slot carries the configured layout, not this one.
    WorkerNode.objects.exclude(layout=generator.layout.fingerprint).delete()
    generate()
    lease = generator.lease
    assert lease is not None
    for worker_id in set(range(4)) - {lease.worker_id}:
        held_slot(worker_id, layout=generator.layout.fingerprint)
    later = timezone.now() + timedelta(hours=1)
    WorkerNode.objects.filter(worker_id=lease.worker_id).update(
        token="someone else", lease_expires_at=later
    )
    deadline = time.monotonic() + 5
    while generator.lease is lease and time.monotonic() < deadline:
        time.sleep(0.05)  # the heartbeat runs every second and finds the slot re-owned
    with pytest.raises(
        WorkerLeaseLost, match=f"lost its lease of worker slot {lease.worker_id}"
    ) as raised:
        generate()
    error = raised.value
    assert isinstance(error.__cause__, NoWorkerAvailable) and error.error is error.__cause__
    assert (error.reason, error.worker_id, error.lease_seconds) == (
        WorkerLeaseLost.NO_FREE_SLOT,
        lease.worker_id,
        3,
    )
    # Renewed within the last lease, then found taken at the heartbeat after.
    assert error.renewed_seconds_ago is not None and 0 <= error.renewed_seconds_ago < 10
    assert "(last renewed " in str(error) and "a lease lasts 3 s), and no other slot" in str(error)
    assert f"no other slot is free: {error.error} No ID was issued." in str(error)
