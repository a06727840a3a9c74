"""PostgreSQL-only fields for bulk_load's twin tables (tests/test_bulk_load_postgres.py).

Installed by that module alone, and only on PostgreSQL: the fields need
``django.contrib.postgres`` and the hstore extension its migration creates.
"""
