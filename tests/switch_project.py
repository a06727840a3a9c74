"""A project with the one-line switch: ``DEFAULT_AUTO_FIELD = SnowflakeAutoField``.

``python -m tests.switch_project`` creates its own test database (``migrate`` from scratch),
puts a user into a group and gives permissions, directly and through the admin's user change
form, prints what the auth tables hold as JSON, and drops the database. Run by
tests/test_database_keys.py in a subprocess: DEFAULT_AUTO_FIELD cannot change after the apps
are loaded. contrib.auth pins AutoField at run time, while the migration state built its
many-to-many tables with the project's DEFAULT_AUTO_FIELD: Django inserts their rows without
an id, and the database's Snowflake function must supply it.
"""

from __future__ import annotations

import json
import os

from tests.settings import *  # noqa: F403

DEFAULT_AUTO_FIELD = "django_snowflake.fields.SnowflakeAutoField"
# The suite's apps but its test app: only contrib's and the package's tables, from scratch.
INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "tests.testapp"]  # noqa: F405
ROOT_URLCONF = "tests.switch_project"
SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 1}


def __getattr__(name: str) -> object:
    # This module is the settings and the URLconf: the URLs are built when Django asks.
    if name == "urlpatterns":
        from django.contrib import admin
        from django.urls import path

        return [path("admin/", admin.site.urls)]
    raise AttributeError(name)


def main() -> dict[str, object]:
    from django.contrib.auth.models import Group, Permission, User
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from django_snowflake import decode

    setup_test_environment()
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        group = Group.objects.create(name="editors")
        change_user = Permission.objects.get(codename="change_user")
        view_group = Permission.objects.get(codename="view_group")
        group.permissions.add(view_group)
        bob = User.objects.create_user("bob")
        bob.groups.add(group)
        bob.user_permissions.add(change_user)

        admin = User.objects.create_superuser("admin", "a@example.com", "pw")
        carol = User.objects.create_user("carol")
        client = Client()
        client.force_login(admin)
        response = client.post(
            f"/admin/auth/user/{carol.pk}/change/",
            {
                "username": "carol",
                "is_active": "on",
                "groups": [group.pk],
                "user_permissions": [change_user.pk],
                "date_joined_0": "2026-01-01",
                "date_joined_1": "00:00:00",
            },
        )
        through = [User.groups.through, User.user_permissions.through, Group.permissions.through]
        keys = [pk for model in through for pk in model.objects.values_list("pk", flat=True)]
        return {
            "vendor": connection.vendor,
            "admin_status": response.status_code,
            "bob": [
                sorted(bob.groups.values_list("name", flat=True)),
                bob.has_perm("auth.view_group"),
                bob.has_perm("auth.change_user"),
            ],
            "carol": [
                sorted(carol.groups.values_list("name", flat=True)),
                sorted(Permission.objects.filter(user=carol).values_list("codename", flat=True)),
            ],
            "rows": [model.objects.count() for model in through],
            "keys_are_snowflakes": all(decode(pk).timestamp.year >= 2025 for pk in keys),
        }
    finally:
        connection.creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)


if __name__ == "__main__":
    import django

    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.switch_project"
    django.setup()
    print(json.dumps(main()))
