"""The catalog's index change log: keys touched per namespace, so every process
can bring its in-memory index up to date incrementally (index.py).

A mixin of :class:`~walrus_mem._catalog.catalog.Catalog`, whose writes append the rows.
"""

from __future__ import annotations

from .guard import CatalogPart, _guarded

__all__ = ["ChangeLog"]


class ChangeLog(CatalogPart):
    """Reads and prunes the ``changes`` table."""

    @_guarded
    def max_change(self, namespace: str) -> int:
        row = self.query_one(
            "SELECT max(seq) FROM changes WHERE namespace = ?", (namespace,)
        )
        return int(row[0] or 0) if row else 0

    @_guarded
    def changes_since(self, namespace: str, seq: int) -> tuple[list[int], int]:
        """Distinct keys touched after ``seq`` and the newest seq seen."""
        rows = self.query(
            "SELECT seq, key FROM changes WHERE namespace = ? AND seq > ? ORDER BY seq",
            (namespace, seq),
        )
        if not rows:
            return [], seq
        keys = list(dict.fromkeys(int(r[1]) for r in rows))
        return keys, int(rows[-1][0])

    @_guarded
    def changes_floor(self, namespace: str) -> int:
        value = self.get_meta(f"changes_floor:{namespace}")
        return int(value) if value else 0

    @_guarded
    def prune_changes(self, namespace: str, upto: int) -> None:
        """Drop change rows up to ``upto`` (a saved index file already covers them)."""
        with self.write() as c:
            if upto <= self.changes_floor(namespace):
                return
            c.execute("DELETE FROM changes WHERE namespace = ? AND seq <= ?", (namespace, upto))
            self.set_meta(f"changes_floor:{namespace}", str(upto))
