"""The catalog's outbox: publish batches not yet on Walrus and their members.

A mixin of :class:`~walrus_mem._catalog.catalog.Catalog`; callers hold ``write()``
around multi-step changes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from .._walrus.url_secrets import redact_userinfo
from .guard import CatalogPart, _guarded

__all__ = ["OutboxQueue"]


class OutboxQueue(CatalogPart):
    """Queued publish batches (``outbox``, ``outbox_items``) and queued counts."""

    @_guarded
    def outbox_batches(self, namespace: str | None = None) -> list[sqlite3.Row]:
        if namespace is None:
            return self.query("SELECT * FROM outbox ORDER BY id")
        return self.query("SELECT * FROM outbox WHERE namespace = ? ORDER BY id", (namespace,))

    @_guarded
    def outbox_payload(self, outbox_id: int) -> list[sqlite3.Row]:
        """(memory_id, version, sealed) of a batch's members still current, in id order."""
        return self.query(
            "SELECT i.memory_id, i.version, m.sealed FROM outbox_items i "
            "JOIN memories m ON m.id = i.memory_id AND m.version = i.version "
            "WHERE i.outbox_id = ? AND m.sealed IS NOT NULL ORDER BY i.memory_id",
            (outbox_id,),
        )

    @_guarded
    def queued_count(self, namespace: str | None = None) -> int:
        if namespace is None:
            row = self.query_one("SELECT count(*) FROM memories WHERE status = 'queued'")
        else:
            row = self.query_one(
                "SELECT count(*) FROM memories WHERE status = 'queued' AND namespace = ?",
                (namespace,),
            )
        return int(row[0]) if row else 0

    @_guarded
    def add_outbox_batch(self, namespace: str, members: Sequence[tuple[str, int]],
                         at: float) -> int:
        """Queue (memory id, version) pairs as one publish batch; return its id."""
        kind = "blob" if len(members) == 1 else "quilt"
        with self.write() as c:
            for mid, _ in members:
                c.execute("DELETE FROM outbox_items WHERE memory_id = ?", (mid,))
            cur = c.execute(
                "INSERT INTO outbox (namespace, kind, created_at) VALUES (?, ?, ?)",
                (namespace, kind, at),
            )
            batch_id = int(cur.lastrowid or 0)
            c.executemany(
                "INSERT INTO outbox_items (outbox_id, memory_id, version) VALUES (?, ?, ?)",
                [(batch_id, mid, version) for mid, version in members],
            )
            self._drop_empty_outbox(namespace)
            return batch_id

    @_guarded
    def split_outbox_batch(self, batch_id: int) -> list[int]:
        """Move each member of a batch into a batch of its own (same namespace, created
        now); the emptied batch goes. Returns the new batch ids."""
        with self.write():
            batch = self.outbox_batch(batch_id)
            if batch is None:
                return []
            members = [(str(r[0]), int(r[1])) for r in self.query(
                "SELECT memory_id, version FROM outbox_items WHERE outbox_id = ? "
                "ORDER BY memory_id", (batch_id,))]
            return [self.add_outbox_batch(str(batch["namespace"]), [m], time.time())
                    for m in members]

    @_guarded
    def outbox_members(self, batch_id: int) -> list[str]:
        return [str(r[0]) for r in self.query(
            "SELECT memory_id FROM outbox_items WHERE outbox_id = ? ORDER BY memory_id",
            (batch_id,))]

    def _drop_empty_outbox(self, namespace: str) -> None:
        self.conn.execute(
            "DELETE FROM outbox WHERE namespace = ? AND id NOT IN "
            "(SELECT DISTINCT outbox_id FROM outbox_items)", (namespace,),
        )

    @_guarded
    def outbox_batch(self, batch_id: int) -> sqlite3.Row | None:
        return self.query_one("SELECT * FROM outbox WHERE id = ?", (batch_id,))

    @_guarded
    def delete_outbox_batch(self, batch_id: int) -> None:
        with self.write() as c:
            c.execute("DELETE FROM outbox WHERE id = ?", (batch_id,))

    @_guarded
    def outbox_failed(self, batch_id: int, message: str) -> None:
        with self.write() as c:
            c.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?",
                (redact_userinfo(message)[:500], batch_id),  # shown by doctor, stats
            )

    @_guarded
    def outbox_count(self, namespace: str) -> int:
        row = self.query_one("SELECT count(*) FROM outbox WHERE namespace = ?", (namespace,))
        return int(row[0]) if row else 0

    @_guarded
    def drop_queued(self, namespace: str, memory_id: str) -> None:
        """Cancel a memory's pending publishes (another version replaced it)."""
        with self.write() as c:
            c.execute("DELETE FROM outbox_items WHERE memory_id = ?", (memory_id,))
            self._drop_empty_outbox(namespace)
