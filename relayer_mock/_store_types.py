"""What the mock's :class:`~relayer_mock._store.Store` hands out and raises: Sui Blob
objects, store outcomes, blob and quilt-patch records, staged bytes, and its errors.

``relayer_mock._store`` imports them back, so they stay importable from there too.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


class BlobUnavailable(LookupError):
    """No live (certified, unexpired, undeleted) Blob object holds this blob id."""


class BlobBlocked(PermissionError):
    """The blob id is on the mock's blocklist (HTTP 451)."""


class NotDeletable(PermissionError):
    """A permanent Blob object cannot be deleted before it expires."""


@dataclass(frozen=True)
class BlobObject:
    """One Sui ``Blob`` object as the mock records it."""

    object_id: str
    blob_id: str
    registered_epoch: int
    certified_epoch: int | None
    start_epoch: int
    end_epoch: int
    storage_id: str
    storage_size: int
    deletable: bool
    owner: str
    shared_object_id: str | None
    tx_digest: str
    event_seq: str
    created_at: float
    deleted_at: float | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> BlobObject:
        return cls(
            object_id=row["object_id"],
            blob_id=row["blob_id"],
            registered_epoch=row["registered_epoch"],
            certified_epoch=row["certified_epoch"],
            start_epoch=row["start_epoch"],
            end_epoch=row["end_epoch"],
            storage_id=row["storage_id"],
            storage_size=row["storage_size"],
            deletable=bool(row["deletable"]),
            owner=row["owner"],
            shared_object_id=row["shared_object_id"],
            tx_digest=row["tx_digest"],
            event_seq=row["event_seq"],
            created_at=row["created_at"],
            deleted_at=row["deleted_at"],
        )


@dataclass(frozen=True)
class StoreOutcome:
    """Result of a store: a new Blob object, or the matching certified permanent one."""

    kind: Literal["newlyCreated", "alreadyCertified"]
    blob_id: str
    size: int
    encoded_length: int
    epochs_ahead: int
    current_epoch: int
    obj: BlobObject


@dataclass(frozen=True)
class BlobInfo:
    blob_id: str
    size: int
    is_quilt: bool
    path: Path
    first_stored_at: float = 0.0


@dataclass(frozen=True)
class PatchRecord:
    quilt_id: str
    identifier: str
    patch_id: str
    offset: int
    length: int
    tags: dict[str, str]


@dataclass
class StagedBlob:
    """Bytes ready to be registered: in memory, or in a fsynced temp file (quilts)."""

    blob_id: str
    size: int
    data: bytes | None = None
    tmp_path: Path | None = None
