"""How the app is wired: checks bound, settings judged once, allocators judging themselves,
the runtime rebuilding on its own signal, construction errors pointing at ``check``."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from pkgutil import iter_modules
from typing import Any

import pytest
from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import django_snowflake.checks
from django_snowflake import apps as snowflake_apps
from django_snowflake import conf, runtime
from django_snowflake.allocators.base import BaseAllocator
from django_snowflake.allocators.static import HostnameAllocator, StaticAllocator
from django_snowflake.checks import check_settings

STATIC = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 1}


class MyStatic(StaticAllocator):
    """A project's allocator that adds nothing: it must inherit the static checks."""


class MyHostname(HostnameAllocator):
    pass


class Judging(StaticAllocator):
    """Extends the checks as Django's Field.check() is extended."""

    @classmethod
    def check(cls, settings: Any, layout: Any, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(settings, layout, **kwargs), checks.Error("x", id="myapp.E001")]


class Refusing(BaseAllocator):
    """Passes the checks, and refuses the settings in its constructor."""

    def __init__(self, *args: Any) -> None:
        raise ValueError("no slot for you")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SNOWFLAKE_WORKER_ID", raising=False)


@pytest.mark.django_db  # Django 6.1's JSONField check asks the database what it supports
def test_checks_are_bound() -> None:
    # Django keeps the checks of check --deploy apart.
    registry = checks.registry.registry
    registered = registry.registered_checks | registry.deployment_checks
    for check, tags in snowflake_apps.CHECKS:
        assert check in registered, check.__name__
        assert set(getattr(check, "tags", ())) == set(tags), check.__name__
    # And they run: manage.py check reports the settings, the models and the admin.
    with override_settings(SNOWFLAKE={**STATIC, "LAYOUT": "nope"}):
        assert "django_snowflake.E003" in [m.id for m in checks.run_checks()]


def test_every_check_of_the_package_is_bound() -> None:
    # A check written into a module of django_snowflake.checks but never added to CHECKS
    # would never run.
    package = django_snowflake.checks
    modules = [
        package,
        *(import_module(f"{package.__name__}.{m.name}") for m in iter_modules(package.__path__)),
    ]
    written = {
        name
        for module in modules
        for name, value in vars(module).items()
        if name.startswith("check_") and callable(value)
    }
    assert written == {check.__name__ for check, _tags in snowflake_apps.CHECKS}


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How often the settings are judged."""
    calls: list[int] = []
    real = django_snowflake.checks.check_settings

    def counting(*args: Any, **kwargs: Any) -> list[checks.CheckMessage]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(django_snowflake.checks, "check_settings", counting)
    yield calls


def test_settings_are_judged_once_per_setup(counted: list[int]) -> None:
    with override_settings(SNOWFLAKE=STATIC):
        apps.get_app_config("django_snowflake").ready()
        assert runtime._generator is not None  # built from the verdict
        runtime.get_generator().next_id()
        assert len(counted) == 1
        # A reset (fixture teardown, fork) keeps the verdict; only a new setting is judged.
        runtime.reset()
        runtime.get_generator()
        assert len(counted) == 1
    with override_settings(SNOWFLAKE={**STATIC, "WORKER_ID": 2}):
        assert runtime.get_generator().worker_id is None  # not claimed yet: built lazily
        assert len(counted) == 2


def test_runtime_rebuilds_on_a_settings_change_itself() -> None:
    with override_settings(SNOWFLAKE=STATIC):
        first = runtime.get_generator()
        with override_settings(SNOWFLAKE={**STATIC, "LAYOUT": "sonyflake"}):
            assert runtime.get_generator() is not first
            assert runtime.get_generator().layout.time_bits == 39
            assert conf.get_layout().time_bits == 39
        assert runtime.get_generator().layout.time_bits == 41


@pytest.mark.parametrize(
    ("snowflake", "expected"),
    [
        ({"WORKER_ALLOCATOR": f"{__name__}.MyStatic"}, ["django_snowflake.E031"]),
        ({"WORKER_ALLOCATOR": f"{__name__}.MyStatic", "WORKER_ID": "3"}, ["django_snowflake.E032"]),
        ({"WORKER_ALLOCATOR": f"{__name__}.MyStatic", "WORKER_ID": 3}, []),
        ({"WORKER_ALLOCATOR": f"{__name__}.MyHostname"}, ["django_snowflake.E038"]),
        (
            {"WORKER_ALLOCATOR": f"{__name__}.Refusing", "DATACENTER_ID": 1},
            ["django_snowflake.E033"],
        ),
    ],
)
def test_a_subclass_inherits_its_allocators_checks(
    monkeypatch: pytest.MonkeyPatch, snowflake: dict[str, Any], expected: list[str]
) -> None:
    monkeypatch.setenv("HOSTNAME", "web")
    with override_settings(SNOWFLAKE=snowflake):
        assert [m.id for m in check_settings()] == expected
        if expected:
            apps.get_app_config("django_snowflake").ready()  # never raises
            with pytest.raises(ImproperlyConfigured, match=expected[0]):
                runtime.get_generator()


def test_checks_ask_the_allocator() -> None:
    allocator = {"WORKER_ALLOCATOR": f"{__name__}.Judging"}
    with override_settings(SNOWFLAKE={**allocator, "WORKER_ID": 1}):
        assert [m.id for m in check_settings()] == ["myapp.E001"]
    with override_settings(SNOWFLAKE=allocator):
        assert [m.id for m in check_settings()] == ["django_snowflake.E031", "myapp.E001"]


def test_build_turns_a_constructor_error_into_improperly_configured() -> None:
    with override_settings(SNOWFLAKE={"WORKER_ALLOCATOR": f"{__name__}.Refusing"}):
        assert check_settings() == []
        apps.get_app_config("django_snowflake").ready()  # never raises
        with pytest.raises(
            ImproperlyConfigured, match=r"no slot for you.*manage\.py check"
        ) as info:
            runtime.get_generator()
        assert isinstance(info.value.__cause__, ValueError)
