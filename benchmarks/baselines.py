"""The baselines measured against django_snowflake in the same run.

Both are written here rather than taken from PyPI so that what is measured is in plain view:

* :class:`NaiveSnowflake`, the textbook algorithm (Twitter's 2010 ``nextId``): one lock, the
  wall clock in milliseconds, a 12-bit sequence, waiting for the next millisecond when the
  sequence wraps. It has none of the real generator's safety checks (lease, lifespan,
  rollback policy, fork).
* :func:`uuid7`, an RFC 9562 version 7 UUID: 48-bit Unix milliseconds, then a 42-bit counter
  seeded at random each millisecond (method 1 of section 6.2) and 32 random bits; strictly
  increasing within a process. It follows CPython 3.14's ``uuid.uuid7()`` line for line (with
  a lock, as two threads may call it), since Python 3.11 has none.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

TWITTER_EPOCH_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z, the package's default epoch


class NaiveSnowflake:
    """A textbook Snowflake: 41 bits of milliseconds, 10 of worker, 12 of sequence."""

    def __init__(self, worker_id: int = 1, epoch_ms: int = TWITTER_EPOCH_MS) -> None:
        self.lock = threading.Lock()
        self.worker_id = worker_id
        self.epoch_ms = epoch_ms
        self.last = -1
        self.sequence = 0

    def next_id(self) -> int:
        with self.lock:
            timestamp = time.time_ns() // 1_000_000 - self.epoch_ms
            if timestamp == self.last:
                self.sequence = (self.sequence + 1) & 4095
                if self.sequence == 0:
                    while timestamp <= self.last:
                        timestamp = time.time_ns() // 1_000_000 - self.epoch_ms
            elif timestamp < self.last:
                raise RuntimeError(f"Clock moved backwards by {self.last - timestamp} ms")
            else:
                self.sequence = 0
            self.last = timestamp
            return timestamp << 22 | self.worker_id << 12 | self.sequence


_RFC_4122_VERSION_7_FLAGS = (7 << 76) | (0x8000 << 48)
_uuid7_lock = threading.Lock()
_last_timestamp_v7: int | None = None
_last_counter_v7 = 0


def _uuid7_counter_and_tail() -> tuple[int, int]:
    rand = int.from_bytes(os.urandom(10))
    return (rand >> 32) & 0x1FF_FFFF_FFFF, rand & 0xFFFF_FFFF  # 42-bit counter, MSB 0


def uuid7() -> uuid.UUID:
    """A version 7 UUID, greater than every one this process returned before."""
    global _last_timestamp_v7, _last_counter_v7
    with _uuid7_lock:
        timestamp_ms = time.time_ns() // 1_000_000
        if _last_timestamp_v7 is None or timestamp_ms > _last_timestamp_v7:
            counter, tail = _uuid7_counter_and_tail()
        else:
            if timestamp_ms < _last_timestamp_v7:
                timestamp_ms = _last_timestamp_v7 + 1
            counter = _last_counter_v7 + 1
            if counter > 0x3FF_FFFF_FFFF:  # the counter overflowed: take the next millisecond
                timestamp_ms += 1
                counter, tail = _uuid7_counter_and_tail()
            else:
                tail = int.from_bytes(os.urandom(4))
        value = (
            (timestamp_ms & 0xFFFF_FFFF_FFFF) << 80
            | ((counter >> 30) & 0x0FFF) << 64
            | (counter & 0x3FFF_FFFF) << 32
            | tail
            | _RFC_4122_VERSION_7_FLAGS
        )
        _last_timestamp_v7 = timestamp_ms
        _last_counter_v7 = counter
    # What CPython 3.14's UUID._from_int does: skip __init__'s argument parsing.
    result = object.__new__(uuid.UUID)
    object.__setattr__(result, "int", value)
    object.__setattr__(result, "is_safe", uuid.SafeUUID.unknown)
    return result
