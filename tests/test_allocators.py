"""The allocators that take the worker ID from configuration: ``static`` and ``hostname``."""

from __future__ import annotations

import os
from typing import Any

import pytest

from django_snowflake import decode, generate, get_generator
from django_snowflake.exceptions import WorkerLeaseLost


@pytest.mark.parametrize(
    ("hostname", "worker_id"), [("web-3", 3), ("shop-api-0", 0), ("a-1023", 1023)]
)
def test_hostname_takes_the_statefulset_ordinal(
    settings: Any, monkeypatch: pytest.MonkeyPatch, hostname: str, worker_id: int
) -> None:
    monkeypatch.setenv("HOSTNAME", hostname)
    settings.SNOWFLAKE = {
        "WORKER_ALLOCATOR": "hostname",
        "DATACENTER_BITS": 2,
        "WORKER_BITS": 10,
        "SEQUENCE_BITS": 10,
        "DATACENTER_ID": 2,
    }
    parts = decode(generate())
    assert (parts.worker_id, parts.datacenter_id) == (worker_id, 2)
    assert get_generator().lease_source.describe()["worker_id"] == worker_id


def test_static_reads_the_environment(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNOWFLAKE_WORKER_ID", "17")
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static"}
    assert decode(generate()).worker_id == 17


def test_a_fork_of_a_static_process_refuses_to_share_its_worker_id(
    settings: Any,
) -> None:
    settings.SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 5}
    parent_id = generate()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            generate()
            outcome = b"issued"
        except WorkerLeaseLost:
            outcome = b"refused"
        os.write(write, outcome)
        os._exit(0)
    os.close(write)
    outcome = os.read(read, 16)
    os.waitpid(pid, 0)
    os.close(read)
    assert outcome == b"refused"
    assert generate() > parent_id  # the parent keeps its worker ID
