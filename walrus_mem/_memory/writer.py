"""Memory's write path: validate a fact, dedupe it (keyed hash), embed, seal, write
the row, vector, FTS entry, history and outbox in one catalog transaction, then
publish (a blob, or one quilt per <= 666 facts) while the publisher answers.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from .._catalog.catalog import dedupe_key, vector_to_blob
from .._catalog.rows import loads_metadata, record_from_row
from .._log import manifest as mf
from .._log.lineage import next_lineage
from .._recall.carried import identity
from .._safety import capture_screen
from .._walrus.blobio import PART_OVERHEAD, cheapest_batches
from .._walrus.retry import call_deadline
from ..envelope import open_envelope
from ..errors import InvalidInput, MemoryNotFound, UnsafeContent, WalrusMemError
from ..models import MemoryRecord, RememberManyResult
from . import restate, syncing
from .inputs import (
    UNSET,
    new_memory_id,
    normalise_text,
    to_timestamp,
    validate_category,
    validate_importance,
    validate_metadata,
)
from .records import Item, Replay, fact_record, seal_fact

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog
    from ..config import Settings
    from ..keys import NamespaceKeys
    from .parts import Parts

__all__ = ["CATEGORY_IMPORTANCE", "DEFAULT_IMPORTANCE", "lineage_after", "prepare", "replayed",
           "store", "update"]

DEFAULT_IMPORTANCE: Final = 0.5
CATEGORY_IMPORTANCE: Final = {
    # OpenClaw memory_store defaults (see docs/architecture.md)
    "identity": 0.95,
    "configuration": 0.95,
    "rule": 0.90,
    "preference": 0.85,
    "decision": 0.80,
    "project": 0.75,
    "operational": 0.60,
}


def prepare(
    settings: Settings,
    index: int,
    text: object,
    metadata: object = None,
    category: object = None,
    importance: object = None,
    expires_at: object = None,
    *,
    check_expiry: bool = True,
) -> Item:
    """A fact as the caller passed it, validated; importance defaults by category."""
    norm = normalise_text(text, max_bytes=settings.max_fact_bytes)
    cat = validate_category(category)
    if importance is None:
        imp = CATEGORY_IMPORTANCE.get(cat or "", DEFAULT_IMPORTANCE)
    else:
        imp = validate_importance(importance)
    exp = None if expires_at is None else to_timestamp(expires_at, what="expires_at")
    if check_expiry and exp is not None and exp <= time.time():
        raise InvalidInput("expires_at is in the past")
    return Item(index, norm, validate_metadata(metadata), cat, imp, exp)


def replayed(catalog: Catalog, ns: str, key: str) -> RememberManyResult | None:
    """The result saved under an idempotency key already used in ``ns``, else None."""
    result = catalog.idempotency_result(ns, key)
    if result is None:
        return None
    saved = json.loads(result)
    ids: list[str] = saved.get("ids", [])
    rows = catalog.memories_by_ids(ns, ids)
    records = [record_from_row(rows[i]) for i in ids if i in rows]
    return RememberManyResult(
        records=records,
        stored=saved.get("stored", 0),
        deduplicated=saved.get("deduplicated", 0),
        queued=sum(r.status == "queued" for r in records),
        failed=[(int(i), str(m)) for i, m in saved.get("failed", [])],
        replayed=True,
    )


def store(
    parts: Parts,
    ns: str,
    items: list[Item],
    failed: list[tuple[int, str]],
    idem_key: str | None,
    publish: bool | None = None,
) -> RememberManyResult:
    """Store validated facts of ``ns`` (Memory.remember_many's doc): dedupe, embed, seal,
    one catalog transaction, then publish while the publisher answers (``publish``: None
    as ``publish_writes`` says, False: the batches stay queued in the outbox)."""
    started = time.time()
    keys = parts.keys.for_namespace(ns)
    parts.embedding.check_model(ns)
    if idem_key is not None:
        replay = replayed(parts.catalog, ns, idem_key)
        if replay is not None:
            return replay
    for item in items:
        item.dedupe_hash = dedupe_key(keys, item.text)
    # Dedupe against the catalog and within the batch.
    hashes = list(dict.fromkeys(it.dedupe_hash for it in items))
    existing = parts.catalog.ids_by_dedupe_hash(ns, hashes)
    new_items: list[Item] = []
    first_of: dict[str, int] = {}
    for item in items:
        if item.dedupe_hash not in existing and item.dedupe_hash not in first_of:
            first_of[item.dedupe_hash] = item.index
            new_items.append(item)
    # A text a live memory holds is re-stated: that memory moves to a new id (restate.py)
    snaps = restate.snapshot(parts.catalog, ns, {
        it.dedupe_hash: existing[it.dedupe_hash] for it in items
        if it.memory_id is None and it.dedupe_hash in existing})
    vectors = parts.embedding.embed([it.text for it in new_items])
    # Under a capture path the learned screen reads these very vectors (capture_screen)
    flagged = capture_screen.flags([it.text for it in new_items], vectors,
                                   parts.embedding.embedder.model_id)
    if any(score is not None for score in flagged):
        out = {it.dedupe_hash: s for it, s in zip(new_items, flagged, strict=True) if s is not None}
        failed = sorted([*failed, *((it.index, capture_screen.refused_message(
            it.index, out[it.dedupe_hash])) for it in items if it.dedupe_hash in out)])
        items = [it for it in items if it.dedupe_hash not in out]
        keep = [pos for pos, s in enumerate(flagged) if s is None]
        new_items, vectors = [new_items[pos] for pos in keep], vectors[keep]
    now = time.time()
    ids = [it.memory_id or new_memory_id() for it in new_items]
    ident = identity(parts.embedding.embedder)  # the vector travels sealed with its fact
    limit = parts.publisher.max_plaintext()
    sealed = [
        seal_fact(keys, fact_record(mid, 1, it.text, it.metadata, it.category,
                                    it.importance, now, now, it.expires_at),
                  max_plaintext=limit, ident=ident, vector=vectors[pos])
        for pos, (mid, it) in enumerate(zip(ids, new_items, strict=True))
    ]
    emb = parts.embedding.embedder
    batch_ids: list[int] = []
    old_blobs: dict[str, bool | None] = {}

    def restated_fact(mid: str, snap: restate.Snapshot, at: float) -> bytes:
        return seal_fact(keys, fact_record(mid, 1, snap.text, snap.metadata, snap.category,
                                           snap.importance, snap.created_at, at,
                                           snap.expires_at),
                         max_plaintext=limit, ident=ident, vector=snap.vector)

    try:
        with parts.lock, parts.catalog.write():
            if idem_key is not None:
                try:
                    parts.catalog.claim_idempotency(ns, idem_key, now)
                except sqlite3.IntegrityError as exc:
                    raise Replay from exc
            if new_items:
                parts.catalog.adopt_model(ns, emb.model_id, emb.dim)
                parts.embedding.check_model(ns)
            inserted: list[int] = []  # positions in new_items
            for pos, (mid, item) in enumerate(zip(ids, new_items, strict=True)):
                metadata = json.dumps(item.metadata, sort_keys=True)
                key = parts.catalog.insert_memory(ns, {
                    "id": mid, "text": item.text, "metadata": metadata,
                    "category": item.category, "importance": item.importance,
                    "created_at": now, "updated_at": now, "expires_at": item.expires_at,
                    "version": 1, "dedupe_hash": item.dedupe_hash, "status": "queued",
                    "sealed": sealed[pos], "vector": vector_to_blob(vectors[pos]),
                    "digest": mf.sealed_digest(sealed[pos]),
                }, event="ADD", at=now)
                if key is None:  # another writer stored the same text meanwhile
                    existing.update(parts.catalog.ids_by_dedupe_hash(ns, [item.dedupe_hash]))
                    continue
                existing[item.dedupe_hash] = mid
                inserted.append(pos)
            moved: list[restate.Moved] = []
            for dedupe_hash, snap in snaps.items():
                done = restate.move(parts.catalog, ns, dedupe_hash, snap, now, restated_fact)
                if done is None:  # re-stated or stored by another writer meanwhile
                    existing.update(parts.catalog.ids_by_dedupe_hash(ns, [dedupe_hash]))
                    continue
                existing[dedupe_hash] = done.memory_id
                moved.append(done)
                old_blobs.update(done.old_blobs)
            queue = [(ids[p], len(sealed[p])) for p in inserted] + [
                (m.memory_id, len(m.sealed)) for m in moved]
            budget = parts.publisher.quilt_budget()  # under the publishers' request cap
            # the split that costs the fewest storage units (blobio.cheapest_batches)
            for span in cheapest_batches([size + PART_OVERHEAD for _, size in queue], budget):
                batch_ids.append(parts.catalog.add_outbox_batch(
                    ns, [(queue[j][0], 1) for j in span], now))
            order: list[str] = []
            dedup_count = 0
            inserted_ids = {ids[p] for p in inserted}
            for item in items:
                mid = existing[item.dedupe_hash]
                order.append(mid)
                if mid not in inserted_ids or first_of.get(item.dedupe_hash) != item.index:
                    dedup_count += 1
            if idem_key is not None:
                parts.catalog.save_idempotency(ns, idem_key, json.dumps(
                    {"ids": order, "stored": len(inserted), "deduplicated": dedup_count,
                     "failed": failed}))
    except Replay:
        replay = replayed(parts.catalog, ns, idem_key or "")
        assert replay is not None
        return replay
    if inserted or moved:
        with parts.lock:
            parts.indexes.refresh(ns, build=True)  # an import builds it as it goes
    # One publish_deadline per batch for everything this call sends: stores, their
    # read-backs and a periodic manifest (which gets what is left, else waits for sync).
    # publish_writes = "sync": the batches wait for sync(), which pools them (publisher.py)
    # publish=False (an import pooling its chunks): likewise, until it publishes them
    publish_now = parts.settings.publish_writes == "now" if publish is None else publish
    with call_deadline(parts.publisher.publish_budget() * max(1, len(batch_ids))):
        for batch_id in batch_ids if publish_now else ():
            if parts.publisher.breaker_open():  # publisher down: the rest wait for sync()
                break
            _, _, failing = parts.publisher.publish_batch(batch_id, replay=False)  # sealed here
            if failing:  # the next batch would spend its own deadline the same way
                break
        if publish_now:
            syncing.maybe_manifest(parts, ns, started)
    if old_blobs:  # the re-stated memories' old ids, as forget deletes them
        parts.publisher.delete_blobs(old_blobs)
    rows = parts.catalog.memories_by_ids(ns, order)
    records: list[MemoryRecord] = []
    deduped_flags: list[bool] = []
    for item, mid in zip(items, order, strict=True):
        if mid not in rows:
            # another process stated the same text meanwhile: its re-statement moved this
            # memory to a new id (restate.py); that one holds the fact (else forgotten)
            holder = parts.catalog.ids_by_dedupe_hash(ns, [item.dedupe_hash]).get(
                item.dedupe_hash)
            row = None if holder is None else parts.catalog.memory(ns, holder)
            if row is None:  # forgotten by another thread in between
                continue
            records.append(record_from_row(row, deduplicated=True))
            deduped_flags.append(True)
            continue
        is_dup = mid not in inserted_ids or first_of.get(item.dedupe_hash) != item.index
        records.append(record_from_row(rows[mid], deduplicated=is_dup))
        deduped_flags.append(is_dup)
    return RememberManyResult(
        records=records,
        stored=len(inserted),
        deduplicated=dedup_count,
        queued=sum(1 for r, d in zip(records, deduped_flags, strict=True)
                   if not d and r.status == "queued"),
        failed=sorted(failed),
    )


def lineage_after(catalog: Catalog, keys: NamespaceKeys, ns: str,
                  mid: str) -> dict[str, list[str]]:
    """Lineage of a version updated from the current one (lineage.py): the merge
    tells a concurrent update from a later one by it."""
    data, digest = catalog.sealed_and_digest(ns, mid)  # the relayer's if the row has none
    if data is None:
        return {}
    previous: dict[str, Any] | None
    try:
        previous = open_envelope(keys, data, expected_id=mid, expected_kind="fact")
    except (WalrusMemError, ValueError):
        previous = None
    return next_lineage(previous, digest or mf.sealed_digest(data))


def update(parts: Parts, ns: str, mid: str, text: str | bytes | None,
           metadata: Mapping[str, Any] | None, category: str | None,
           importance: float | None, expires_at: Any) -> MemoryRecord:
    """A new version of memory ``mid`` of ``ns`` (Memory.update's doc), sealed and queued,
    published while the publisher answers; its record."""
    started = time.time()
    keys = parts.keys.for_namespace(ns)
    parts.embedding.check_model(ns)
    row = parts.catalog.memory(ns, mid)
    if row is None:
        raise MemoryNotFound(f"no memory {mid} in namespace {ns!r}")
    if text is None and metadata is None and category is None and importance is None \
            and expires_at is UNSET:
        raise InvalidInput("update needs at least one of text, metadata, category, "
                           "importance, expires_at")
    old_exp = row["expires_at"]
    item = prepare(parts.settings,
        0,
        row["text"] if text is None else text,
        loads_metadata(row["metadata"]) if metadata is None else metadata,
        row["category"] if category is None else category,
        row["importance"] if importance is None else importance,
        old_exp if expires_at is UNSET else expires_at,
        check_expiry=expires_at is not UNSET,
    )
    item.dedupe_hash = dedupe_key(keys, item.text)
    unchanged = (
        item.text == row["text"]
        and item.metadata == loads_metadata(row["metadata"])
        and item.category == row["category"]
        and item.importance == row["importance"]
        and item.expires_at == old_exp
    )
    if unchanged:
        return record_from_row(row)
    text_changed = item.text != row["text"]
    vector = parts.embedding.embed([item.text])[0] if text_changed else None
    if vector is not None and capture_screen.flags(
            [item.text], vector[None], parts.embedding.embedder.model_id)[0] is not None:
        raise UnsafeContent("the new text was refused by the injection screen (classifier)")
    now = time.time()
    version = int(row["version"]) + 1
    record = fact_record(mid, version, item.text, item.metadata, item.category,
                          item.importance, float(row["created_at"]), now, item.expires_at)
    record.update(lineage_after(parts.catalog, keys, ns, mid))
    carried: npt.NDArray[np.float32] | bytes | None = vector
    if carried is None:  # the same text: the vector the catalog holds travels again
        carried = parts.catalog.vectors_by_keys(ns, [int(row["key"])]).get(int(row["key"]))
    sealed = seal_fact(keys, record, max_plaintext=parts.publisher.max_plaintext(),
                       ident=identity(parts.embedding.embedder), vector=carried)
    with parts.lock, parts.catalog.write():
        current = parts.catalog.memory(ns, mid)
        if current is None:
            raise MemoryNotFound(f"no memory {mid} in namespace {ns!r}")
        if int(current["version"]) != version - 1:
            raise InvalidInput(f"memory {mid} was updated concurrently; retry")
        if text_changed:
            clash = parts.catalog.ids_by_dedupe_hash(
                ns, [item.dedupe_hash]).get(item.dedupe_hash)
            if clash is not None and clash != mid:
                raise InvalidInput(f"memory {clash} already holds that text")
        else:  # a twin (same text, merged from another machine) keeps its slot
            item.dedupe_hash = parts.catalog.dedupe_slot(ns, item.dedupe_hash, mid)
        parts.catalog.replace_version(ns, int(current["key"]), {
            "text": item.text, "metadata": json.dumps(item.metadata, sort_keys=True),
            "category": item.category, "importance": item.importance, "updated_at": now,
            "expires_at": item.expires_at, "version": version,
            "dedupe_hash": item.dedupe_hash, "status": "queued", "sealed": sealed,
            "digest": mf.sealed_digest(sealed),
        }, vector=None if vector is None else vector_to_blob(vector), event="UPDATE", at=now)
        batch_id = parts.catalog.add_outbox_batch(ns, [(mid, version)], now)
    with parts.lock:
        parts.indexes.refresh(ns, build=True)
    if parts.settings.publish_writes == "now":
        with call_deadline(parts.publisher.publish_budget()):  # as in _store
            if not parts.publisher.breaker_open():
                parts.publisher.publish_batch(batch_id, replay=False)  # sealed by this call
            syncing.maybe_manifest(parts, ns, started)
    stored = parts.catalog.memory(ns, mid)
    if stored is None:  # forgotten by another thread in between
        raise MemoryNotFound(f"no memory {mid} in namespace {ns!r}")
    return record_from_row(stored)
