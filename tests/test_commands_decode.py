from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from django_snowflake import decode
from django_snowflake.conf import get_layout

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> str:
    out = StringIO()
    call_command("decode_snowflake", *args, stdout=out)
    return out.getvalue()


def sample_id() -> int:
    return get_layout().compose(123_456_789, worker_id=5, sequence=7)


def test_text_output_lists_every_part() -> None:
    value = sample_id()
    lines = run(str(value)).splitlines()
    parts = decode(value).as_dict()
    assert [line.split() for line in lines] == [[key, str(parts[key])] for key in parts]
    assert parts["timestamp"] == "2025-01-02T10:17:36.789000Z"


@pytest.mark.parametrize(
    ("units", "note"),
    [
        (0, "its time is the epoch itself"),
        # 2**40 ms past the 2025 epoch: the year 2059.
        (2**40, "its time is in the future"),
        (123_456_789, None),
    ],
)
def test_an_id_no_generator_issues_says_so(units: int, note: str | None) -> None:
    value = get_layout().compose(units, sequence=1)
    lines = run(str(value)).splitlines()
    notes = [line for line in lines if line.startswith("note")]
    if note is None:
        assert notes == []
    else:
        (line,) = notes
        assert note in line
        # --json keeps the documented object and says it on stderr.
        out, err = StringIO(), StringIO()
        call_command("decode_snowflake", str(value), "--json", stdout=out, stderr=err)
        assert json.loads(out.getvalue()) == decode(value).as_dict()
        assert note in err.getvalue()


def test_decoding_1_says_it_is_no_snowflake() -> None:
    assert "AutoField key from before the switch" in run("1")


def test_json_output_of_one_id_is_one_object() -> None:
    value = sample_id()
    assert json.loads(run(str(value), "--json")) == decode(value).as_dict()


def test_json_output_of_several_ids_is_a_list_of_the_documented_objects() -> None:
    first, second = sample_id(), sample_id() + 1
    data = json.loads(run(str(first), str(second), "--json"))
    assert data == [decode(first).as_dict(), decode(second).as_dict()]
    assert set(data[0]) == {
        "id",
        "timestamp",
        "datacenter_id",
        "clock_sequence",
        "worker_id",
        "sequence",
    }


def test_several_ids_in_text_are_separated_by_a_blank_line() -> None:
    assert len(run(str(sample_id()), str(sample_id() + 1)).split("\n\n")) == 2


@pytest.mark.parametrize("bad", ["abc", "-1", "12.5", "", "٣", "1" * 19 + "x"])
def test_bad_ids_are_a_command_error(bad: str) -> None:
    with pytest.raises(CommandError, match=r"is not a Snowflake ID: expected digits"):
        run(str(sample_id()), bad)


@pytest.mark.parametrize("big", [str(2**63), "9" * 19, "1" * 20, "12345678901234567890"])
def test_too_large_ids_name_the_largest(big: str) -> None:
    with pytest.raises(CommandError) as info:
        run(big)
    assert str(info.value) == f"{big} is too large (the largest ID is {2**63 - 1})"


def test_a_very_long_number_is_shortened_in_the_message() -> None:
    with pytest.raises(CommandError, match=r"^1{18}\.\.\.1{18} \(5000 digits\) is too large"):
        run("1" * 5000)


def test_a_bad_id_on_the_command_line_is_one_line_and_a_non_zero_exit() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "django", "decode_snowflake", "12", "nope"],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "CommandError: 'nope' is not a Snowflake ID: expected digits"
    ]
