"""The model checks W040-W042: what the one-line switch leaves behind in a real project.

``tests.checks_app`` is a project app as ``startapp`` writes it (pinning BigAutoField) with
generic relations of every kind and simple-history's historical models; it, django-taggit and
django-simple-history are installed for these tests only.
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import AppConfig, apps
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import User
from django.core import checks
from django.test import override_settings

from django_snowflake.admin import SnowflakeAdminMixin
from django_snowflake.checks import (
    SWITCH,
    check_admin_mixin,
    check_auto_field_switch,
    check_generic_relations,
    check_historical_records,
    is_installed_package,
)
from tests.testapp.models import Order


@pytest.fixture
def features(django_db_blocker: Any) -> Iterator[None]:
    """What ``manage.py check`` may ask the database: Django 6.1 runs the model checks against
    every database, and its JSONField check asks each whether it supports JSON (a query on
    SQLite, whose answer is cached per connection)."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def project() -> Iterator[None]:
    installed = [*settings.INSTALLED_APPS, "taggit", "simple_history", "tests.checks_app"]
    with override_settings(INSTALLED_APPS=installed, DEFAULT_AUTO_FIELD=SWITCH):
        yield


def found(messages: list[checks.CheckMessage]) -> list[tuple[str, str]]:
    """(ID, object) of each message, every message a warning with a hint."""
    for message in messages:
        assert message.level == checks.WARNING and message.hint, message
    return [(message.id or "", _label(message.obj)) for message in messages]


def _label(obj: Any) -> str:
    if isinstance(obj, type) and hasattr(obj, "_meta"):
        return str(obj._meta.label)
    if isinstance(obj, type):
        return obj.__qualname__
    return str(obj)


def test_W040_app_pinning_another_auto_field(project: None) -> None:
    assert found(check_auto_field_switch()) == [
        # An explicit BigAutoField in the suite's own app (a deliberate "ordinary key").
        ("django_snowflake.W040", "testapp.Ticket"),
        ("django_snowflake.W040", "checks_app.Explicit"),
        ("django_snowflake.W040", "tests.checks_app.apps.ChecksAppConfig"),
    ]
    (app,) = check_auto_field_switch([apps.get_app_config("checks_app")])[1:]
    # Not PinnedChild (its key is the parent link), Coded (a text key), Post (a Snowflake) nor
    # the historical models (simple-history declares their key: W043).
    assert str(app.msg).endswith(
        ", so integer keys stay on Pinned, Comment, WideComment, Attachment, TaggedPost."
    )
    assert "Remove default_auto_field from ChecksAppConfig in tests.checks_app.apps" in str(
        app.hint
    )


def test_W040_silent_without_the_switch() -> None:
    # The suite's DEFAULT_AUTO_FIELD is BigAutoField: an app pinning one changes nothing.
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.checks_app"]):
        assert check_auto_field_switch() == []


def test_W040_leaves_django_and_installed_packages_alone(project: None) -> None:
    # contrib.auth pins AutoField, taggit AutoField, django_snowflake BigAutoField on purpose.
    for label in ("auth", "contenttypes", "admin", "taggit", "simple_history"):
        assert is_installed_package(apps.get_app_config(label)), label
        assert check_auto_field_switch([apps.get_app_config(label)]) == []
    assert check_auto_field_switch([apps.get_app_config("django_snowflake")]) == []
    assert not is_installed_package(apps.get_app_config("checks_app"))


def test_W040_through_manage_py_check(project: None, features: None) -> None:
    ids = [message.id for message in checks.run_checks()]
    assert ids.count("django_snowflake.W040") == 3


class UserAdmin(SnowflakeAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    pass


class OrderAdmin(SnowflakeAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    pass


@pytest.fixture
def site() -> Iterator[admin.AdminSite]:
    """An admin site of the test's own, left with nothing registered: all_sites holds it
    weakly, but a site and its admins refer to each other, so it stays there until a garbage
    collection that may come tests later (test_translations then found two W041s)."""
    site = admin.AdminSite(name="w041")
    yield site
    for model in list(site._registry):
        site.unregister(model)


def test_W041_admin_mixin_on_an_integer_key(site: admin.AdminSite) -> None:
    # The suite's own admin (OrderAdmin, CustomerAdmin on SnowflakeModel) is fine.
    assert check_admin_mixin() == []
    site.register(User, UserAdmin)
    site.register(Order, OrderAdmin)
    messages = check_admin_mixin()
    assert found(messages) == [("django_snowflake.W041", "UserAdmin")]
    assert "auth.User (AutoField) is not a Snowflake" in str(messages[0].msg)


def test_W041_through_manage_py_check(site: admin.AdminSite, features: None) -> None:
    site.register(User, UserAdmin)
    assert "django_snowflake.W041" in [message.id for message in checks.run_checks()]


SIMPLE_ADMIN = """
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=[
        "django.contrib.admin.apps.SimpleAdminConfig", "django.contrib.auth",
        "django.contrib.contenttypes", "django.contrib.sessions", "django.contrib.messages",
        "django_snowflake",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    SNOWFLAKE={"WORKER_ALLOCATOR": "static", "WORKER_ID": 0},
)
django.setup()
from django.contrib import admin
from django.core import checks
checks.run_checks()
print(sorted(model._meta.label for model in admin.site._registry))
"""


def test_running_the_checks_registers_nothing_on_the_admin_site() -> None:
    """W041 imported django_snowflake.admin, which registers WorkerNode on the default site: a
    project with SimpleAdminConfig or its own site found it there (Django's admindocs tests
    failed with NoReverseMatch for the django_snowflake app list)."""
    done = subprocess.run(
        [sys.executable, "-c", SIMPLE_ADMIN], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_W042_generic_relations_narrower_than_64_bits(project: None) -> None:
    assert found(check_generic_relations()) == [
        ("django_snowflake.W042", "checks_app.Attachment.object_id"),
        ("django_snowflake.W042", "checks_app.Comment.object_id"),
        ("django_snowflake.W042", "taggit.TaggedItem.object_id"),
    ]
    messages = {_label(m.obj): m for m in check_generic_relations()}
    # The model named is one whose keys the column holds: taggit's, the one tagged through it.
    assert "such as checks_app.Photo" in str(messages["taggit.TaggedItem.object_id"].msg)
    assert "such as checks_app.Post" in str(messages["checks_app.Attachment.object_id"].msg)
    assert "PositiveBigIntegerField" in str(messages["checks_app.Comment.object_id"].hint)


def test_W042_taggit_judged_by_the_models_tagged_through_it() -> None:
    # Snowflake-keyed models exist (testapp), but nothing is tagged through TaggedItem.
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "taggit"]):
        assert check_generic_relations() == []


def test_W042_through_manage_py_check(project: None, features: None) -> None:
    ids = [message.id for message in checks.run_checks()]
    assert ids.count("django_snowflake.W042") == 3


def app_at(path: Path) -> AppConfig:
    """An app whose package is the directory ``path``."""
    module = types.ModuleType("somewhere")
    module.__path__ = [str(path)]
    return AppConfig("somewhere", module)


@pytest.mark.parametrize(
    ("base_dir", "installed"),
    [
        # startproject's BASE_DIR: apps under it are the project's own.
        ("project", False),
        # An app installed editable from a checkout elsewhere is a package like any other.
        ("elsewhere", True),
        # No BASE_DIR: the directory holding the settings package (tests/ here, so its parent).
        (None, True),
    ],
)
def test_W040_the_projects_own_apps_are_under_its_directory(
    tmp_path: Path, base_dir: str | None, installed: bool
) -> None:
    app = tmp_path / "project" / "shop"
    app.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    with override_settings(BASE_DIR=None if base_dir is None else tmp_path / base_dir):
        assert is_installed_package(app_at(app)) is installed
    assert not is_installed_package(apps.get_app_config("testapp"))


def test_W043_simple_history_names_its_models_once(project: None) -> None:
    (message,) = check_historical_records()
    assert found([message]) == [("django_snowflake.W043", "settings.DEFAULT_AUTO_FIELD")]
    # Not HistoricalAuditedWide: its history_id_field is a SnowflakeAutoField.
    assert str(message.msg).startswith("django-simple-history gives 2 historical models")
    assert str(message.msg).endswith(
        ": checks_app.HistoricalAudited, checks_app.HistoricalAuditedByUserId."
    )
    assert "HistoricalRecords(history_id_field=SnowflakeAutoField())" in str(message.hint)
    # W040 leaves them to it: its hint (remove the field) cannot be followed.
    assert "Historical" not in " ".join(str(m.msg) for m in check_auto_field_switch())


def test_W043_silent_without_the_switch() -> None:
    installed = [*settings.INSTALLED_APPS, "simple_history", "tests.checks_app"]
    with override_settings(INSTALLED_APPS=installed):
        assert check_historical_records() == []


def test_W042_simple_historys_user_id_holding_snowflake_user_keys(project: None) -> None:
    # auth.User keeps its integer key: the IntegerField holds it.
    assert "checks_app.HistoricalAuditedByUserId.history_user_id" not in [
        _label(m.obj) for m in check_generic_relations()
    ]
    with override_settings(AUTH_USER_MODEL="checks_app.Member"):
        messages = {_label(m.obj): m for m in check_generic_relations()}
    message = messages.pop("checks_app.HistoricalAuditedByUserId.history_user_id")
    assert "holds keys of the user model checks_app.Member" in str(message.msg)
    assert "history_user_id_field=models.BigIntegerField" in str(message.hint)
    # HistoricalAuditedWide's BigIntegerField is wide enough.
    assert not [label for label in messages if "Historical" in label]


def test_W042_hint_for_an_installed_app_does_not_ask_to_edit_it(project: None) -> None:
    messages = {_label(m.obj): m for m in check_generic_relations()}
    taggit = str(messages["taggit.TaggedItem.object_id"].hint)
    assert taggit.startswith("Tag Snowflake-keyed models through a model of your own")
    assert "Make taggit.TaggedItem.object_id" not in taggit
    # The project's own column: widen it.
    assert str(messages["checks_app.Comment.object_id"].hint).startswith(
        "Make checks_app.Comment.object_id a models.PositiveBigIntegerField"
    )
