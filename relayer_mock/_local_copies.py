"""What a store's folder holds, read for the embedded relayer's owner (walrus_mem's catalog).

The bytes of a blob, or of its quilt's patches, as the files hold them, live or expired (an
expired Blob object's file stays until a delete removes it). No HTTP, no liveness or
blocklist check, no counters: the owner reads back what it stored and checks the bytes
against its own digest (the files are plain files anyone with access to them can change).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ._store_types import BlobUnavailable

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["local_copies", "local_copy"]


def local_copy(store: Store, blob_id: str, patch_id: str | None = None) -> bytes | None:
    """A blob's bytes, or one of its quilt's patches; None when the file, the patch or
    the quilt's header is gone or unreadable."""
    try:
        if patch_id is None:
            with open(store.blob_path(blob_id), "rb") as handle:
                return handle.read()
        record = store.get_patch_by_id(patch_id)
        if record is None or record.quilt_id != blob_id:
            return None
        with open(store.blob_path(blob_id), "rb") as handle:
            handle.seek(record.offset)
            data = handle.read(record.length)
    except (OSError, ValueError, sqlite3.Error, BlobUnavailable):
        return None
    return data if len(data) == record.length else None


def local_copies(store: Store, blob_id: str, patch_ids: list[str]) -> dict[str, bytes]:
    """:func:`local_copy` of many patches of one quilt, its file read once: patch id ->
    bytes, for those found."""
    try:
        index = store.quilt_index(blob_id)
        if index is None:
            return {}
        with open(store.blob_path(blob_id), "rb") as handle:
            data = handle.read()
    except (OSError, ValueError, sqlite3.Error, BlobUnavailable):
        return {}
    out: dict[str, bytes] = {}
    for patch_id in patch_ids:
        try:
            record = index.by_patch_id(patch_id)
        except (ValueError, KeyError):
            record = None
        if record is not None and record.offset + record.length <= len(data):
            out[patch_id] = data[record.offset:record.offset + record.length]
    return out
