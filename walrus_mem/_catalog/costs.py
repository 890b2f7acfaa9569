"""The catalog's ledger of what stores cost (``store_costs``): one row per successful
store, by namespace and purpose (``facts``, ``log`` for manifests and their pages,
``renewal`` for extend/sync renewals), with the units the store answer says were paid
(walrus_mem/_walrus/cost.py). ``Memory.stats()`` sums it.

The table is made on first use (``CREATE TABLE IF NOT EXISTS``): a catalog written by
an older walrus_mem simply has no costs yet, and older versions ignore the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from .._walrus.cost import StoreCost

__all__ = ["PURPOSES", "cost_sink", "cost_summary", "record_cost"]

PURPOSES: Final = ("facts", "log", "renewal", "other")

_TABLE: Final = """
CREATE TABLE IF NOT EXISTS store_costs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    namespace TEXT,
    purpose TEXT NOT NULL,
    blob_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    files INTEGER NOT NULL,
    sent_bytes INTEGER NOT NULL,
    encoded_length INTEGER NOT NULL,
    epochs INTEGER NOT NULL,
    units INTEGER NOT NULL,
    frost INTEGER,
    newly_created INTEGER NOT NULL
)
"""


def record_cost(catalog: Any, namespace: str | None, purpose: str, cost: StoreCost) -> None:
    """Add one store to the ledger (in its own write transaction, or the caller's)."""
    with catalog.write() as c:
        c.execute(_TABLE)
        c.execute(
            "INSERT INTO store_costs (at, namespace, purpose, blob_id, kind, files, "
            "sent_bytes, encoded_length, epochs, units, frost, newly_created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (time.time(), namespace, purpose if purpose in PURPOSES else "other",
             cost.blob_id, cost.kind, cost.files, cost.sent_bytes, cost.encoded_length,
             cost.epochs, cost.units, cost.frost, int(cost.newly_created)))


def cost_sink(catalog: Any, lock: Any) -> Callable[[str | None, str, StoreCost], None]:
    """A :data:`~walrus_mem._walrus.cost.CostSink` recording into ``catalog``."""

    def sink(namespace: str | None, purpose: str, cost: StoreCost) -> None:
        with lock:
            record_cost(catalog, namespace, purpose, cost)

    return sink


def cost_summary(catalog: Any, namespace: str) -> dict[str, int]:
    """Per purpose: ``<purpose>_units``, ``<purpose>_stores``, ``<purpose>_files`` and
    ``<purpose>_frost`` of ``namespace``; plus ``units_per_epoch`` of the blobs its live
    memories are in now (what renewing them for one epoch would take, as stored)."""
    out = {f"{p}_{k}": 0 for p in PURPOSES for k in ("units", "stores", "files", "frost")}
    out["units_per_epoch"] = 0
    try:
        rows = catalog.query(
            "SELECT purpose, sum(units), count(*), sum(files), sum(coalesce(frost, 0)) "
            "FROM store_costs WHERE namespace = ? GROUP BY purpose", (namespace,))
        live = catalog.query_one(
            "SELECT sum(u) FROM (SELECT max((s.encoded_length + 1048575) / 1048576) AS u "
            "FROM store_costs s WHERE s.blob_id IN (SELECT DISTINCT blob_id FROM memories "
            "WHERE namespace = ? AND status = 'published' AND blob_id IS NOT NULL) "
            "GROUP BY s.blob_id)", (namespace,))
    except Exception as exc:  # sqlite3 / LocalStoreError: no ledger yet
        if "no such table" in str(exc):
            return out
        raise
    for purpose, units, stores, files, frost in rows:
        out[f"{purpose}_units"] = int(units or 0)
        out[f"{purpose}_stores"] = int(stores or 0)
        out[f"{purpose}_files"] = int(files or 0)
        out[f"{purpose}_frost"] = int(frost or 0)
    out["units_per_epoch"] = int(live[0] or 0) if live is not None else 0
    return out
