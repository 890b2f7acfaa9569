"""``walrus-mem repair``: fix what :mod:`walrus_mem._memory.integrity` finds, loudly and locally.

Per namespace, in this order:

1. ``queued`` memories that no outbox batch holds are enqueued again (``sync``
   does this too, on every call), so they get published;
2. rows whose sealed copy and catalog columns disagree: the sealed copy is
   signed and authenticated, the text column is not, so a copy that opens
   under the key rebuilds the row (text, metadata, FTS, vector); one that does
   not is replaced by the verified copy on Walrus for a published memory (the
   exact original bytes, which then rebuild the row; if Walrus cannot be read
   now, the row is left for the next repair), else, for a queued memory that
   nothing else holds, sealed again from the row and flagged (``resealed``);
3. an index file that disagrees with the catalog (keys, count, sampled
   lookups) is rebuilt from the vectors stored in the catalog.

A catalog SQLite cannot open is not repaired in place: it is moved aside
(never deleted) and the namespaces are restored from Walrus
(:func:`move_catalog_aside`, then ``Memory.restore`` of every newest head this data
dir remembers, concurrent ones together: :func:`remembered_heads`); then what the old file
still holds that no head does (queued and late memories, forgets) is
salvaged from it. The file's name is written to ``repair-salvage.json``
before the move, so a repair killed before the salvage finishes it next time.
Repair holds the data dir exclusively (:mod:`walrus_mem._local.datadir_lock`).

**Usage**::

    with Memory() as mem:
        report = repair_namespace(mem, "default")
        print(report.summary())
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol

from pydantic import BaseModel, Field

from .._catalog.catalog import Catalog, dedupe_key, vector_to_blob
from .._local.datadir_lock import DataDirLock
from .._local.dir_trust import check_private_dir
from .._log.manifest import sealed_digest
from .._recall.carried import identity
from ..errors import CatalogCorrupt, InvalidInput, StorageError, WalrusMemError
from ..keys import NamespaceKeys
from ..models import MemoryRecord, RestoreReport
from ..walrus import WalrusClient
from .integrity import catalog_problems, check_index_file, damaged_sealed, sealed_problem
from .lost_copies import reseal_lost
from .records import fact_record, seal_fact
from .repair_network import check_lost_heads

if TYPE_CHECKING:
    from .._log.context import ProgressCallback
    from ..config import Settings
    from .parts import Parts

__all__ = [
    "CatalogRebuild",
    "RepairReport",
    "move_catalog_aside",
    "pending_salvage",
    "RepairHost",
    "repair_namespace",
    "repair_with",
    "requeue_lost",
]

log = logging.getLogger(__name__)


class RepairHost(Protocol):
    """What repair uses of an open Memory: its public methods and its :class:`Parts`."""

    @property
    def parts(self) -> Parts: ...

    @property
    def walrus(self) -> WalrusClient: ...

    def namespace_name(self, namespace: str | None) -> str: ...

    def keys_for(self, namespace: str | None = None) -> NamespaceKeys: ...

    def namespaces(self) -> list[str]: ...

    def restore(self, namespace: str | None = None,
                manifest_blob_id: str | Sequence[str] | None = None,
                progress: ProgressCallback | None = None) -> RestoreReport: ...

    def update(self, memory_id: str, text: str | bytes | None = None, *,
               namespace: str | None = None, metadata: Mapping[str, Any] | None = None,
               category: str | None = None, importance: float | None = None,
               expires_at: Any = ...) -> MemoryRecord: ...

    def close(self) -> None: ...

    def __enter__(self) -> RepairHost: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None, /) -> None: ...

_BATCH_FACTS: Final = 666  # Walrus quilt limit
_BATCH_BYTES: Final = 9 * 1024 * 1024  # public publishers cap requests at 10 MiB


class RepairReport(BaseModel):
    """What ``repair`` did to one namespace, and what it could not fix."""

    namespace: str
    catalog_problems: list[str] = Field(default_factory=list)
    requeued: list[str] = Field(default_factory=list)
    refetched: list[str] = Field(default_factory=list)  # sealed copy replaced from Walrus
    # sealed again from the catalog row (a queued memory whose sealed copy does not open:
    # its text comes from the unauthenticated column, so check these)
    resealed: list[str] = Field(default_factory=list)
    rebuilt: list[str] = Field(default_factory=list)  # row rewritten from its sealed copy
    # an interrupted restore or key rotation finished first (what each did)
    finished: list[str] = Field(default_factory=list)
    index_rebuilt: bool = False
    index_detail: str = ""
    unrepaired: list[tuple[str, str]] = Field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.requeued or self.refetched or self.resealed or self.rebuilt
                    or self.index_rebuilt or self.finished)

    def summary(self) -> str:
        parts = [
            *self.finished,
            f"{len(self.requeued)} re-enqueued",
            f"{len(self.refetched) + len(self.resealed)} sealed copies replaced",
            f"{len(self.rebuilt)} rows rebuilt from their sealed copies",
            "index rebuilt" if self.index_rebuilt else "index sound",
        ]
        if self.unrepaired:
            parts.append(f"{len(self.unrepaired)} not repaired")
        if self.catalog_problems:
            parts.append(f"SQLite integrity check: {len(self.catalog_problems)} problem(s)")
        return ", ".join(parts)


def requeue_lost(catalog: Catalog, namespace: str | None = None) -> list[str]:
    """Enqueue ``queued`` memories no outbox batch holds; return their ids.

    Batches follow the publish limits (≤ 666 facts and ≤ 9 MiB each). One
    transaction, so two processes repairing at once cannot enqueue twice.
    """
    done: list[str] = []
    with catalog.write() as c:
        sql = (
            "SELECT m.namespace, m.id, m.version, length(m.sealed) FROM memories m "
            "WHERE m.status = 'queued' {ns} AND NOT EXISTS (SELECT 1 FROM outbox_items i "
            "JOIN outbox o ON o.id = i.outbox_id WHERE i.memory_id = m.id "
            "AND i.version = m.version AND o.namespace = m.namespace) ORDER BY m.namespace, m.key"
        )
        if namespace is None:
            rows = c.execute(sql.format(ns="")).fetchall()
        else:
            rows = c.execute(sql.format(ns="AND m.namespace = ?"), (namespace,)).fetchall()
        groups: list[list[Any]] = []
        size = 0
        for row in rows:
            last = groups[-1] if groups else None
            if (last is None or last[0][0] != row[0] or len(last) >= _BATCH_FACTS
                    or size + int(row[3] or 0) > _BATCH_BYTES):
                groups.append([])
                size = 0
            groups[-1].append(row)
            size += int(row[3] or 0)
        now = time.time()
        for group in groups:
            c.execute("DELETE FROM outbox_items WHERE memory_id IN "
                      "(SELECT value FROM json_each(?))",
                      (json.dumps([str(r[1]) for r in group]),))
            cur = c.execute(
                "INSERT INTO outbox (namespace, kind, created_at, last_error) VALUES (?, ?, ?, ?)",
                (group[0][0], "blob" if len(group) == 1 else "quilt", now,
                 "re-enqueued: the outbox row was lost"),
            )
            batch = int(cur.lastrowid or 0)
            c.executemany(
                "INSERT INTO outbox_items (outbox_id, memory_id, version) VALUES (?, ?, ?)",
                [(batch, str(r[1]), int(r[2])) for r in group],
            )
            done.extend(str(r[1]) for r in group)
        c.execute("DELETE FROM outbox WHERE NOT EXISTS "
                  "(SELECT 1 FROM outbox_items i WHERE i.outbox_id = outbox.id)")
    if done:
        log.warning("re-enqueued %d queued memories whose outbox rows were lost", len(done))
    return done


def _replace_sealed(mem: RepairHost, ns: str, report: RepairReport) -> None:
    """Fix rows whose sealed copy and catalog columns disagree. The sealed copy is signed
    and authenticated, the text column is not: a copy that opens rebuilds the row; one
    that does not is replaced by the verified copy on Walrus (which also rebuilds the
    row); only a queued memory, which nothing else holds, is sealed again from the row."""
    catalog = mem.parts.catalog
    keys = mem.keys_for(ns)
    for mid, problem in damaged_sealed(catalog, keys, ns):
        row = catalog.query_one(
            "SELECT * FROM memories WHERE id = ? AND namespace = ?", (mid, ns))
        if row is None:
            continue
        version = int(row["version"])
        local = catalog.sealed_from_row(row)  # the embedded relayer's if the row has none
        if local is not None and sealed_problem(keys, local, mid, version) is None:
            _rebuild_row(mem, ns, row, local, report, problem)  # only the columns rotted
            continue
        data: bytes | None = None
        if row["sealed"] is None and reseal_lost(mem.parts, ns, [mid]):
            # only the embedded relayer's folder held it (_catalog/held.py), and no longer
            # does intact: no other copy to wait for (reseal_lost flags and queues it)
            report.resealed.append(mid)
            continue
        if row["status"] == "published" and row["blob_id"] is not None:
            def check(raw: bytes, mid: str = mid, version: int = version) -> None:
                why = sealed_problem(keys, raw, mid, version)
                if why is not None:
                    raise InvalidInput(why)

            try:
                client = mem.walrus
                if row["quilt_patch_id"] is not None:
                    data = client.read_quilt_patch(str(row["quilt_patch_id"]), verify=check)
                else:
                    data = client.read_blob(str(row["blob_id"]), verify=check)
            except (StorageError, InvalidInput) as exc:
                # Sealing the unauthenticated text again at this version would publish
                # whatever rotted in it: wait for the copy on Walrus instead.
                report.unrepaired.append((mid, f"sealed copy damaged ({problem}) and no verified "
                                               f"copy readable on Walrus now ({exc}); run repair "
                                               "again when the aggregator answers"))
                continue
            with catalog.write() as c:
                c.execute("UPDATE memories SET sealed = ?, digest = ? WHERE id = ? AND version = ?",
                          (data, sealed_digest(data), mid, version))
            report.refetched.append(mid)
            log.warning("memory %s: damaged sealed copy replaced from Walrus (%s)", mid, problem)
            if sealed_problem(keys, data, mid, version, str(row["text"])) is not None:
                _rebuild_row(mem, ns, row, data, report, problem)
            continue
        record = fact_record(
            mid, version, str(row["text"]), json.loads(row["metadata"] or "{}"),
            row["category"], float(row["importance"]), float(row["created_at"]),
            float(row["updated_at"]), row["expires_at"])
        # the row may have kept no vector (its sealed copy carried it): embed it again
        vector = vector_to_blob(mem.parts.embedding.embed([str(row["text"])])[0])
        data = seal_fact(keys, record, max_plaintext=mem.parts.publisher.max_plaintext(),
                         ident=identity(mem.parts.embedding.embedder), vector=vector)
        report.resealed.append(mid)  # flagged: its text comes from the unauthenticated row
        log.warning("memory %s: sealed copy does not open (%s); sealed again from the catalog "
                    "row's text, which nothing authenticates: check it", mid, problem)
        with catalog.write() as c:
            c.execute("UPDATE memories SET sealed = ?, digest = ?, vector = ? "
                      "WHERE id = ? AND version = ?",
                      (data, sealed_digest(data), vector, mid, version))


def _rebuild_row(mem: RepairHost, ns: str, row: Any, sealed: bytes, report: RepairReport,
                 problem: str) -> None:
    """Rewrite a row's text, metadata, category, importance, expiry, dedupe hash, FTS entry
    and vector from its authenticated sealed copy (same version, nothing to publish)."""
    from .._catalog.catalog import vector_to_blob
    from ..envelope import open_envelope

    mid = str(row["id"])
    record = open_envelope(mem.keys_for(ns), sealed, expected_id=mid, expected_kind="fact")
    text = str(record["text"])
    metadata = json.dumps(record.get("metadata") or {}, sort_keys=True)
    catalog = mem.parts.catalog
    try:
        vector = vector_to_blob(mem.parts.embedding.embed([text])[0])
        with mem.parts.lock, catalog.write() as c:
            key = int(row["key"])
            c.execute(
                "UPDATE memories SET text = ?, metadata = ?, category = ?, importance = ?, "
                "expires_at = ?, dedupe_hash = ?, vector = ? WHERE key = ?",
                (text, metadata, record.get("category"), float(record["importance"]),
                 record.get("expires_at"),
                 dedupe_key(mem.keys_for(ns), text), vector, key))
            # the lexical index is rebuilt once the namespace's rows are (repair_namespace):
            # FTS5 keeps no text, and the tokens indexed for a rotted text are not known
            c.execute("INSERT INTO changes (namespace, key) VALUES (?, ?)", (ns, key))
            c.execute("UPDATE versions SET text = ?, metadata = ? WHERE memory_id = ? AND "
                      "version = ? AND event != 'CONFLICT'", (text, metadata, mid,
                                                              int(row["version"])))
        with mem.parts.lock:
            mem.parts.indexes.refresh(ns)
    except (WalrusMemError, sqlite3.Error, KeyError, TypeError, ValueError) as exc:
        report.unrepaired.append((mid, f"row differs from its sealed copy ({problem}) and could "
                                       f"not be rebuilt from it: {type(exc).__name__}: {exc}"))
        return
    report.rebuilt.append(mid)
    log.warning("memory %s: catalog row rebuilt from its sealed copy (%s)", mid, problem)


def repair_namespace(mem: RepairHost, namespace: str | None = None) -> RepairReport:
    """Repair one namespace of an open Memory (see the module doc); local writes only,
    plus reads from Walrus for damaged sealed copies of published memories."""
    ns = mem.namespace_name(namespace)
    report = RepairReport(namespace=ns, catalog_problems=catalog_problems(mem.parts.catalog))
    _finish_interrupted(mem, ns, report)
    try:
        _replace_sealed(mem, ns, report)
    except WalrusMemError as exc:  # e.g. no key for this namespace here
        report.unrepaired.append(("*", f"sealed copies not checked: {type(exc).__name__}: {exc}"))
    finally:
        if report.rebuilt:  # their texts changed: FTS5 and postings again from memories
            with mem.parts.lock:
                mem.parts.catalog.rebuild_lexical(ns)
    report.requeued = requeue_lost(mem.parts.catalog, ns)
    info = mem.parts.catalog.namespace(ns)
    if info is not None and info["model_id"] is not None:
        model_id, dim = str(info["model_id"]), int(info["dim"])
        health = check_index_file(mem.parts.catalog, mem.parts.indexes.directory, ns, model_id, dim)
        report.index_detail = health.describe()
        if not health.ok:
            with mem.parts.lock:
                mem.parts.indexes.rebuild(ns, model_id, dim)
            report.index_rebuilt = True
    return report


def _finish_interrupted(mem: RepairHost, ns: str, report: RepairReport) -> None:
    """Resume an interrupted restore, then finish an interrupted key rotation: until both
    are done the namespace publishes no manifest (a data dir an earlier version left with
    a rotation begun during an unfinished pull: issue 23, item 3)."""
    from .rotation import finish_rotation, rotation_in_progress

    if mem.parts.log.unfinished(ns) == "interrupted":
        try:
            restored = mem.restore(ns)
        except WalrusMemError as exc:
            report.unrepaired.append(("*", f"the interrupted restore was not finished: "
                                           f"{type(exc).__name__}: {exc}; run repair again"))
            return
        report.finished.append(f"interrupted restore resumed ({restored.restored} restored)")
        if not restored.complete:
            report.unrepaired.append(("*", "the resumed restore is still incomplete: "
                                           f"{len(restored.failed)} not fetched; run repair "
                                           "again"))
            return
    if rotation_in_progress(mem.parts.catalog, ns):
        try:
            rotation = finish_rotation(mem.parts, ns)
        except WalrusMemError as exc:
            report.unrepaired.append(("*", f"the interrupted key rotation was not finished: "
                                           f"{type(exc).__name__}: {exc}"))
            return
        report.finished.append(
            f"interrupted key rotation to generation {rotation.generation} "
            + ("finished" if rotation.complete else "continued"))
        if not rotation.complete:
            report.unrepaired.append(("*", "the key rotation is not finished: "
                                           + ("; ".join(rotation.errors) or "interrupted")
                                           + f" (walrus-mem -n {ns} keys rotate)"))


def aside_path(data_dir: Path) -> Path:
    """A free name to move the catalog aside to (never an existing file)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = data_dir / f"catalog.sqlite3.corrupt-{stamp}"
    n = 1
    while any(Path(str(aside) + s).exists() for s in ("", "-wal", "-shm")):
        n += 1
        aside = data_dir / f"catalog.sqlite3.corrupt-{stamp}-{n}"
    return aside


def move_catalog_aside(data_dir: Path, aside: Path | None = None) -> Path:
    """Rename an unusable catalog (and its WAL files) out of the way; return the new path."""
    path = data_dir / "catalog.sqlite3"
    aside = aside or aside_path(data_dir)
    for suffix in ("", "-wal", "-shm"):
        source = Path(str(path) + suffix)
        if source.exists():
            source.rename(Path(str(aside) + suffix))
    log.warning("moved the unusable catalog aside to %s", aside)
    return aside


class CatalogRebuild(BaseModel):
    """What repair restored from Walrus, and the unusable catalog it moved aside first.

    ``moved_to`` is None when the catalog was usable: then only namespaces whose
    remembered head this catalog does not hold (e.g. after a repair whose restore
    failed) or the ``--manifest`` one are restored.
    """

    moved_to: Path | None
    problems: list[str] = Field(default_factory=list)
    restored: dict[str, RestoreReport] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict)  # namespace -> why its restore failed
    # Memories read back from the moved-aside file that no restored head held
    # (queued ones, and published ones acknowledged after the last manifest):
    salvaged: dict[str, str] = Field(default_factory=dict)  # old id -> id now
    salvaged_published: list[str] = Field(default_factory=list)  # old ids of published ones
    unsalvaged: list[str] = Field(default_factory=list)  # ones that could not be stored
    # Forgets (DELETE tombstones) read back from that file, so a memory forgotten while
    # no manifest could carry the forget stays forgotten: old ids
    salvaged_forgets: list[str] = Field(default_factory=list)
    # The files salvaged from: ``moved_to``, and any a killed repair moved aside (named
    # in repair-salvage.json) whose salvage this run finished
    salvaged_from: list[Path] = Field(default_factory=list)
    salvage_note: str = ""  # e.g. the old file is not readable at all
    missing_heads: list[str] = Field(default_factory=list)  # namespaces with no head to use
    # An unusable heads.sqlite3, moved aside and rebuilt from the catalog's heads:
    heads_moved_to: Path | None = None
    heads_problem: str = ""
    heads_relearned: list[str] = Field(default_factory=list)  # head refs read back into it
    heads_unreadable: list[str] = Field(default_factory=list)  # "<ns> <head>: why"


def heads_store_problem(path: Path) -> str | None:
    """Why ``heads.sqlite3`` is unusable (SQLite's integrity check, its tables readable),
    or None when it is sound or absent."""
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            found = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(5)")]
            for table in ("meta", "heads", "edges"):
                conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return str(exc)
    return None if found == ["ok"] else "; ".join(found)


def move_heads_store_aside(path: Path) -> tuple[Path, str | None]:
    """Rename an unusable heads store (and its -wal/-shm) aside, never delete it; return the
    new path and the writer id still readable in it (kept, so this data dir's manifests keep
    one writer)."""
    writer: str | None = None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'writer'").fetchone()
            writer = str(row[0]) if row is not None else None
        finally:
            conn.close()
    except sqlite3.Error:
        pass
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = path.with_name(path.name + suffix)
        if src.exists():
            src.replace(aside.with_name(aside.name + suffix))
    log.warning("moved the unusable heads store aside to %s", aside)
    return aside, writer


def rebuild_heads_store(mem: RepairHost, rebuild: CatalogRebuild, writer: str | None) -> None:
    """Fill a fresh heads store from what the catalog knows: each namespace's merged heads,
    read back from Walrus (writer, parents, origins) under the namespace key."""
    from .._log.heads import SeenHead

    log_ = mem.parts.log
    if writer is not None:
        log_.seen.set_writer(writer)
    for ns in mem.namespaces():
        for ref in log_.merged(ns):
            try:
                log_.learn(ns, mem.parts.keys.derive(ns), ref)
                rebuild.heads_relearned.append(f"{ns} {ref}")
            except (WalrusMemError, ValueError) as exc:
                # still remembered, so a later restore starts from it; parents are learnt
                # again when the next manifest is published
                log_.seen.add(ns, SeenHead(ref, writer or "", (), (ref.blob_id,)))
                rebuild.heads_unreadable.append(f"{ns} {ref}: {type(exc).__name__}: {exc}")


def remembered_heads(data_dir: Path) -> dict[str, list[str]]:
    """Per namespace, the newest heads this data dir remembers outside the catalog
    (``heads.sqlite3``, see walrus_mem._log.heads): every seen head no other seen head
    descends from, newest first. Concurrent ones (its own and one pulled since) are
    all of them: the state held both, so a restore of the highest seq alone would
    bring back what the other forgot and roll back what it updated."""
    from .._log.heads import SeenHeads

    seen = SeenHeads(Path(data_dir) / "heads.sqlite3")
    try:
        return {ns: [str(h.ref) for h in heads] for ns in seen.namespaces()
                if (heads := seen.newest(ns))}
    finally:
        seen.close()


def salvage_queued(mem: RepairHost, aside: Path, rebuild: CatalogRebuild) -> None:
    """Put every memory still readable in a moved-aside catalog that the restored state lacks
    back into the new one.

    Queued memories were never published, so no head holds them; published
    ones acknowledged after the last manifest are in no head either. Each row
    the restored catalog does not hold (same id at the same or a newer
    version) is written again through the public API, so it is sealed anew and
    queued for publishing: an update when the restored catalog has an older
    version of the memory, else a new memory under the **same id** at version 1
    (a new id only if the restored state already holds its text: the mapping is
    reported). A memory the restored state has a tombstone for stays forgotten.
    A file SQLite cannot read at all salvages nothing, and says so.
    """
    rows, error = _readable_rows(aside)
    if error is not None:
        rebuild.salvage_note = (
            f"part of {aside.name} is unreadable ({error}): {len(rows)} memories read from it; "
            "memories stored in its damaged pages and in no published manifest are lost with it")
        if not rows:
            return
    tried = 0
    tombstones: dict[str, dict[str, int]] = {}
    for mid, ns, text, metadata, category, importance, expires_at, version, status in rows:
        try:
            if ns not in tombstones:
                tombstones[ns] = mem.parts.catalog.tombstones(ns)
            if str(mid) in tombstones[ns]:
                rebuild.unsalvaged.append(f"{mid}: forgotten in the restored state")
                continue
            held = mem.parts.catalog.memory(ns, mid)
            if held is not None and int(held["version"]) >= int(version) and (
                    status != "queued" or int(held["version"]) > int(version)
                    or str(held["text"]) == str(text)):
                continue  # the restored state holds this version already
            tried += 1
            meta = json.loads(metadata or "{}")
            if held is not None:
                rec = mem.update(mid, text, namespace=ns, metadata=meta, category=category,
                                 importance=importance, expires_at=expires_at)
            else:  # no head lists it: the same id, so no machine ever sees it twice
                rec = mem.parts.remember_as(str(mid), text, namespace=ns, metadata=meta,
                                       category=category, importance=importance,
                                       expires_at=expires_at)
            rebuild.salvaged[str(mid)] = rec.id
            if status != "queued":
                rebuild.salvaged_published.append(str(mid))
        except (WalrusMemError, ValueError, TypeError) as exc:
            rebuild.unsalvaged.append(f"{mid}: {type(exc).__name__}: {exc}")
    if tried:
        log.warning("salvaged %d of %d memories in no restored head from %s",
                    len(rebuild.salvaged), tried, aside)


def salvage_forgets(mem: RepairHost, aside: Path, rebuild: CatalogRebuild) -> None:
    """Carry the forgets (DELETE tombstones) still readable in a moved-aside catalog into
    the restored one: a forget made while no manifest could carry it (publisher down)
    is in no head, and without this the restore would bring the memory back. Each is
    recorded at its own version, like a forget learned by pull; a memory the restored
    state holds live is forgotten (its blobs deleted, or left pending as forget does).
    The old file's unfinished blob deletions are carried over and retried too."""
    found, error = _readable_tombstones(aside)
    if error is not None and not rebuild.salvage_note:
        rebuild.salvage_note = (f"part of {aside.name} is unreadable ({error}): "
                                f"{len(found)} forgets read from it")
    catalog = mem.parts.catalog
    now = time.time()
    pending = _carry_pending_deletions(mem, aside)
    touched: set[str] = set()
    for ns, mid, version in found:
        if ns not in mem.namespaces() or catalog.is_tombstoned(ns, mid):
            continue
        with mem.parts.lock, catalog.write():
            catalog.forget_memory(ns, mid, now, version)
            catalog.bump_writes(ns, 1)  # the next manifest carries the tombstone
        rebuild.salvaged_forgets.append(mid)
        touched.add(ns)
    for ns in touched:
        with mem.parts.lock:
            mem.parts.indexes.refresh(ns)
            catalog.scrub()
    for ns in sorted(touched | pending):
        mem.parts.publisher.retry_deletions(ns)
    if rebuild.salvaged_forgets:
        log.warning("carried %d forgets from %s into the restored catalog",
                    len(rebuild.salvaged_forgets), aside)


def _carry_pending_deletions(mem: RepairHost, aside: Path) -> set[str]:
    """Copy the old file's unfinished blob deletions (walrus_mem._memory.deletions) into the new
    catalog; return their namespaces. A file without the table carries none."""
    try:
        conn = sqlite3.connect(f"file:{aside}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT blob_id, namespace, deletable, at "
                                "FROM pending_deletions").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return set()
    with mem.parts.catalog.write() as c:
        c.executemany("INSERT OR IGNORE INTO pending_deletions (blob_id, namespace, deletable, "
                      "at) VALUES (?, ?, ?, ?)", rows)
    return {str(r[1]) for r in rows}


def _scan_from_both_ends(path: Path, sql: str) -> tuple[list[Any], str | None]:
    """The rows of ``sql`` (``{order}`` is the rowid order) SQLite can still read from
    ``path``: a scan from each end, so damage in the middle of a table loses only what
    lies there, and the first error met."""
    rows: list[Any] = []
    error: str | None = None
    for order in ("ASC", "DESC"):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            return [], str(exc)
        try:
            for row in conn.execute(sql.format(order=order)):
                rows.append(row)
            if error is None:
                break  # the whole table read forwards: no need to read it backwards
        except sqlite3.Error as exc:
            error = error or str(exc)
        finally:
            conn.close()
    return rows, error


def _readable_tombstones(path: Path) -> tuple[list[tuple[str, str, int]], str | None]:
    """(namespace, memory id, version) of every DELETE tombstone SQLite can still read."""
    rows, error = _scan_from_both_ends(
        path, "SELECT namespace, memory_id, version FROM versions NOT INDEXED "
              "WHERE event = 'DELETE' ORDER BY rowid {order}")
    found: dict[tuple[str, str], int] = {}
    for ns, mid, version in rows:
        key = (str(ns), str(mid))
        found[key] = max(found.get(key, 0), int(version))
    return [(ns, mid, v) for (ns, mid), v in found.items()], error


_SALVAGE_SQL: Final = (
    "SELECT id, namespace, text, metadata, category, importance, expires_at, version, status "
    "FROM memories NOT INDEXED ORDER BY rowid {order}")


def _readable_rows(path: Path) -> tuple[list[Any], str | None]:
    """The memory rows SQLite can still read from ``path`` and the first error met."""
    rows, error = _scan_from_both_ends(path, _SALVAGE_SQL)
    found: dict[tuple[str, str], Any] = {}
    for row in rows:
        found.setdefault((str(row[1]), str(row[0])), row)
    return list(found.values()), error


def _unread(rebuild: CatalogRebuild, ns: str) -> bool:
    """Whether the restore of ``ns`` left a remembered head unread."""
    report = rebuild.restored.get(ns)
    return ns in rebuild.failed or report is None or not report.complete or bool(
        report.skipped_heads)


def _lacks_head(mem: RepairHost, ns: str) -> bool:
    info = mem.parts.catalog.namespace(ns)
    return info is None or info["manifest_blob_id"] is None


_SALVAGE_MARKER: Final = "repair-salvage.json"


def _write_marker(data_dir: Path, asides: list[Path]) -> None:
    """Durably name the files a repair moves the catalog to, before it moves it: a repair
    killed after the move finishes the salvage on its next run (:func:`repair_data_dir`)."""
    path = data_dir / _SALVAGE_MARKER
    tmp = path.with_name(path.name + ".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
              encoding="utf-8") as f:
        json.dump({"asides": [a.name for a in asides], "at": time.time()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pending_salvage(data_dir: Path) -> list[Path]:
    """Moved-aside catalogs a killed repair had not finished salvaging."""
    try:
        names = json.loads((data_dir / _SALVAGE_MARKER).read_text(encoding="utf-8"))["asides"]
        found = [data_dir / Path(str(n)).name for n in names]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [p for p in found if p.exists()]


def repair_with(
    settings: Settings,
    open_memory: Callable[[], RepairHost],
    *,
    namespace: str | None = None,
    manifest_blob_id: str | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[CatalogRebuild | None, list[RepairReport]]:
    """Repair a data dir: an unusable catalog is rebuilt from Walrus, then each namespace.

    ``namespace`` limits the per-namespace repair to one; ``manifest_blob_id``
    is a head to restore that namespace from (what fills a rebuilt catalog
    when this data dir remembers no head, or a second run after such a one).
    Holds the data dir exclusively (:mod:`walrus_mem._local.datadir_lock`): raises
    DataDirBusy, naming the processes, while any other has it open.
    """
    data_dir = Path(settings.data_dir).expanduser()
    check_private_dir(data_dir, "data dir", create=True)  # before the lock file is made
    with DataDirLock(data_dir).exclusive():
        return _repair_locked(data_dir, open_memory, namespace=namespace,
                              manifest_blob_id=manifest_blob_id, progress=progress)


def _repair_locked(
    data_dir: Path,
    open_memory: Callable[[], RepairHost],
    *,
    namespace: str | None,
    manifest_blob_id: str | None,
    progress: ProgressCallback | None,
) -> tuple[CatalogRebuild | None, list[RepairReport]]:
    rebuild: CatalogRebuild | None = None
    problems: list[str] = []
    heads_path = data_dir / "heads.sqlite3"
    heads_problem = heads_store_problem(heads_path)
    heads_aside: Path | None = None
    writer: str | None = None
    if heads_problem is not None:
        heads_aside, writer = move_heads_store_aside(heads_path)
    try:
        mem = open_memory()
        problems = catalog_problems(mem.parts.catalog)
    except CatalogCorrupt as exc:
        problems = [str(exc)]
        mem = None
    unfinished = pending_salvage(data_dir)
    if problems:
        if mem is not None:
            mem.close()
        aside = aside_path(data_dir)
        _write_marker(data_dir, [*unfinished, aside])
        rebuild = CatalogRebuild(moved_to=move_catalog_aside(data_dir, aside), problems=problems)
        mem = open_memory()
    assert mem is not None
    with mem:
        heads = remembered_heads(data_dir)
        if rebuild is None:  # a usable catalog: only what it lacks of the remembered log
            heads = {ns: h for ns, h in heads.items() if _lacks_head(mem, ns)}
        if namespace is not None:
            heads = {ns: h for ns, h in heads.items() if ns == mem.namespace_name(namespace)}
        if manifest_blob_id is not None:
            heads[mem.namespace_name(namespace)] = [manifest_blob_id]
        if rebuild is None and (heads or unfinished):
            rebuild = CatalogRebuild(moved_to=None)
        if rebuild is not None:
            sources = [*unfinished, *([rebuild.moved_to] if rebuild.moved_to else [])]
            for ns, newest in sorted(heads.items()):
                try:  # every newest head at once: what sync would merge (restore doc)
                    rebuild.restored[ns] = mem.restore(ns, newest, progress=progress)
                except WalrusMemError as exc:  # the next repair tries again
                    rebuild.failed[ns] = f"{type(exc).__name__}: {exc}"
                if _unread(rebuild, ns) and check_lost_heads(mem.parts, ns, newest, sources):
                    try:  # the network lost those heads: they are recorded as gone
                        rebuild.restored[ns] = mem.restore(ns, newest, progress=progress)
                        rebuild.failed.pop(ns, None)
                    except WalrusMemError as exc:
                        rebuild.failed[ns] = f"{type(exc).__name__}: {exc}"
            if not heads and rebuild.moved_to is not None:
                rebuild.missing_heads.append(mem.namespace_name(namespace))
            for source in sources:  # salvage skips what the catalog already holds
                rebuild.salvaged_from.append(source)
                # Forgets first: a re-statement moved a fact to a new id and forgot the
                # old one; salvaged after a restore that brought the old id back, the new
                # id would be mapped onto the old (same text), which the forget then
                # removed, and the fact was gone. Then forgets again, for the namespaces
                # the salvage created (a no-op for those already carried).
                salvage_forgets(mem, source, rebuild)
                salvage_queued(mem, source, rebuild)
                salvage_forgets(mem, source, rebuild)
            if sources and not rebuild.failed and all(
                    r.complete for r in rebuild.restored.values()):
                (data_dir / _SALVAGE_MARKER).unlink(missing_ok=True)
        if heads_aside is not None:
            if rebuild is None:
                rebuild = CatalogRebuild(moved_to=None)
            rebuild.heads_moved_to, rebuild.heads_problem = heads_aside, heads_problem or ""
            rebuild_heads_store(mem, rebuild, writer)
        names = [mem.namespace_name(namespace)] if namespace is not None else mem.namespaces()
        reports = [repair_namespace(mem, ns) for ns in names if ns in mem.namespaces()]
    return rebuild, reports
