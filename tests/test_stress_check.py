"""The torture run's bookkeeping: every ID a killed worker got reaches the check, and the
check finds what it is there to find."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from stress.check import check_files, load
from stress.torture import Chaos, TortureConfig
from stress.torture_worker import IdLog


def test_ids_of_a_sigkilled_process_are_all_in_its_file(tmp_path):
    path = tmp_path / "1-0-wait.bin"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: log IDs past a few growths, say how many, then wait to die
        os.close(read)
        log = IdLog(path, capacity=4)
        for value in range(1, 100):
            log.append(value)
        log.extend(list(range(100, 1000)))
        log.append(1000)
        os.write(write, str(log.count).encode())
        signal.pause()
        os._exit(0)
    os.close(write)
    count = int(os.read(read, 32))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read)

    assert count == 1000
    assert path.stat().st_size > count * 8  # grown ahead of its writes
    assert load(path).tolist() == list(range(1, 1001))


def test_check_finds_duplicates_across_files_and_disorder_where_promised(tmp_path):
    def write(name, values):
        log = IdLog(tmp_path / name, capacity=2)
        log.extend(values)
        log.close()

    write("1-0-wait.bin", [10, 20, 15])  # out of order under a monotonic policy
    write("2-0-ring.bin", [30, 25, 20])  # ring may go back: order not checked
    write("3-1-borrow.bin", [])

    result = check_files(sorted(tmp_path.iterdir()))

    assert result["ids"] == 6
    assert result["duplicates"] == 1
    assert result["duplicate_examples"] == {20: ["1-0-wait.bin", "2-0-ring.bin"]}
    assert [(entry["file"], entry["index"]) for entry in result["out_of_order"]] == [
        ("1-0-wait.bin", 2)
    ]
    assert result["order_checked_ids"] == 3


def test_check_excuses_a_drop_only_at_a_reset_seam(tmp_path):
    ids, seams = tmp_path / "ids", tmp_path / "seams"
    ids.mkdir()
    seams.mkdir()

    def write(directory, name, values):
        log = IdLog(directory / name, capacity=2)
        log.extend(values)
        log.close()

    # A reset replaced the generator under the call that gave the 3rd ID (seam 3, 1-based):
    # the drop to 5 there (or at the next ID) is another generator's; the drop to 7 is not.
    write(ids, "1-0-wait.bin", [10, 20, 5, 6, 30, 7])
    write(seams, "1-0-wait.bin", [3])
    write(ids, "2-0-wait.bin", [10, 20, 11])  # no seam: the drop counts

    result = check_files(sorted(ids.iterdir()), seams)

    assert [
        (entry["file"], entry["index"], entry["count"]) for entry in result["out_of_order"]
    ] == [
        ("1-0-wait.bin", 5, 1),
        ("2-0-wait.bin", 2, 1),
    ]


# A worker that announces itself after the shutdown began (slow to start, as one spawned by a
# restart during the shutdown is): its pid file comes a second late.
LATE_WORKER = """
import json, pathlib, sys, time
time.sleep(1)
path = pathlib.Path(sys.argv[1]) / "pids" / str(__import__("os").getpid())
path.write_text(json.dumps({"policy": "wait", "clock": "0"}))
time.sleep(600)
"""


def test_shutdown_stops_a_worker_that_announces_itself_late(tmp_path):
    for name in ("pids", "logs"):
        (tmp_path / name).mkdir()
    chaos = Chaos(db=None, run=tmp_path, config=TortureConfig(seed=1))  # type: ignore[arg-type]
    late = subprocess.Popen([sys.executable, "-c", LATE_WORKER, str(tmp_path)])
    chaos.spawned.append(late)
    done = threading.Thread(target=chaos.shutdown, daemon=True)
    done.start()
    done.join(timeout=30)
    stopped = not done.is_alive()
    late.kill()  # before the assertion, so a failure leaves nothing running
    late.wait()
    assert stopped, "shutdown() still waits for a worker it never stopped"
