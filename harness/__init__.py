"""The subprocess harness that ``tests/``, ``stress/`` and ``benchmarks/`` share.

``processes``: the parent's side (start a child interpreter's output reader, expect its
report lines, reap what is still running, read the IDs it wrote); ``child``: the child's
side (report a line, wait for a barrier file, write IDs, claim a slot);
``private_server``: PostgreSQL and MariaDB servers that a test or a stress run may kill.
Nothing here imports Django at module level, so a child imports it before ``django.setup()``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository: the working directory of every child interpreter."""
