"""The catalog's idempotency keys and dedupe hashes: which memory already holds a text,
and what a remember() with a used idempotency key answered.

A mixin of :class:`~walrus_mem._catalog.catalog.Catalog`. Two memories of one text
written on two machines both stay: the second holds a *twin* slot
(:func:`twin_slot`, ``<hash>:<id>``) until the plain holder is forgotten.
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
from collections.abc import Sequence
from typing import Final, Protocol

from .guard import CatalogPart, _guarded
from .reads import MEMORY_COLUMNS

__all__ = ["DEDUPE_BYTES", "Dedupe", "dedupe_key", "plain_dedupe_hash", "stored_dedupe_hash",
           "twin_slot"]

DEDUPE_BYTES: Final = 16
"""Bytes of a text's keyed dedupe hash (``NamespaceKeys.dedupe_hash``: 32, as 64 hex
characters) that the catalog keeps, as 22 characters of unpadded base64url: its first 128
bits. Two texts of one namespace then share a slot with probability about n² / 2¹²⁹
(10⁻²⁷ at a million memories; the hash is keyed, so nobody without the namespace's key
can aim at a collision), and each memory costs 84 B less, 42 in its row and 42 in UNIQUE
(namespace, dedupe_hash) (issue 28: the 1M data dir; schema 11). The base64url alphabet
has no ``:``, which a twin's slot (``<hash>:<id>``) puts after the hash."""


def stored_dedupe_hash(full: str) -> str:
    """What the ``dedupe_hash`` column keeps of a text's keyed hash (64 hex characters):
    :data:`DEDUPE_BYTES` of it in base64url. A value that is not 64 hex characters (no
    keyed hash) is kept as it is."""
    if len(full) != 64:
        return full
    try:
        raw = bytes.fromhex(full)[:DEDUPE_BYTES]
    except (ValueError, binascii.Error):
        return full
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")



class _KeyedHash(Protocol):
    def dedupe_hash(self, text: str) -> str: ...


def dedupe_key(keys: _KeyedHash, text: str) -> str:
    """The ``dedupe_hash`` a memory of ``text`` gets with ``keys`` (a namespace's
    ``NamespaceKeys``): its keyed hash as the catalog keeps it."""
    return stored_dedupe_hash(keys.dedupe_hash(text))


class Dedupe(CatalogPart):
    """Idempotency keys (``idempotency``) and the ``dedupe_hash`` column of ``memories``."""

    @_guarded
    def idempotency_result(self, namespace: str, key: str) -> str | None:
        row = self.query_one(
            "SELECT result FROM idempotency WHERE namespace = ? AND key = ?", (namespace, key)
        )
        return None if row is None else str(row[0])

    def claim_idempotency(self, namespace: str, key: str, at: float) -> None:
        """Reserve an idempotency key (sqlite3.IntegrityError if it was used before)."""
        with self.write() as c:
            c.execute(
                "INSERT INTO idempotency (namespace, key, result, at) VALUES (?, ?, '{}', ?)",
                (namespace, key, at),
            )

    @_guarded
    def save_idempotency(self, namespace: str, key: str, result: str) -> None:
        with self.write() as c:
            c.execute(
                "UPDATE idempotency SET result = ? WHERE namespace = ? AND key = ?",
                (result, namespace, key),
            )

    @_guarded
    def ids_by_dedupe_hash(self, namespace: str, hashes: Sequence[str]) -> dict[str, str]:
        """dedupe hash -> memory id for the hashes held by live memories."""
        rows = self.query(
            "SELECT dedupe_hash, id FROM memories WHERE namespace = ? AND dedupe_hash IN "
            "(SELECT value FROM json_each(?))",
            (namespace, json.dumps(list(hashes))),
        )
        return {str(r[0]): str(r[1]) for r in rows}

    @_guarded
    def dedupe_slot(self, namespace: str, dedupe_hash: str, memory_id: str) -> str:
        """The ``dedupe_hash`` column value for ``memory_id`` holding text of ``dedupe_hash``.

        The plain hash, unless another live memory holds it: then ``<hash>:<id>``, a
        *twin*. Two memories of one text written on two machines both stay (a merge
        never forgets one for the other: docs/sync.md); remember() dedupes to the
        plain holder, recall shows one of them, and a twin takes the plain hash back
        when its holder is forgotten (:meth:`forget_memory`).
        """
        row = self.query_one(
            "SELECT id FROM memories WHERE namespace = ? AND dedupe_hash = ?",
            (namespace, dedupe_hash))
        if row is None or str(row[0]) == memory_id:
            return dedupe_hash
        return twin_slot(dedupe_hash, memory_id)

    @_guarded
    def by_dedupe_hash(self, namespace: str, dedupe_hash: str) -> sqlite3.Row | None:
        return self.query_one(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = ? AND dedupe_hash = ?",
            (namespace, dedupe_hash),
        )


def twin_slot(dedupe_hash: str, memory_id: str) -> str:
    """The ``dedupe_hash`` column of a twin (:meth:`Catalog.dedupe_slot`)."""
    return f"{plain_dedupe_hash(dedupe_hash)}:{memory_id}"


def plain_dedupe_hash(value: str) -> str:
    """The text's dedupe hash from a ``dedupe_hash`` column value (a twin's included)."""
    return value.split(":", 1)[0]
