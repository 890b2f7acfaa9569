"""A fact as the write path holds it: the validated input, and the plaintext sealed
into its blob (one definition, shared by Memory's writes and repair's re-seal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._recall.carried import FIELD, VectorIdentity, vector_field
from ..envelope import seal
from ..errors import PayloadTooLarge
from ..keys import NamespaceKeys

__all__ = ["Item", "Replay", "fact_record", "seal_fact"]


@dataclass
class Item:
    """A validated input fact."""

    index: int
    text: str
    metadata: dict[str, Any]
    category: str | None
    importance: float
    expires_at: float | None
    dedupe_hash: str = ""
    memory_id: str | None = None  # keep this id (repair salvage), else a new one


class Replay(Exception):
    """The idempotency key was used before (internal control flow)."""


def fact_record(item_id: str, version: int, text: str, metadata: dict[str, Any],
                category: str | None, importance: float, created_at: float,
                updated_at: float, expires_at: float | None) -> dict[str, Any]:
    """The plaintext sealed into a fact blob (the namespace name is not in it)."""
    return {
        "id": item_id,
        "kind": "fact",
        "format": 1,
        "version": version,
        "text": text,
        "metadata": metadata,
        "category": category,
        "importance": importance,
        "created_at": created_at,
        "updated_at": updated_at,
        "expires_at": expires_at,
    }


def seal_fact(keys: NamespaceKeys, record: dict[str, Any], *, max_plaintext: int,
              ident: VectorIdentity | None = None,
              vector: npt.NDArray[np.float32] | bytes | None = None) -> bytes:
    """Seal a fact record with its vector inside (_recall/carried.py) when the embedder
    names its weights; a fact too large to carry it too is sealed without (a restore
    re-embeds that one)."""
    if ident is not None and vector is not None:
        try:
            return seal(keys, {**record, FIELD: vector_field(ident, vector)},
                        max_plaintext=max_plaintext)
        except PayloadTooLarge:
            pass
    return seal(keys, record, max_plaintext=max_plaintext)
