"""The subprocess harness that tests, stress runs and benchmarks share (``harness/``)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness import private_server
from harness.child import write_ids
from harness.private_server import PrivateServer
from harness.processes import Lines, expect_line, read_ids, reap


def python(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_reap_kills_what_still_runs_and_closes_every_pipe() -> None:
    sleeping = python("import time; time.sleep(60)")
    finished = python("print('done')")
    finished.wait()
    reap([sleeping, finished])
    assert sleeping.returncode == -signal.SIGKILL
    assert finished.returncode == 0
    assert sleeping.stdout is not None and sleeping.stdout.closed
    assert finished.stdout is not None and finished.stdout.closed


def test_expect_line_returns_the_words_or_names_what_came() -> None:
    process = python("print('claimed 3 0.004')")
    try:
        assert expect_line(process, "claimed") == ["claimed", "3", "0.004"]
        with pytest.raises(RuntimeError, match="expected 'done', got ''"):
            expect_line(process, "done")  # the child has exited: an empty line
    finally:
        reap([process])


def test_lines_time_out_with_an_empty_line() -> None:
    process = python("import time; print('ready', flush=True); time.sleep(60)")
    try:
        lines = Lines(process)
        assert lines.next(time.monotonic() + 30) == "ready\n"
        assert lines.next(time.monotonic() + 0.2) == ""
    finally:
        reap([process])


def test_ids_written_by_a_child_read_back(tmp_path: Path) -> None:
    path = tmp_path / "ids"
    write_ids(str(path), [1, 2**62, 7])
    assert read_ids(path) == [1, 2**62, 7]


@pytest.mark.skipif(shutil.which("mariadbd") is None, reason="no MariaDB server here")
def test_a_private_mariadb_leaves_other_servers_temporary_tables_alone() -> None:
    """A MariaDB server deletes every ``#sql`` file of its tmpdir when it starts. With the
    machine's ``/tmp`` that was the live temporary tables of every other server, the shared
    one's included: CI's Galera test on one row failed with "Error on delete of
    '/tmp/#sql-temptable-...MAI'" while another row started its servers. Each private server
    now has a tmpdir of its own."""
    other = Path(tempfile.gettempdir()) / f"#sql-temptable-{os.getpid():x}-probe.MAI"
    other.touch()
    server = PrivateServer("mariadb")
    try:
        server.start()
    finally:
        server.close()
    try:
        assert other.exists()
    finally:
        other.unlink(missing_ok=True)


def test_free_port_is_outside_the_ephemeral_range_and_falls_back_when_there_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A port outside the range the kernel gives outgoing connections; where that range takes
    every port, the kernel's pick rather than a search that never ends."""
    ephemeral = private_server._ephemeral_ports()
    assert all(private_server.free_port() not in ephemeral for _ in range(20))
    monkeypatch.setattr(private_server, "_ephemeral_ports", lambda: range(1, 65_536))
    port = private_server.free_port()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))
