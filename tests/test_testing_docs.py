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

from .user_suite import report, run_user_suite

pytestmark = pytest.mark.slow

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


def test_the_examples_in_order_then_a_rewind(tmp_path: Path) -> None:
    examples = fixture_examples()
    source = "\n\n".join([textwrap.dedent(PREAMBLE), *examples, textwrap.dedent(AFTER)])
    tests = len(re.findall(r"^def test_", source, re.MULTILINE))
    result = run_user_suite(tmp_path, source, "-p", "no:randomly")
    assert result.returncode == 0, report(result)
    assert f"{tests} passed" in result.stdout, report(result)
