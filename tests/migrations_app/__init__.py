"""An app that only exists in migrations: auto-increment keys (0001) switched to Snowflake
keys (0002), for tests/test_migrating.py. It is installed by that test alone."""
