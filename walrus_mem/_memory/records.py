"""A fact as the write path holds it: the validated input, and the plaintext sealed
into its blob (one definition, shared by Memory's writes and repair's re-seal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Item", "Replay", "fact_record"]


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
