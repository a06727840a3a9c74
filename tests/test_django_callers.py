"""The locals of Django's functions that SnowflakeAutoField reads from their frames
(``django_snowflake.fields._django_caller``), checked against the installed Django.

CI runs this on every supported Django (5.2, 6.0 and 6.1). A release that moves, renames,
drops or rebinds one of them fails here, naming the function and the local, rather than
turning a key the process should make into one the database makes, or the reverse.

What each read does is pinned by a behaviour test: ``_save_table``'s ``force_update`` and
``update_fields`` by test_autofield's test_force_update_without_a_key_is_refused_as_autofield_does,
its ``raw`` and ``force_insert`` by the test at the end of this module (and the fresh key
they guard by test_fields' test_an_auto_field_save_is_one_insert_carrying_the_process_key),
``bulk_create``'s ``ignore_conflicts`` by test_autofield's
test_bulk_create_ignore_conflicts_leaves_keys_unset_as_autofield_does, and its
``update_conflicts`` and the ``on_conflict`` of ``bulk_create`` and ``_batched_insert`` by
test_autofield's test_bulk_create_update_conflicts_gives_each_object_the_key_of_its_row.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import django
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_snowflake import fields
from tests.testapp.models import Writer

# What each asking function must touch for its locals to be the options of that question:
# the method it calls on the key field, or the Options property it reads.
ASKS = {
    "_save_table": "get_pk_value_on_save",
    "_prepare_for_bulk_create": "get_pk_value_on_save",
    "bulk_create": "db_returning_fields",
    "_batched_insert": "db_returning_fields",
}
# The function whose frame is above an entry read with up=1, and what it calls there.
CALLED_BY = {"_prepare_for_bulk_create": "bulk_create"}
READS = sorted(fields._DJANGO_CALLERS)


def django_function(where: str, name: str) -> Callable[..., Any]:
    module, _, owner = where.rpartition(".")
    found = getattr(getattr(importlib.import_module(module), owner, None), name, None)
    assert callable(found), (
        f"Django {django.get_version()} has no {where}.{name}, whose locals "
        "django_snowflake.fields._django_caller() reads (see _DJANGO_CALLERS)"
    )
    return inspect.unwrap(found)


def definition(function: Callable[..., Any]) -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def first_line_touching(node: ast.FunctionDef, attribute: str) -> int | None:
    """The first line of ``node`` that reads ``<something>.attribute``."""
    lines = [
        child.lineno
        for child in ast.walk(node)
        if isinstance(child, ast.Attribute) and child.attr == attribute
    ]
    return min(lines, default=None)


def bindings(node: ast.FunctionDef, local: str) -> Iterator[int]:
    """The lines of ``node`` that assign ``local``."""
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id == local and isinstance(child.ctx, ast.Store):
            yield child.lineno


@pytest.mark.parametrize("name", READS)
def test_the_frame_read_is_djangos_function_by_that_name(name: str) -> None:
    where, _up, _locals = fields._DJANGO_CALLERS[name]
    function = django_function(where, name)
    # _django_caller() knows a frame by the name of its code.
    assert function.__code__.co_name == name, f"{where}.{name} runs code named otherwise"


@pytest.mark.parametrize("name", READS)
def test_the_function_asks_what_the_read_answers(name: str) -> None:
    where, _up, _locals = fields._DJANGO_CALLERS[name]
    asked = ASKS[name]
    assert first_line_touching(definition(django_function(where, name)), asked), (
        f"{where}.{name} no longer touches .{asked} in Django {django.get_version()}: "
        "django_snowflake.fields reads its frame's locals only when it does"
    )


def misread(node: ast.FunctionDef, site: str, wanted: tuple[str, ...]) -> list[str]:
    """What is wrong with reading ``wanted`` in the frame of ``node`` when it touches ``.site``."""
    asked_at = first_line_touching(node, site)
    if asked_at is None:
        return [f"it no longer touches .{site}"]
    parameters = {argument.arg for argument in (*node.args.args, *node.args.kwonlyargs)}
    wrong = []
    for local in wanted:
        before = [line for line in bindings(node, local) if line < asked_at]
        if local in parameters and before:
            # Read as the caller passed it: rebound before the question, it means another thing.
            wrong.append(f"it rebinds its parameter {local!r} before it touches .{site}")
        elif local not in parameters and not before:
            wrong.append(f"it has no local {local!r} set before it touches .{site}")
    return wrong


@pytest.mark.parametrize("name", READS)
def test_each_local_holds_the_option_when_django_asks(name: str) -> None:
    where, up, wanted = fields._DJANGO_CALLERS[name]
    holder, site = (CALLED_BY[name], name) if up else (name, ASKS[name])
    wrong = misread(definition(django_function(where, holder)), site, wanted)
    assert not wrong, (
        f"{where}.{holder} in Django {django.get_version()}: {'; '.join(wrong)}. "
        f"django_snowflake.fields._django_caller() reads its locals as the options of {name}()"
    )


def test_the_check_finds_a_rebound_parameter_and_a_missing_local() -> None:
    source = """
    def _save_table(self, raw=False, force_insert=False):
        force_insert = True
        pk = meta.pk.get_pk_value_on_save(self)
        on_conflict = None
    """
    node = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert misread(node, "get_pk_value_on_save", ("raw", "force_insert", "on_conflict")) == [
        "it rebinds its parameter 'force_insert' before it touches .get_pk_value_on_save",
        "it has no local 'on_conflict' set before it touches .get_pk_value_on_save",
    ]


def test_fields_reads_only_the_locals_pinned_here() -> None:
    # _django_caller() hands back the frame's locals: each name read from them must be one
    # of _DJANGO_CALLERS, which the tests above check against Django.
    readers = (
        fields.SnowflakeAutoField.get_pk_value_on_save,
        fields._UpsertReadBack.db_returning_fields.fget,  # type: ignore[attr-defined]
    )
    read = {
        call.args[0].value
        for reader in readers
        for call in ast.walk(definition(reader))
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "get"
        and call.args
        and isinstance(call.args[0], ast.Constant)
    }
    pinned = {local for _where, _up, wanted in fields._DJANGO_CALLERS.values() for local in wanted}
    assert read and read <= pinned, sorted(read - pinned)


@pytest.fixture
def no_fresh_key() -> Iterator[None]:
    fields._fresh_key.set(False)
    yield
    fields._fresh_key.set(False)


@pytest.mark.django_db
@pytest.mark.usefixtures("no_fresh_key")
@pytest.mark.parametrize(
    "save",
    [
        pytest.param(lambda writer: writer.save(force_insert=True), id="force_insert"),
        pytest.param(lambda writer: writer.save_base(raw=True), id="raw (loaddata)"),
    ],
)
def test_a_forced_or_raw_insert_makes_a_key_and_leaves_no_fresh_key_mark(
    save: Callable[[Writer], None],
) -> None:
    # _save_table's force_insert and raw: Django does not consult has_default() after it
    # asks for the key, so get_pk_value_on_save() must not mark it fresh.
    writer = Writer(name="a")
    save(writer)
    assert writer.pk is not None and not fields._fresh_key.get()
    assert Writer.objects.get().pk == writer.pk
    # A stale mark would make this save skip its UPDATE and INSERT a duplicate key.
    with CaptureQueriesContext(connection) as queries:
        Writer(id=writer.pk, name="b").save()
    assert [query["sql"].split()[0].upper() for query in queries] == ["UPDATE"]
