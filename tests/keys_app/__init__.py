"""An app whose first model is keyed by SnowflakeAutoField (tests/test_database_keys.py)."""
