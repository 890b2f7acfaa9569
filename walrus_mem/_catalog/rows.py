"""Catalog rows to public records, and the view metadata filters match on."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any, Final

from ..models import MemoryRecord

__all__ = ["expired", "loads_metadata", "record_from_row", "view_of_row"]

_VALIDATE_RECORD: Final = MemoryRecord.__pydantic_validator__.validate_python


def loads_metadata(text: str | None) -> dict[str, Any]:
    if not text or text == "{}":  # most memories carry none
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def record_from_row(row: sqlite3.Row, *, deduplicated: bool = False) -> MemoryRecord:
    expires = row["expires_at"]
    # the model's validator on a dict: what the keyword constructor and model_validate
    # run, without their Python-level frames (recall builds a record per hit)
    record: MemoryRecord = _VALIDATE_RECORD({
        "id": row["id"],
        "namespace": row["namespace"],
        "text": row["text"],
        "metadata": loads_metadata(row["metadata"]),
        "category": row["category"],
        "importance": row["importance"],
        "created_at": datetime.fromtimestamp(row["created_at"], tz=UTC),
        "updated_at": datetime.fromtimestamp(row["updated_at"], tz=UTC),
        "expires_at": None if expires is None else datetime.fromtimestamp(expires, tz=UTC),
        "version": row["version"],
        "status": row["status"],
        "blob_id": row["blob_id"],
        "quilt_patch_id": row["quilt_patch_id"],
        "end_epoch": row["end_epoch"],
        "deduplicated": deduplicated,
    })
    return record


def view_of_row(row: sqlite3.Row) -> dict[str, Any]:
    """What filters see: record fields (timestamps as unix seconds) + metadata."""
    return {
        "id": row["id"],
        "text": row["text"],
        "category": row["category"],
        "importance": row["importance"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "expires_at": row["expires_at"],
        "version": row["version"],
        "status": row["status"],
        "blob_id": row["blob_id"],
        "quilt_patch_id": row["quilt_patch_id"],
        "end_epoch": row["end_epoch"],
        "metadata": loads_metadata(row["metadata"]),
    }


def expired(row: sqlite3.Row, now: float) -> bool:
    return row["expires_at"] is not None and row["expires_at"] <= now
