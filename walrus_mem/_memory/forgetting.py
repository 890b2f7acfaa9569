"""``Memory.forget`` / ``forget_all``: tombstones first (the blobs still to delete are
recorded with them, deletions.py), then the blobs deleted where nothing live is stored
in them, then a manifest when the namespace already has one."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..errors import StorageError, WalrusMemError
from ..models import ForgetReport

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["forget"]

log = logging.getLogger(__name__)


def forget(parts: Parts, ns: str, ids: list[str]) -> ForgetReport:
    """Forget ``ids`` of ``ns`` (Memory.forget / forget_all): tombstones in chunks of 500,
    then the blobs deleted where nothing live is stored in them, then a manifest when
    the namespace already has one and the epoch is known."""
    now = time.time()
    forgotten: list[str] = []
    blob_refs: dict[str, bool | None] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        with parts.lock, parts.catalog.write():
            for mid in chunk:
                blobs = parts.catalog.forget_memory(ns, mid, now)
                if blobs is None:
                    continue
                blob_refs.update(blobs)
                forgotten.append(mid)
            parts.catalog.bump_writes(ns, len(chunk))
        with parts.lock:
            parts.indexes.refresh(ns)
    with parts.lock:
        parts.catalog.scrub()
        if forgotten and parts.catalog.count(ns) == 0:
            # Nothing left: an empty rebuild is free and drops removed vectors from disk.
            info = parts.catalog.namespace(ns)
            if info is not None and info["model_id"] is not None:
                parts.indexes.rebuild(ns, str(info["model_id"]), int(info["dim"]))
    deleted, kept = parts.publisher.delete_blobs(blob_refs)
    manifest_id = None
    info = parts.catalog.namespace(ns)
    if forgotten and info is not None and info["manifest_blob_id"] is not None \
            and parts.epochs.ok_for_manifest(ns, now):
        try:
            manifest_id = parts.log.publish(ns)
        except (StorageError, WalrusMemError) as exc:
            log.warning("manifest after forget deferred to the next sync: %s", exc)
    return ForgetReport(forgotten=forgotten, deleted_blobs=deleted, kept_blobs=kept,
                        manifest_blob_id=manifest_id)
