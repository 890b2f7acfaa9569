"""Memory's upkeep: what expires and its extension (re-publishing the same sealed
bytes), re-embedding with another model, compaction of local files, and stats."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._catalog.catalog import vector_to_blob
from .._catalog.costs import cost_summary
from .._catalog.rows import record_from_row
from ..errors import EpochUnknown, InvalidInput, RestoreIncomplete, RotationIncomplete, StorageError
from ..models import ExtendReport, MemoryRecord, MemoryStats, from_timestamp
from .inputs import validate_memory_id
from .manifest_reclaim import reclaim_manifests
from .renewal import republish

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["compact", "expiring", "extend", "reindex", "stats"]

log = logging.getLogger(__name__)


def extend(parts: Parts, ns: str, memory_ids: Sequence[str] | None,
           epochs: int | None) -> ExtendReport:
    """Memory.extend of ``ns`` (validated), as its doc says."""
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int)
                               or not 1 <= epochs <= 53):
        raise InvalidInput("epochs must be an integer between 1 and 53")
    if memory_ids is None:
        ids = parts.catalog.memory_ids(ns, published_only=True)
    else:
        if isinstance(memory_ids, str):
            memory_ids = [memory_ids]
        ids = [validate_memory_id(m) for m in memory_ids]
    started = time.time()
    report = republish(parts, ns, ids, epochs)
    if report.extended and parts.epochs.ok_for_manifest(ns, started):
        try:
            parts.log.publish(ns)
        except (StorageError, RestoreIncomplete, RotationIncomplete) as exc:
            log.info("manifest after extend deferred: %s", exc)
    return report


def reindex(parts: Parts, ns: str) -> int:
    """Memory.reindex of ``ns`` (validated): re-embed every memory; the count."""
    parts.keys.authorize(ns)  # it reads every plaintext of the namespace
    emb = parts.embedding.embedder
    done = 0
    last = 0
    while True:
        rows = parts.catalog.texts_after(ns, last)
        if not rows:
            break
        vectors = parts.embedding.embed([str(r["text"]) for r in rows])
        with parts.lock:
            parts.catalog.set_vectors([(vector_to_blob(v), int(r["key"]))
                                       for r, v in zip(rows, vectors, strict=True)])
        done += len(rows)
        last = int(rows[-1]["key"])
    with parts.lock:
        parts.catalog.ensure_namespace(ns, None)
        parts.catalog.set_model(ns, emb.model_id, emb.dim)
        parts.indexes.rebuild(ns, emb.model_id, emb.dim)
    return done


def compact(parts: Parts, ns: str) -> None:
    """Memory.compact of ``ns`` (validated)."""
    with parts.lock:
        info = parts.catalog.namespace(ns)
        if info is not None and info["model_id"] is not None:
            parts.indexes.rebuild(ns, str(info["model_id"]), int(info["dim"]))
        reclaim_manifests(parts, ns)  # superseded ones, embedded relayer only
        parts.catalog.scrub()
        parts.catalog.vacuum()


def stats(parts: Parts, ns: str) -> MemoryStats:
    """Memory.stats of ``ns`` (validated)."""
    counts = parts.catalog.stats_counts(ns)
    info = parts.catalog.namespace(ns)
    index_path = parts.indexes.path_for(ns)
    loaded = parts.indexes.loaded(ns)
    build = parts.indexes.build_progress(ns)
    catalog_bytes = sum(
        p.stat().st_size for p in parts.data_dir.glob("catalog.sqlite3*") if p.exists()
    )
    return MemoryStats(
        namespace=ns,
        memories=counts["memories"],
        published=counts["published"],
        queued=counts["queued"],
        forgotten=counts["forgotten"],
        text_bytes=counts["text_bytes"],
        sealed_bytes=counts["sealed_bytes"],
        index_vectors=len(loaded) if loaded is not None else counts["memories"],
        index_path=index_path,
        index_bytes=index_path.stat().st_size if index_path.exists() else 0,
        index_pending=build["pending"],
        index_building=build["building"],
        catalog_path=parts.catalog.path,
        catalog_bytes=catalog_bytes,
        model_id=None if info is None else info["model_id"],
        dim=None if info is None else info["dim"],
        key_fingerprint=None if info is None else info["key_fingerprint"],
        manifest_blob_id=None if info is None else info["manifest_blob_id"],
        manifest_seq=0 if info is None else int(info["manifest_seq"]),
        manifest_at=None if info is None else from_timestamp(info["manifest_at"]),
        outbox_batches=counts["outbox_batches"],
        current_epoch=parts.epochs.clock.current(),
        embedded=parts.settings.embedded and parts.publisher.injected_walrus is None,
        data_dir=parts.data_dir,
        **_cost_fields(parts, ns),
    )


def _cost_fields(parts: Parts, ns: str) -> dict[str, Any]:
    """MemoryStats' cost figures from the catalog's store_costs ledger."""
    c = cost_summary(parts.catalog, ns)
    total = sum(c[f"{p}_units"] for p in ("facts", "log", "renewal", "other"))
    facts = c["facts_files"]
    return {
        "storage_units": total,
        "fact_units": c["facts_units"],
        "log_units": c["log_units"],
        "renewal_units": c["renewal_units"],
        "stores": sum(c[f"{p}_stores"] for p in ("facts", "log", "renewal", "other")),
        "facts_stored": facts,
        "units_per_1000_facts": (round((c["facts_units"] + c["log_units"]) * 1000 / facts, 1)
                                 if facts else None),
        "renewal_units_per_epoch": c["units_per_epoch"],
        "renewal_estimate_units": c["units_per_epoch"] * parts.settings.epochs,
    }


def expiring(parts: Parts, within_epochs: int, namespace: str | None,
             probe: bool) -> list[MemoryRecord]:
    """Memory.expiring, ``namespace`` validated (None: every namespace)."""
    if isinstance(within_epochs, bool) or not isinstance(within_epochs, int) \
            or within_epochs < 0:
        raise InvalidInput("within_epochs must be an integer >= 0")
    ns = namespace
    if ns is not None:
        parts.keys.authorize(ns)
    if not parts.catalog.has_end_epochs(ns):
        return []  # nothing published: nothing can expire, whatever the epoch
    current, known = parts.epochs.epoch_estimate(probe=probe)
    if current is None or not known:
        raise EpochUnknown(
            f"cannot tell what expires: {parts.epochs.clock.reading().describe()}. Set "
            "epoch_seconds, or probe the network (expiring(probe=True), `walrus-mem "
            "expiring --probe`, or `walrus-mem sync`): each stores one small blob")
    limit = current + within_epochs
    if ns is None:  # every namespace: only those whose key this process holds
        rows = parts.catalog.expiring(None, limit)
        readable = {n: parts.keys.readable(n) for n in {str(r["namespace"]) for r in rows}}
        rows = [r for r in rows if readable[str(r["namespace"])]]
    else:
        rows = parts.catalog.expiring(ns, limit)
    return [record_from_row(r) for r in rows]
