"""docs/testing.rst's ``snowflake_clock`` examples, run as a project's suite would run them.

The page's fixture examples run in one pytest session, in the page's order, then a test that
rewinds the clock 3 ms under the default ``wait`` policy: what one test did to the clock
(two days ahead) must not reach the next (DESIGN section 5, "Frozen clocks"; issue 27).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from django_snowflake.generator import Lease, SnowflakeGenerator, UsedTime
from django_snowflake.layout import BitLayout
from django_snowflake.testing import FakeClock

from .user_suite import report, run_user_suite

PAGE = Path(__file__).resolve().parent.parent / "docs" / "testing.rst"

# What the page's examples take for granted: a project's models and factories.
PREAMBLE = """
    from datetime import timedelta

    from tests.factories import OrderFactory
    from tests.testapp.models import Order
"""

AFTER = """
    from django_snowflake import decode, generate


    def test_rewind_3_ms_waits_under_the_default_policy(snowflake_clock):
        before = generate()
        snowflake_clock.rewind(3)
        after = generate()
        assert after > before
        assert decode(after).timestamp >= decode(before).timestamp
"""


def fixture_examples() -> list[str]:
    """The page's Python code blocks that use the fixture, in the page's order."""
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", PAGE.read_text())
    return [textwrap.dedent(block) for block in blocks if "snowflake_clock)" in block]


def test_the_page_has_fixture_examples() -> None:
    assert len(fixture_examples()) >= 2


@pytest.mark.slow
def test_the_examples_in_order_then_a_rewind(tmp_path: Path) -> None:
    examples = fixture_examples()
    source = "\n\n".join([textwrap.dedent(PREAMBLE), *examples, textwrap.dedent(AFTER)])
    tests = len(re.findall(r"^def test_", source, re.MULTILINE))
    result = run_user_suite(tmp_path, source, "-p", "no:randomly")
    assert result.returncode == 0, report(result)
    assert f"{tests} passed" in result.stdout, report(result)


class _History:
    """A lease source handing over what an earlier generator of the process used, as the
    static allocator does after the fixture's teardown rebuilds the generator."""

    def __init__(self, used: UsedTime) -> None:
        self.used = used

    def acquire(self, generator: SnowflakeGenerator) -> Lease:
        return Lease(0, history=self.used.copy())


def test_a_rebuilt_generator_starts_on_its_own_clock_and_repeats_nothing() -> None:
    layout = BitLayout()
    clock = FakeClock()
    ahead = SnowflakeGenerator(layout, 0, clock=clock, sleep=clock.sleep)
    ahead.use_clock(clock, clock.sleep)  # what the fixture does: test mode
    early = [ahead.next_id() for _ in range(10)]
    clock.advance(20)
    issued = set(early + [ahead.next_id() for _ in range(5000)])  # two units' sequences
    ahead.relinquish(final=True)
    real = FakeClock(clock.ms - 20)  # the next test, back at the real time
    rebuilt = SnowflakeGenerator(layout, lease_source=_History(ahead.used_time()), clock=real)
    rebuilt.use_clock(real, real.sleep)
    first = rebuilt.next_id()
    real.rewind(3)  # measured from this clock, not from the units 20 ms ahead
    later = [first, rebuilt.next_id()]
    while real.ms <= clock.ms + 2:  # through the units the earlier clock used
        later += [rebuilt.next_id() for _ in range(300)]
        real.advance(1)
    assert not issued & set(later)
    assert len(set(later)) == len(later)
