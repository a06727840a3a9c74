"""``bulk_load``: unsaved instances written through the database's own bulk loader.

Every key of a Snowflake-keyed model exists before the INSERT, so nothing has to come back
from the database (no ``RETURNING``) and the rows can go through the fastest path each
backend has: PostgreSQL ``COPY ... FROM STDIN`` (binary where every column's type allows it),
MariaDB/MySQL ``LOAD DATA LOCAL INFILE`` where both client and server allow it (else a
multi-row ``INSERT``), SQLite one prepared ``executemany``.

The modules, in the order a load meets them: ``load`` (``bulk_load``: the batches, the
transaction, the errors, the choice of loader), ``plan`` (what is written: the columns and
each value's conversion), ``base`` (the loader interface), and one loader per database:
``postgresql``, ``mysql``, ``sqlite``.
"""

from __future__ import annotations

from ..exceptions import BulkLoadError
from .load import DEFAULT_BATCH_SIZE, bulk_load

__all__ = ["DEFAULT_BATCH_SIZE", "BulkLoadError", "bulk_load"]
