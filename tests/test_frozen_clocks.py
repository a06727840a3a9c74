"""Users' test suites that move time: the ``snowflake_clock`` fixture, freezegun and time-machine.

Each scenario runs as a small pytest suite of a user project in its own interpreter, with the
recommended static test settings, so that the fixture's teardown, the runtime's resets and the
libraries' patching are the real ones (DESIGN section 5, "Frozen clocks").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .user_suite import report, run_user_suite

pytestmark = pytest.mark.slow


def test_snowflake_clock_ahead_then_the_real_clock_never_repeats(tmp_path: Path) -> None:
    # A test moves the fake clock 1 s ahead and issues 50 IDs; the teardown rebuilds the
    # generator (same static worker ID); the next test runs on the real clock through that
    # second, taking IDs in every millisecond of it. (Issue 11 item 4 saw it with 300 ms.)
    result = run_user_suite(
        tmp_path,
        """
        import time

        from django_snowflake import decode, generate
        from django_snowflake.layout import ms_to_datetime

        AHEAD = set()


        def test_ahead(snowflake_clock):
            snowflake_clock.advance(1000)
            AHEAD.update(generate() for _ in range(50))
            assert {decode(i).timestamp for i in AHEAD} == {ms_to_datetime(snowflake_clock())}


        def test_real_clock():
            ahead = decode(min(AHEAD)).timestamp.timestamp()
            assert time.time() < ahead, "the machine is too slow for this test"
            repeated = 0
            while time.time() < ahead + 0.01:
                repeated += generate() in AHEAD
            assert repeated == 0
        """,
    )
    assert result.returncode == 0, report(result)
    assert "2 passed" in result.stdout
