"""Stress scenarios for django_snowflake: ``python -m stress [--quick] [--db ...] [--scenario ...]``.

* ``torture``: many processes and threads generate IDs while a chaos driver forks, kills,
  pauses, steps clocks and restarts the database; every ID is checked at the end.
* ``servers``: the example shop under gunicorn (``--preload``) and uvicorn, loaded over HTTP.
* ``claims``: hundreds of concurrent claimers against one coordination database.

The docs (``docs/stress.rst``) describe each one and this machine's results.
"""
