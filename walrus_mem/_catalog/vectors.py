"""The ``memories.vector`` column: empty when the memory's sealed copy carries the vector.

Since issue 28 a fact's float16 vector travels inside its sealed envelope, and the
catalog keeps that envelope (``sealed``) for sync and extend. Keeping the same 768
bytes again in ``vector`` cost a quarter of a short fact's row, and two rows no longer
fitted a page. So a row stores an empty ``vector`` when its sealed copy carries exactly
that vector (checked when the row is written; a restore or pull, which took the vector
from that copy a moment before, only checks that a key for it is held here), and a read
takes it from the sealed copy (AEAD only: about 15 µs a row, _recall/carried.py
``SealedVectors``). A vector the sealed
copy does not carry (a fact sealed without one, another model's, a re-embedding) is kept
in the column as before.

The source needs the namespace keys, which the catalog does not hold: Memory installs
one (``Catalog.vector_source``). Without it (a catalog opened alone) rows are written
with their vectors, and a row whose vector is in its sealed copy cannot be read
(:class:`LocalStoreError`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Final

from ..errors import LocalStoreError
from .held import LOCATOR_SQL, HeldCopies, locator_of, resolve_many

__all__ = ["VECTOR_COLUMNS", "VectorConnection", "VectorSource", "resolve_vectors",
           "stored_vector"]

VectorSource = Callable[[str, bytes], "bytes | None"]
"""(namespace, sealed envelope) -> the float16 vector bytes it carries, or None."""

VECTOR_COLUMNS: Final = (
    f"vector, CASE WHEN length(vector) = 0 THEN coalesce(sealed, {LOCATOR_SQL}) END")
"""The two columns a read of vectors selects: the sealed copy only where it is needed, or
where the embedded relayer holds it instead (held.py), a locator of it."""


class VectorConnection(sqlite3.Connection):
    """The catalog's connection, carrying the vector source (so code that reads through
    the connection, e.g. an index rebuild's snapshot, resolves vectors too)."""

    vector_source: VectorSource | None = None
    sealed_source: HeldCopies | None = None  # held.py: copies the embedded relayer holds


def stored_vector(conn: sqlite3.Connection, namespace: str, sealed: bytes | None,
                  vector: bytes, *, carried: bool = False) -> bytes:
    """What ``vector`` keeps for a row with ``sealed``: empty when the sealed copy
    carries exactly these bytes, else the bytes.

    ``carried``: the caller took ``vector`` from ``sealed`` itself, a moment ago, having
    opened it with the namespace's key (a restore or pull). Then the source is not asked
    to open it again, only whether it holds a key for it (``holds_key``: the fingerprint,
    no AEAD), so a read can open it later; without that answer it opens it as for any
    other writer."""
    source = getattr(conn, "vector_source", None)
    if source is None or not sealed or not vector:
        return vector
    if carried:
        holds_key = getattr(source, "holds_key", None)
        if holds_key is not None and holds_key(namespace, bytes(sealed)):
            return b""
    return b"" if source(namespace, bytes(sealed)) == bytes(vector) else vector


def resolve_vectors(conn: sqlite3.Connection, namespace: str,
                    rows: Sequence[tuple[bytes, bytes | None]]) -> list[bytes]:
    """The vector bytes of rows read as :data:`VECTOR_COLUMNS` (vector, sealed-or-null)."""
    source = getattr(conn, "vector_source", None)
    # sealed copies the embedded relayer holds (held.py): read together, checked
    located = {i: held for i, (vector, sealed) in enumerate(rows)
               if not vector and sealed and (held := locator_of(bytes(sealed))) is not None}
    fetched = dict(zip(located, resolve_many(conn, list(located.values())), strict=True))
    out: list[bytes] = []
    for i, (vector, sealed) in enumerate(rows):
        if vector:
            out.append(bytes(vector))
            continue
        if i in located:
            sealed = fetched[i]
            if sealed is None:
                raise LocalStoreError(
                    "a memory's vector is kept in its sealed copy, which the embedded "
                    "relayer's folder no longer holds intact: walrus-mem repair seals it "
                    "again")
        raw = source(namespace, bytes(sealed)) if source is not None and sealed else None
        if not raw:
            raise LocalStoreError(
                "a memory's vector is kept in its sealed copy, which cannot be read here "
                + ("(no namespace key)" if source is None else
                   "(this process has no key for the namespace, or the copy is damaged: "
                   "walrus-mem doctor tells which)"))
        out.append(raw)
    return out
