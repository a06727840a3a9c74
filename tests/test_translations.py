"""The package speaks every language it ships: complete catalogues, and no English left in
the admin pages, the form and DRF errors or the ``show_worker`` report.

"Left in English" is judged against the package's own message IDs: a page rendered in
German must not contain the English text of any package message whose German translation
differs from it. Django's own messages that its catalogue for the language leaves in English
(Django 6.x reworded its delete confirmation, and some catalogues lag) are Django's gaps, not
the package's: their words are taken off the page before it is judged, the values filled
into them (a model's name, which is the package's) staying.
"""

from __future__ import annotations

import functools
import gettext
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from html.parser import HTMLParser
from io import StringIO
from pathlib import Path
from typing import Any

import django
import pytest
from babel.messages.pofile import read_po
from django.apps import apps
from django.contrib.admin import AdminSite, ModelAdmin
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone, translation

import django_snowflake
from django_snowflake.admin import SnowflakeAdminMixin
from django_snowflake.checks import check_admin_mixin, check_settings
from django_snowflake.forms import SnowflakeFormField
from django_snowflake.models import WorkerNode
from django_snowflake.rest_framework import SnowflakeField
from tests.factories import OrderFactory
from tests.test_admin import worker_node

LOCALE = Path(django_snowflake.__file__).parent / "locale"
LANGUAGES = ["de", "fr", "es", "pt_BR", "ja", "zh_Hans"]


def catalogue(language: str):  # type: ignore[no-untyped-def]
    return read_catalogue(LOCALE / language / "LC_MESSAGES" / "django.po")


@functools.cache
def read_catalogue(path: Path):  # type: ignore[no-untyped-def]
    with path.open("rb") as po:
        return read_po(po)


def django_code(language: str) -> str:
    return translation.to_language(language)


def english_fragments(msgid: str) -> list[str]:
    """The literal text of a message ID between its placeholders, as a reader would see it."""
    pieces = re.split(r"%\(\w+\)[sdr]|\{\w+\}", msgid)
    return [piece.strip(" .:()") for piece in pieces if len(piece.strip(" .:()")) >= 3]


def untranslated_in(text: str, language: str) -> list[str]:
    """English message text of the package found in ``text``.

    A message is left out of the search when its English text is also part of this
    language's translations (German "Worker" for "worker"), where finding it proves nothing.
    """
    translated = " ".join(
        " ".join(m.string) if isinstance(m.string, tuple) else m.string
        for m in catalogue(language)
        if m.id
    )
    found = []
    for message in catalogue(language):
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        for msgid in ids:
            for fragment in english_fragments(msgid):
                pattern = re.compile(rf"(?<!\w){re.escape(fragment)}(?!\w)", re.IGNORECASE)
                if pattern.search(text) and not pattern.search(translated):
                    found.append(fragment)
    return sorted(set(found))


# What a message leaves out of its literal text: placeholders, and tags.
PLACEHOLDER_OR_TAG = re.compile(r"(%\(\w+\)[sdr]|%[sd]|<[^>]*>)")


def message_pattern(msgid: str) -> re.Pattern[str]:
    """A pattern of the literal text of a message as a page shows it, its values as groups.

    Tags in the message end a text node (a new line of ``visible()``), whitespace is free,
    and the message is found only as whole words.
    """
    parts = []
    for token in PLACEHOLDER_OR_TAG.split(msgid):
        if token.startswith("%"):
            parts.append("(.*?)")
        elif token.startswith("<"):
            parts.append(r"\s*")
        else:
            parts.append(r"\s+".join(re.escape(word) for word in token.split(" ")))
    return re.compile(rf"(?<!\w){''.join(parts)}(?!\w)")


@functools.cache
def djangos_gaps(language: str) -> tuple[re.Pattern[str], ...]:
    """Django's own messages of the installed apps that stay in English in ``language``."""
    sources = [Path(django.__file__).parent / "conf"]
    sources += [Path(app.path) for app in apps.get_app_configs() if app.name.startswith("django.")]
    gaps = []
    with translation.override(django_code(language)):
        for source in sources:
            english = source / "locale" / "en" / "LC_MESSAGES" / "django.po"
            if not english.exists():
                continue
            for message in read_catalogue(english):
                if not message.id:
                    continue
                if isinstance(message.id, tuple):
                    singular, plural = message.id
                    shown = (
                        translation.npgettext(message.context, singular, plural, 1)
                        if message.context
                        else translation.ngettext(singular, plural, 1)
                    )
                    ids = [singular, plural] if shown == singular else []
                else:
                    shown = (
                        translation.pgettext(message.context, message.id)
                        if message.context
                        else translation.gettext(message.id)
                    )
                    ids = [message.id] if shown == message.id else []
                # A message of values alone ("%(name)s: %(value)s") says nothing in English.
                words = [
                    msgid
                    for msgid in ids
                    if re.search(r"[A-Za-z]{2}", PLACEHOLDER_OR_TAG.sub("", msgid))
                ]
                gaps += [message_pattern(msgid) for msgid in words]
    # The longest first: a short message may be part of a longer one.
    return tuple(sorted(gaps, key=lambda gap: len(gap.pattern), reverse=True))


def without_djangos_gaps(text: str, gaps: tuple[re.Pattern[str], ...]) -> str:
    """``text`` without the words of Django's untranslated messages; their values stay."""
    for gap in gaps:
        text = gap.sub(lambda match: "\n".join(match.groups()), text)
    return text


class VisibleText(HTMLParser):
    """The text a person reads on a page: text nodes and ``title`` tooltips."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self.hidden += 1
        for name, value in attrs:
            if name in ("title", "placeholder", "aria-label") and value:
                self.parts.append(value)
            if name == "value" and tag == "input" and ("type", "submit") in attrs and value:
                self.parts.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def visible(html: str) -> str:
    """The page's visible texts, one per line (so two neighbours never make up a phrase)."""
    parser = VisibleText()
    parser.feed(html)
    return "\n".join(" ".join(part.split()) for part in parser.parts if part.strip())


@pytest.mark.parametrize("language", LANGUAGES)
def test_catalogue_is_complete_and_compiled(language: str) -> None:
    po = catalogue(language)
    messages = [m for m in po if m.id]
    assert messages
    assert [m.id for m in messages if not m.string or not all(m.string) or m.fuzzy] == []
    # The committed .mo says the same as the .po: nobody forgot compilemessages.
    with (LOCALE / language / "LC_MESSAGES" / "django.mo").open("rb") as mo:
        compiled = gettext.GNUTranslations(mo)
    for message in messages:
        if isinstance(message.id, tuple):
            assert compiled.ngettext(*message.id, 1) == message.string[0], message.id
        else:
            assert compiled.gettext(message.id) == message.string, message.id


@pytest.mark.skipif(not shutil.which("xgettext"), reason="GNU gettext is not installed")
def test_catalogues_hold_every_message_of_the_sources(tmp_path: Path) -> None:
    """makemessages over the package finds no message the catalogues lack."""
    package = tmp_path / "django_snowflake"
    shutil.copytree(LOCALE.parent, package, ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
    subprocess.run(
        [
            sys.executable,
            "-P",  # not the package's directory first on sys.path: its json.py is not the standard library's
            "-m",
            "django",
            "makemessages",
            "-l",
            "de",
            "--no-location",
            "--no-obsolete",
        ],
        cwd=package,
        check=True,
        capture_output=True,
        env={"PATH": str(Path(shutil.which("xgettext") or "").parent)},
    )
    with (package / "locale" / "de" / "LC_MESSAGES" / "django.po").open("rb") as po:
        fresh = {m.id for m in read_po(po) if m.id}
    shipped = {m.id for m in catalogue("de") if m.id}
    assert fresh - shipped == set(), "run makemessages and translate the new messages"


@pytest.fixture
def pages(admin_client: Client) -> dict[str, str]:
    """URLs of every admin page the package draws, with objects to show."""
    order = OrderFactory()
    active = worker_node(901, expires_in=timedelta(seconds=40))
    expired = worker_node(902, expires_in=timedelta(seconds=-5))
    worker_node(903, expires_in=timedelta(seconds=40), released=True)
    WorkerNode.objects.filter(pk=expired.pk).update(heartbeat_at=timezone.now() - timedelta(days=2))
    nodes = "admin:django_snowflake_workernode"
    return {
        "order changelist": reverse("admin:testapp_order_changelist") + "?created=today",
        "order change": reverse("admin:testapp_order_change", args=[order.pk]),
        "worker changelist": reverse(f"{nodes}_changelist"),
        "worker changelist filtered": reverse(f"{nodes}_changelist") + "?lease=active",
        "worker change": reverse(f"{nodes}_change", args=[active.pk]),
        "worker delete refused": reverse(f"{nodes}_delete", args=[active.pk]),
        "worker delete": reverse(f"{nodes}_delete", args=[expired.pk]),
        "app index": reverse("admin:app_list", args=["django_snowflake"]),
    }


@pytest.mark.django_db
@pytest.mark.parametrize("language", LANGUAGES)
def test_admin_pages_have_no_english_left(
    admin_client: Client, pages: dict[str, str], language: str
) -> None:
    strays = {}
    with translation.override(django_code(language)):
        for name, url in pages.items():
            response = admin_client.get(url)
            assert response.status_code in (200, 403), (name, response.status_code)
            text = without_djangos_gaps(visible(response.text), djangos_gaps(language))
            # WorkerNode.__str__ ("worker 901/0 on web-1:4242") is a name, not a message, and
            # "(database)" and "database" the host name and label of the database's own slot
            # (PostgreSQL, MariaDB): values in the table, like "web-1" and "web".
            text = re.sub(r"(?m)worker \d+/\d+ on \S+|^\(?database\)?$", "", text)
            if found := untranslated_in(text, language):
                strays[name] = found
    assert strays == {}


def test_the_check_catches_english_text() -> None:
    # The test above would see a leak: a German page with an English filter title.
    assert untranslated_in("Nach creation date", "de") == ["creation date"]
    assert untranslated_in("vor 19 seconds", "de") == ["seconds"]
    assert untranslated_in("Nach Erstellungsdatum, vor 19 Sekunden", "de") == []


def test_djangos_gaps_are_not_the_packages() -> None:
    # Django 6.x's delete confirmation, where its German catalogue lacked it: Django's words go,
    # the model's name filled into them is still judged.
    gaps = (
        message_pattern(
            "Are you sure you want to delete the %(object_name)s “%(escaped_object)s”? All of "
            "the following related items will be deleted:"
        ),
        message_pattern('Delete <a href="%(url)s">all</a> of them'),
    )
    page = "Are you sure you want to delete the {} “w”? All of the following related items will be deleted:"
    assert untranslated_in(page.format("Worker-Knoten"), "de") == ["Delete"]
    assert untranslated_in(without_djangos_gaps(page.format("Worker-Knoten"), gaps), "de") == []
    assert untranslated_in(without_djangos_gaps(page.format("worker node"), gaps), "de") == [
        "worker node"
    ]
    assert without_djangos_gaps("Delete\nall\nof them", gaps) == ""


@pytest.mark.parametrize("language", LANGUAGES)
def test_form_and_drf_errors_are_translated(language: str) -> None:
    with translation.override(django_code(language)):
        form = SnowflakeFormField(required=False)
        for bad in ["abc", "9" * 19]:
            try:
                form.clean(bad)
            except Exception as exc:  # ValidationError
                assert untranslated_in(" ".join(exc.messages), language) == []  # type: ignore[attr-defined]
            else:
                pytest.fail(f"{bad!r} was accepted")
            try:
                SnowflakeField().run_validation(bad)
            except Exception as exc:  # serializers.ValidationError
                assert untranslated_in(str(exc.detail), language) == []  # type: ignore[attr-defined]
            else:
                pytest.fail(f"{bad!r} was accepted")


@pytest.mark.django_db  # the report reads each server database's function
@pytest.mark.parametrize("language", LANGUAGES)
def test_show_worker_report_is_translated(language: str) -> None:
    out = StringIO()
    with translation.override(django_code(language)):
        call_command("show_worker", stdout=out)
    labels = " ".join(line.split(":")[0] for line in out.getvalue().splitlines() if ":" in line)
    assert untranslated_in(labels, language) == []


# Settings that make each settings check speak, the wrong value of one key at a time.
CHECKED_SETTINGS: list[object] = [
    ["not", "a", "dict"],  # E001
    {"WORKER_ALLOCATOR": "static", "WORKER_ID": 1, "LAYOUTS": 1, "LAYOUT": "nope"},  # E002 E003
    {"TIME_UNIT_MS": 0, "TIME_BITS": -1},  # E012 E004
    {"TIME_BITS": 50},  # E005
    {"TIME_BITS": 0, "WORKER_BITS": 11},  # E006
    {"EPOCH": "yesterday"},  # E010
    {"EPOCH": "2999-01-01T00:00:00Z"},  # E011
    {"TIME_BITS": 20},  # E013
    {"LAYOUT": "js_safe", "TIME_BITS": 42},  # E007
    {"TIME_UNIT_MS": 3_600_000},  # E014
    {"CLOCK_ROLLBACK": "nope", "MAX_ROLLBACK_MS": -1},  # E020 E021
    {"CLOCK_ROLLBACK": "clock_sequence"},  # E022
    {"CLOCK_ROLLBACK": "borrow", "MAX_ROLLBACK_MS": 50_000},  # E023
    {"WORKER_ALLOCATOR": "nope", "DATABASE": "nope", "LEASE_SECONDS": 1},  # E030 E034 E035
    {"WORKER_ALLOCATOR": "static"},  # E031
    {"WORKER_ALLOCATOR": "static", "WORKER_ID": "3", "DATACENTER_ID": "0"},  # E032 E033
    {"WORKER_ALLOCATOR": "static", "WORKER_ID": 4096, "DATACENTER_ID": 7},  # E032 E033
    {"PROCESS_LABEL": 5, "CLAIM_ON_READY": "yes"},  # E036 E037
    {"WORKER_ALLOCATOR": "hostname"},  # E038
]


def check_messages(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The messages of the settings checks under each of CHECKED_SETTINGS, made in English."""
    monkeypatch.setenv("HOSTNAME", "web")
    monkeypatch.delenv("SNOWFLAKE_WORKER_ID", raising=False)
    messages = []
    for snowflake in CHECKED_SETTINGS:
        with override_settings(SNOWFLAKE=snowflake):
            messages += check_settings()
    return messages


def test_every_settings_check_speaks(monkeypatch: pytest.MonkeyPatch) -> None:
    spoken = {message.id for message in check_messages(monkeypatch)}
    numbers = [*range(1, 8), *range(10, 15), *range(20, 24), *range(30, 39)]
    assert {f"django_snowflake.E0{n:02}" for n in numbers} - spoken == set()


@pytest.mark.parametrize("language", LANGUAGES)
def test_check_messages_and_hints_are_translated(
    monkeypatch: pytest.MonkeyPatch, language: str
) -> None:
    messages = check_messages(monkeypatch)
    english = "\n".join(f"{message.msg}\n{message.hint}" for message in messages)
    # Made before the language was chosen, read in it: translated when shown, not when made.
    with translation.override(django_code(language)):
        text = "\n".join(f"{message.msg}\n{message.hint}" for message in messages)
    assert text != english
    assert untranslated_in(text, language) == []


class UserAdmin(SnowflakeAdminMixin, ModelAdmin):  # type: ignore[type-arg]
    """The mixin on a model whose key is not a Snowflake, for W041."""


def test_the_model_check_messages_are_translated() -> None:
    site = AdminSite(name="translated")  # all_sites holds it until a garbage collection
    site.register(User, UserAdmin)
    try:
        (message,) = check_admin_mixin()
    finally:
        site.unregister(User)
    for language in LANGUAGES:
        with translation.override(django_code(language)):
            assert untranslated_in(f"{message.msg}\n{message.hint}", language) == []
