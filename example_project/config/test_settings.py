"""The example's test settings: the recommended ones for a project's test suite.

A fixed worker ID needs no lease, so tests never wait on the WorkerNode table (docs: "Testing").
"""

from .settings import *  # noqa: F403

SNOWFLAKE = {"WORKER_ALLOCATOR": "static", "WORKER_ID": 0}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
