"""The memory engine: :class:`Memory`.

Write path (remember / remember_many / update)::

    normalise → dedupe (keyed hash) → embed (batched) → seal → ONE catalog
    transaction (row + vector + FTS + history + outbox) → publish (blob, or one
    quilt per ≤ 666 facts) → record blob id / patch id / end epoch → index

The sealed bytes are made once and kept in the catalog, so a retry after a
crash or a lost response republishes identical bytes (same blob id, no
duplicate blobs). If the publisher is unreachable the records stay ``queued``
(recallable at once) and :meth:`Memory.sync` publishes them later.

Read path (recall / get / list) is local: USearch + FTS5 + SQLite, no network,
except ``get(..., verify=True)`` which fetches and checks the blob.

Thread safety: one re-entrant lock guards the catalog and the indexes;
embedding and network calls run outside it, so a slow publisher does not
block recalls from other threads. Several processes may share a data dir
(SQLite WAL + busy timeout, a file lock around index saves, and the catalog's
change log that every process replays before a recall); each open Memory holds
the data-dir lock shared, so ``repair`` (exclusive) never runs under it.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._catalog.catalog import Catalog
from ._catalog.rows import record_from_row
from ._keys.chain import KeyChain
from ._local.datadir_lock import DataDirLock
from ._local.dir_trust import check_private_dir
from ._log.heads_mirror import default_state_dir
from ._log.namespace_log import NamespaceLog, ProgressCallback
from ._memory import follow, forgetting, maintenance, reading, syncing, writer
from ._memory.epochs import Epochs
from ._memory.inputs import UNSET, validate_idempotency_key, validate_memory_id
from ._memory.network_reset import mark_published, suspect_logged
from ._memory.network_reset import settle as settle_network_reset
from ._memory.parts import Parts
from ._memory.publisher import Publisher
from ._memory.records import Item
from ._memory.rotation import RotationReport, adopt_keys, reseal_fetched, rotate_key
from ._memory.writer import CATEGORY_IMPORTANCE, DEFAULT_IMPORTANCE
from ._recall.embedding import Embedding
from ._recall.embeddings import Embedder, make_embedder
from ._recall.index_store import IndexStore
from ._recall.ranking import FusionParams
from ._walrus.epoch_guard import clock_guard
from ._walrus.expiry import EpochClock
from ._walrus.storage import Backend
from .config import Settings
from .errors import InvalidInput, MemoryNotFound, WalrusMemError
from .keys import MasterSeed, NamespaceKeys, resolve_master_seed, validate_namespace
from .models import (
    ExtendReport,
    ForgetReport,
    HistoryEntry,
    MemoryRecord,
    MemoryStats,
    PullReport,
    RecallResult,
    RememberManyResult,
    RestoreReport,
    SyncReport,
)
from .walrus import WalrusClient

if TYPE_CHECKING:
    from ._agents.consolidate import ConsolidationReport
    from ._log.heads import HeadRef
    from ._memory.grants import Grant

__all__ = ["CATEGORY_IMPORTANCE", "DEFAULT_IMPORTANCE", "Memory", "ProgressCallback"]

log = logging.getLogger(__name__)


class Memory:
    """Encrypted long-term memory: remember facts, recall them by meaning.

    **Usage**::

        with Memory() as mem:   # Settings from env / config file; embedded relayer by default
            mem.remember("I'm allergic to peanuts", namespace="researcher",
                         metadata={"source": "chat"}, category="identity")
            for hit in mem.recall("food allergies", namespace="researcher", k=5):
                print(hit.score, hit.text)

    Args:
        settings: configuration; ``None`` reads env vars and the config file.
        embedder: any :class:`~walrus_mem.Embedder`; default: the configured
            sentence-transformers model, loaded on first use.
        master_key: explicit master key (hex, bytes or MasterSeed); it wins
            over every other key source.
        walrus: an injected :class:`~walrus_mem.walrus.WalrusClient` (tests).

    Construction opens the catalog only: no network, no model load, no key
    lookup until an operation needs them.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        master_key: str | bytes | MasterSeed | None = None,
        walrus: WalrusClient | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.load()
        if embedder is not None and not isinstance(embedder, Embedder):
            raise InvalidInput("embedder must have model_id, dim and embed(texts)")
        embedder_ = embedder if embedder is not None else make_embedder(
            self.settings.embedding_model, batch_size=self.settings.embedding_batch_size,
            threads=self.settings.embedding_threads, backend=self.settings.embedding_backend,
            shown=self.settings.from_placeholder("embedding_model"),
        )
        # Parsed now, so no raw key string is kept (MasterSeed shows only a fingerprint),
        # and before the data dir is touched: a malformed key changes nothing there.
        master = None if master_key is None else resolve_master_seed(master_key)[0]
        self.data_dir = Path(self.settings.data_dir).expanduser()
        # Refused before anything is opened there if another user could change it.
        check_private_dir(self.data_dir, "data dir", create=True)
        check_private_dir(self.settings.state_dir or default_state_dir(), "state dir",
                          create=False)
        self._lock = threading.RLock()
        # Shared for this Memory's lifetime: repair (exclusive) refuses while it is open.
        self._dir_lock = DataDirLock(self.data_dir).shared()
        try:
            self._catalog = Catalog(self.data_dir / "catalog.sqlite3")
            self._catalog.epoch_guard = clock_guard(lambda: self.epoch_clock)
            self._indexes = IndexStore(self.data_dir / "index", self._catalog, lock=self._lock)
        except BaseException:
            self._dir_lock.release()
            raise
        self._closed = False
        self._keychain = KeyChain(self.settings, self._catalog, self._lock, master)
        self._embedding = Embedding(self.settings, self._catalog, embedder_, self._lock)
        self._publisher = Publisher(self.settings, self._catalog, self._lock, self._keychain,
                                    walrus, self._check_open)
        self._epochs = Epochs(self.settings, self._catalog, self._publisher)
        self._log = NamespaceLog(
            self, self._catalog, self._indexes, self._lock, deleter=self._publisher,
            adopt_keys=self._adopt_generation)
        self._publisher.log = self._log
        self._parts = Parts(self.settings, self.data_dir, self._catalog, self._indexes,
                            self._lock, self._keychain, self._embedding, self._publisher,
                            self._epochs, self._log, self._remember_as)

    # -- plumbing -----------------------------------------------------------------

    def __repr__(self) -> str:
        mode = "embedded" if self.settings.embedded else "remote"
        return f"<Memory data_dir={str(self.data_dir)!r} {mode} model={self.embedder.model_id}>"

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder:
        return self._embedding.embedder

    @property
    def catalog_path(self) -> Path:
        return self._catalog.path

    @property
    def walrus(self) -> WalrusClient:
        """The Walrus client (built on first use; embedded relayer when no URL is set)."""
        return self._publisher.client

    def close(self) -> None:
        """Save indexes, close the Walrus client and the catalog. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._indexes.close()
            finally:
                try:
                    self._publisher.close()
                finally:
                    try:
                        self._log.close()
                        self._catalog.close()
                    finally:
                        self._dir_lock.release()

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInput("this Memory is closed")

    def _get_backend(self) -> Backend:  # tests and the CLI's doctor call it
        return self._publisher.backend()

    @property
    def parts(self) -> Parts:
        """The collaborators this Memory built (catalog, keys, publisher, log, ...), for
        walrus_mem's own modules (repair, doctor); not a stable API."""
        return self._parts

    def namespace_name(self, namespace: str | None) -> str:
        """``namespace`` validated, or the configured default namespace."""
        name = self.settings.default_namespace if namespace is None else namespace
        return validate_namespace(name)

    def _ns(self, namespace: str | None) -> str:
        return self.namespace_name(namespace)

    def _adopt_generation(self, namespace: str, keys: NamespaceKeys) -> bool:
        # handed to the log: a fresh data dir adopts the generation a verified head has
        return adopt_keys(self._parts, namespace, keys)

    def derive_keys(self, namespace: str, *, generation: int | None = None) -> NamespaceKeys:
        """The namespace's keys (of ``generation``, default the current one), without
        registering the namespace in the catalog."""
        return self._keychain.derive(self._ns(namespace), generation)

    def reseal_fetched(self, namespace: str, ids: set[str]) -> int:
        """Seal again under the current generation what a merge took from blobs of a
        retired one (_log/older.py, rotation.py); queued for the next publish."""
        return reseal_fetched(self._parts, namespace, ids)

    def publish_queued(self, namespace: str) -> list[str]:
        """Publish the namespace's outbox now (a merge re-sealed memories); its errors."""
        return self._parts.publisher.flush(namespace)[1]

    def publish_pooled(self, namespace: str | None = None) -> tuple[int, builtins.list[str]]:
        """Publish the outbox now, never-tried batches pooled into the cheapest quilts
        (publisher.pool), then a periodic manifest if due; (facts published, errors)."""
        self._check_open()
        return syncing.publish_pooled(self._parts, self._ns(namespace))

    def keys_for(self, namespace: str | None = None) -> NamespaceKeys:
        """The namespace's keys (resolved lazily, cached); registers the namespace.

        Raises :class:`AccessDenied` if the namespace was created under a
        different key than the one configured now.
        """
        return self._keychain.for_namespace(self._ns(namespace))

    def check_model(self, namespace: str) -> None:
        """Raise ModelMismatch if ``namespace`` was indexed with another embedding model."""
        self._embedding.check_model(namespace)

    def embed_texts(self, texts: builtins.list[str]) -> npt.NDArray[np.float32]:
        """Embed with this Memory's embedder (batched, checked, one caller at a time)."""
        return self._embedding.embed(texts)

    # -- write path -----------------------------------------------------------------

    def remember(
        self,
        text: str | bytes,
        *,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        category: str | None = None,
        importance: float | None = None,
        expires_at: Any = None,
        idempotency_key: str | None = None,
    ) -> MemoryRecord:
        """Remember one fact; return its record (``status`` queued or published).

        A text equal (after normalisation) to a live memory of the namespace is
        a re-statement: that memory moves to a new id (same content, published
        like a new memory; the old id is forgotten) and comes back with
        ``deduplicated=True``, so a forget of the old id made on another machine
        cannot take the fact just stated again away (:mod:`walrus_mem._memory.restate`).
        A retry of one call should pass an ``idempotency_key``: with a key
        already used in this namespace, the memory stored by that earlier call
        is returned (``deduplicated=True``) and nothing is written.
        ``importance`` defaults by category (identity .95 ... ; else 0.5).
        """
        self._check_open()
        ns = self._ns(namespace)
        key = validate_idempotency_key(idempotency_key)
        item = writer.prepare(self.settings, 0, text, metadata, category, importance, expires_at)
        result = writer.store(self._parts, ns, [item], [], key)
        if not result.records:  # replay of a memory forgotten since
            raise MemoryNotFound(
                f"the memory stored under idempotency key {key!r} has been forgotten"
            )
        record = result.records[0]
        return record.model_copy(update={"deduplicated": True}) if result.replayed else record

    def _remember_as(self, memory_id: str, text: str, *, namespace: str,
                     metadata: Mapping[str, Any] | None, category: str | None,
                     importance: float | None, expires_at: Any) -> MemoryRecord:
        """Remember a fact under an id it already had (repair salvage of a memory no head
        lists): other machines that saw it under that id then merge, not duplicate, it.
        A live memory with the same text wins as in :meth:`remember`."""
        self._check_open()
        ns = self._ns(namespace)
        item = writer.prepare(self.settings, 0, text, metadata, category, importance, expires_at)
        item.memory_id = validate_memory_id(memory_id)
        return writer.store(self._parts, ns, [item], [], None).records[0]

    def remember_many(
        self,
        items: Sequence[str | bytes | Mapping[str, Any]],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
        publish: bool | None = None,
    ) -> RememberManyResult:
        """Remember many facts: one quilt per ≤ 666 new facts instead of one blob each.

        ``items`` are strings or dicts ``{text, metadata?, category?,
        importance?, expires_at?}``. Bad items are reported in ``failed`` with
        their index and never abort the others. An item whose text equals (after
        normalisation) a live memory's or an earlier item's is counted in
        ``deduplicated`` and gets that memory's record: its own metadata is not
        kept (merge it into the first item to keep both); a live memory's is
        re-stated under a new id, as in :meth:`remember`. With an
        ``idempotency_key`` already used in this namespace, the earlier result is
        returned (``replayed=True``) and nothing is stored. ``publish=False``: the facts
        stay queued (:meth:`publish_pooled` or :meth:`sync` publishes), else per publish_writes.
        """
        self._check_open()
        ns = self._ns(namespace)
        key = validate_idempotency_key(idempotency_key)
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidInput("items must be a list of strings or dicts")
        prepared: list[Item] = []
        failed: list[tuple[int, str]] = []
        allowed = {"text", "metadata", "category", "importance", "expires_at"}
        for i, raw in enumerate(items):
            try:
                if isinstance(raw, Mapping):
                    unknown = set(raw) - allowed
                    if unknown:
                        names = ", ".join(sorted(map(str, unknown)))
                        raise InvalidInput(f"unknown item fields: {names}")
                    if "text" not in raw:
                        raise InvalidInput("item has no 'text'")
                    prepared.append(writer.prepare(self.settings, 
                        i, raw["text"], raw.get("metadata"), raw.get("category"),
                        raw.get("importance"), raw.get("expires_at"),
                    ))
                else:
                    prepared.append(writer.prepare(self.settings, i, raw))
            except (InvalidInput, WalrusMemError) as exc:
                failed.append((i, f"{type(exc).__name__}: {exc}"))
        return writer.store(self._parts, ns, prepared, failed, key, publish)

    def share(
        self, memory_ids: Sequence[str] | str, *, to: str | bytes, namespace: str | None = None
    ) -> Grant:
        """Seal copies of these memories for one recipient (its Ed25519 public key) and
        publish them as one blob; give the returned ``Grant.reference`` to the recipient.
        See :mod:`walrus_mem._memory.grants`."""
        self._check_open()
        from ._memory.grants import share

        return share(self, list(memory_ids) if not isinstance(memory_ids, str) else memory_ids,
                     to=to, namespace=namespace)

    def accept(self, grant: str, *, namespace: str | None = None) -> RememberManyResult:
        """Open a grant sealed to ``namespace``'s key and remember its memories there
        (idempotent). :class:`GrantError` if it is not for this key."""
        self._check_open()
        from ._memory.grants import accept

        return accept(self, grant, namespace=namespace)

    def analyze(
        self,
        text_or_messages: Any,
        *,
        namespace: str | None = None,
        extractor: Any = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> RememberManyResult:
        """Extract short standalone facts from text or chat messages and remember them.

        Uses the offline heuristic extractor unless ``extractor`` is given (any
        :class:`walrus_mem.extract.Extractor`, e.g. ``LLMExtractor``). Facts
        flagged as prompt injection are dropped and credentials redacted (see
        :func:`walrus_mem.extract.analyze`).
        """
        from .extract import analyze  # lazy: keeps the extractor out of the import path

        return analyze(
            self, text_or_messages, namespace=namespace, extractor=extractor,
            metadata=metadata, idempotency_key=idempotency_key,
        )

    # -- publishing -----------------------------------------------------------------

    def _flush(self, namespace: str | None) -> tuple[int, list[str]]:  # tests call it
        return self._publisher.flush(namespace)

    # -- recall --------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        namespace: str | None = None,
        k: int = 5,
        filters: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        include_expired: bool = False,
        params: FusionParams | None = None,
    ) -> RecallResult:
        """Hybrid recall: ANN + bm25 candidates, fused, filtered, cut at ``min_score``.

        Local only (no network). ``min_score=None`` uses the default cutoff
        (``walrus_mem._recall.ranking.DEFAULT_MIN_SCORE``, or ``Settings.min_score``
        if that is set above 0); pass ``0`` to disable it. The result is a list
        of :class:`RecallHit`, best first, with ``filtered_out`` and
        ``below_min_score`` counts.
        """
        self._check_open()
        return reading.recall(self._parts, self._ns(namespace), query, k=k, filters=filters,
                              min_score=min_score, include_expired=include_expired,
                              params=params)


    # -- reads ------------------------------------------------------------------------

    def get(
        self, memory_id: str, *, namespace: str | None = None, verify: bool = False
    ) -> MemoryRecord:
        """A memory by id from the local catalog.

        ``verify=True`` also fetches its blob (or quilt patch) from the
        aggregators, checks the signature, the memory id and version, and that
        text and metadata equal the catalog's; an aggregator serving anything
        else is skipped for the next one. Raises
        :class:`~walrus_mem.errors.VerificationFailed` if none serves it.
        """
        self._check_open()
        ns = self._ns(namespace)
        mid = validate_memory_id(memory_id)
        self._keychain.authorize(ns)
        row = self._catalog.memory(ns, mid)
        if row is None:
            raise MemoryNotFound(f"no memory {mid} in namespace {ns!r}")
        record = record_from_row(row)
        if verify:
            self._verify_remote(ns, record)
        return record

    def _verify_remote(self, ns: str, record: MemoryRecord) -> None:
        reading.verify_remote(self._parts, ns, record)

    def list(
        self,
        namespace: str | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        include_expired: bool = False,
    ) -> builtins.list[MemoryRecord]:
        """Memories of a namespace, newest first, optionally filtered."""
        self._check_open()
        return reading.newest(self._parts, self._ns(namespace), filters=filters, limit=limit,
                              offset=offset, include_expired=include_expired)

    def namespaces(self) -> builtins.list[str]:
        """Namespaces known to this data dir."""
        self._check_open()
        return self._catalog.namespaces()

    def consolidate(
        self,
        namespace: str | None = None,
        *,
        similarity: float = 0.92,
        min_age: timedelta = timedelta(hours=1),
        dry_run: bool = False,
    ) -> ConsolidationReport:
        """Merge near-duplicates, retire superseded facts.

        See :mod:`walrus_mem._agents.consolidate`.
        """
        from ._agents.consolidate import consolidate

        return consolidate(self, namespace, similarity=similarity, min_age=min_age,
                           dry_run=dry_run)

    def query_vector(self, text: str) -> npt.NDArray[np.float32]:
        """The embedding recall uses for ``text`` (cached: right after a recall it is free)."""
        self._check_open()
        return self._embedding.embed_query(text.strip())

    def stored_vectors(
        self, ids: Sequence[str], *, namespace: str | None = None
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The embeddings computed at remember time, by memory id (no re-embedding)."""
        self._check_open()
        ns = self._ns(namespace)
        self._keychain.authorize(ns)  # embeddings say much about the texts they embed
        rows = self._catalog.memories_by_ids(ns, list(ids))
        by_key = self._catalog.vectors_by_keys(ns, [int(r["key"]) for r in rows.values()])
        return {mid: by_key[int(r["key"])] for mid, r in rows.items() if int(r["key"]) in by_key}

    def history(
        self, memory_id: str, *, namespace: str | None = None
    ) -> builtins.list[HistoryEntry]:
        """Every version of a memory, oldest first; a forgotten one ends in a DELETE tombstone."""
        self._check_open()
        return reading.history(self._parts, self._ns(namespace), memory_id)

    # -- update / forget ---------------------------------------------------------------

    def update(
        self,
        memory_id: str,
        text: str | bytes | None = None,
        *,
        namespace: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        category: str | None = None,
        importance: float | None = None,
        expires_at: Any = UNSET,
    ) -> MemoryRecord:
        """Seal and publish a new version of a memory; the id stays the same.

        The previous version (and its blob id) stays in :meth:`history`.
        Fields left ``None`` keep their value; ``expires_at=None`` clears the
        expiry. Re-embeds when the text changes.
        """
        self._check_open()
        return writer.update(self._parts, self._ns(namespace), validate_memory_id(memory_id),
                             text, metadata, category, importance, expires_at)

    def forget(self, memory_id: str, *, namespace: str | None = None) -> ForgetReport:
        """Forget a memory: index, FTS, catalog text, outbox and later manifests.

        History keeps a ``DELETE`` tombstone and the versions' blob ids, with
        no text. Blobs are deleted where the backend allows it (see
        docs/forget.md for exactly what this guarantees). A new manifest is
        published right away when the namespace already has one.
        """
        self._check_open()
        ns = self._ns(namespace)
        mid = validate_memory_id(memory_id)
        self._keychain.authorize(ns)
        if self._catalog.memory(ns, mid) is None:
            raise MemoryNotFound(f"no memory {mid} in namespace {ns!r}")
        return forgetting.forget(self._parts, ns, [mid])

    def forget_all(self, namespace: str | None = None, *, confirm: bool = False) -> ForgetReport:
        """Forget every memory of a namespace. Requires ``confirm=True``."""
        self._check_open()
        ns = self._ns(namespace)
        if confirm is not True:
            raise InvalidInput("forget_all needs confirm=True")
        self._keychain.authorize(ns)
        return forgetting.forget(self._parts, ns, self._catalog.memory_ids(ns))

    # -- sync / manifests / restore ------------------------------------------------------

    def sync(self, namespace: str | None = None) -> SyncReport:
        """Publish the outbox, merge heads learned elsewhere, then publish manifests.

        ``namespace=None`` syncs every namespace. Heads in the heads file
        (``Settings.heads_file``) that this data dir has not merged are pulled
        first, so the manifest published descends from them; the new head is
        written back there and reported in ``manifests``. A namespace with an
        interrupted restore publishes no manifest (reported in ``errors``); an
        interrupted key rotation is finished first (rotation.finish_rotation), and
        a head of a newer key generation (a rotation made on another machine) is
        followed: this data dir rotates to it, the rotation's manifest is the one
        reported (``pulled[ns].key_generation``, docs/keys.md).
        Never raises for storage errors: they are reported and the records
        stay queued.
        """
        self._check_open()
        return syncing.sync(self._parts, None if namespace is None else self._ns(namespace))

    def reset_followed(self, namespace: str, ref: HeadRef) -> bool:
        """A seen head of ``namespace`` answered 404 before its end epoch: whether the
        network was wiped or its epochs reset, which is then followed (network_reset.py)."""
        return suspect_logged(self._parts, namespace, ref)

    def settle_reset(self, namespace: str,
                     backwards: tuple[int, int] | None = None) -> None:
        """Before a manifest of ``namespace``: a suspected wipe / epoch reset is settled and
        what the network lost stored again first (network_reset.py)."""
        settle_network_reset(self._parts, namespace, backwards)

    def manifest_published(self, namespace: str, ref: HeadRef) -> None:
        """A manifest of ``namespace`` was stored and read back (network_reset.py)."""
        mark_published(self._parts, namespace, ref)

    def _publish_manifest(self, ns: str) -> str:
        """Publish a manifest of ``ns`` now (see :meth:`NamespaceLog.publish`); its head."""
        return self._log.publish(ns)

    def restore(
        self,
        namespace: str | None = None,
        manifest_blob_id: str | Sequence[str] | None = None,
        progress: ProgressCallback | None = None,
        *,
        allow_stale: bool = False,
        allow_unrelated: bool = False,
        allow_legacy: bool = False,
    ) -> RestoreReport:
        """Rebuild (or complete) a namespace's catalog and index from Walrus alone.

        ``manifest_blob_id`` is a head reference ``<blob id>.<seq>.<digest>``
        (what ``sync`` reports), or a bare blob id of a manifest this data dir
        has seen, or several of them (concurrent heads, merged in one restore:
        ``repair`` passes every newest head it knows). Default: resume an
        interrupted restore, else the newest heads this data dir has seen
        (they survive the catalog's loss in ``heads.sqlite3``) and those in
        the heads file. The manifest is
        checked against the reference; every fact blob / quilt patch it lists
        is fetched (many per read of their quilt), verified and merged in
        (merge.py's rule) with the vector sealed in it; a fact whose vector another
        model or other weights made, or that carries none, is re-embedded
        (``reembedded``, with the reason), so
        memories forgotten here stay forgotten. ``progress(done, total)`` is
        called as facts are processed; a resumed restore starts where the
        interrupted one stopped. Raises StaleManifest for a head older than
        one already seen (unless ``allow_stale``), ForkedHead for one with an
        unrelated history (unless ``allow_unrelated``); a failure leaves the
        data dir as it was (a wrong key changes nothing). A namespace this
        catalog holds under another key, even an empty one, raises
        :class:`AccessDenied` before anything is read or written.

        ``manifest_blob_id`` may also be the bare blob id of a format-1
        manifest (what ``sync`` reported before head references) when
        ``allow_legacy`` is set; without it that raises LegacyManifest, since
        nothing can detect a rollback to an older format-1 manifest. Its
        memories are merged as a root of no history: the next ``sync``
        publishes a format-2 manifest with no parents (docs/sync.md).

        A head sealed under a newer key generation of the namespace (a rotation
        made on another machine) is taken only once its manifest verifies under
        that generation: a data dir holding nothing of the namespace adopts the
        generation, one holding it under an older generation follows the rotation
        (re-seals and re-publishes its memories) and then merges; ``key_generation``
        in the report says so (docs/keys.md, "Following a rotation").
        """
        self._check_open()
        return follow.restore(self._parts, self._ns(namespace), manifest_blob_id, progress,
                              allow_stale=allow_stale, allow_unrelated=allow_unrelated,
                              allow_legacy=allow_legacy)

    def pull(
        self,
        heads: str | Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        allow_stale: bool = False,
        allow_unrelated: bool = False,
        progress: ProgressCallback | None = None,
        allow_legacy: bool = False,
    ) -> PullReport:
        """Merge other machines' heads of a namespace into this data dir.

        ``heads``: one or more head references (``<blob id>.<seq>.<digest>``,
        as printed by ``sync``), or None for the newest heads known here
        (heads store and heads file). The result is the union of memories;
        a memory changed on both sides resolves by one rule (higher version,
        then later update, then larger digest; the loser stays in
        ``history`` as CONFLICT) and a forget anywhere wins (docs/sync.md).
        The next ``sync`` publishes a manifest descending from every head
        pulled. Raises StaleManifest / ForkedHead like :meth:`restore`; a
        format-1 manifest's blob id needs ``allow_legacy`` (see :meth:`restore`).
        A head of a newer key generation is followed as :meth:`restore` says.
        """
        self._check_open()
        return follow.pull(self._parts, self._ns(namespace), heads, allow_stale=allow_stale,
                           allow_unrelated=allow_unrelated, progress=progress,
                           allow_legacy=allow_legacy)

    def rotate_key(self, namespace: str | None = None, *, delete_old: bool = False
                   ) -> RotationReport:
        """Move a namespace to a new key generation: re-seal and re-publish every live
        memory, publish a new manifest, record the old generation (see
        :mod:`walrus_mem._memory.rotation`). Running it again finishes an interrupted rotation;
        it refuses (RestoreIncomplete) while a pull or restore of the namespace is
        unfinished. ``delete_old`` deletes every blob of the older generations this
        data dir knows (versions, manifests, pages, accepted grants) where the backend
        allows, and reports the rest (``kept_blobs``; docs/keys.md)."""
        self._check_open()
        return rotate_key(self._parts, self._ns(namespace), delete_old=delete_old)

    # -- expiry ------------------------------------------------------------------------

    @property
    def epoch_clock(self) -> EpochClock:
        """The epoch clock learned from store responses (see :mod:`walrus_mem._walrus.expiry`);
        its epoch length is ``epoch_seconds``, else the network's the endpoints name."""
        return self._epochs.clock

    def current_epoch(self) -> int | None:
        """The current Walrus epoch: the mock's clock if it has one, else the epoch clock
        (its lagging estimate; see :meth:`epoch_estimate` for whether it can be trusted)."""
        self._check_open()
        return self._epochs.current_epoch()

    def probe_epoch(self) -> int | None:
        """Read the current epoch from the publisher: store 32 random bytes for one epoch
        and note the epoch the answer names (real Walrus has no route that tells it).

        One small blob store (one blob for one epoch), or none: ``network_info_command``'s
        epoch. Raises the store's :class:`StorageError` when the publisher fails."""
        self._check_open()
        return self._epochs.probe_epoch()

    def epoch_estimate(
        self, *, probe: bool = False, fresh_since: float | None = None
    ) -> tuple[int | None, bool]:
        """(current epoch, known): the mock's exact clock; else the epoch clock when it
        bounds the epoch to within one (or its newest sighting is from ``fresh_since`` or
        later); else, with ``probe``, the epoch a probe store names (:meth:`probe_epoch`).
        Otherwise the clock's lagging estimate and ``known=False``."""
        self._check_open()
        return self._epochs.epoch_estimate(probe=probe, fresh_since=fresh_since)

    def expiring(
        self, within_epochs: int = 1, *, namespace: str | None = None, probe: bool = False
    ) -> builtins.list[MemoryRecord]:
        """Published memories whose blob expires within ``within_epochs`` epochs.

        ``namespace=None`` looks at every namespace. End epochs are exclusive:
        a blob with ``end_epoch = current + 1`` is readable for the rest of
        the current epoch only. Raises :class:`EpochUnknown` when the epoch clock
        cannot tell the current epoch to within one (no known epoch length and no
        recent store answer) rather than answer from a stale epoch; ``probe=True``
        then stores one small blob to read it (:meth:`probe_epoch`).
        """
        self._check_open()
        return maintenance.expiring(self._parts, within_epochs,
                                    None if namespace is None else self._ns(namespace), probe)

    def extend(
        self,
        memory_ids: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        epochs: int | None = None,
    ) -> ExtendReport:
        """Re-publish memories' sealed bytes for ``epochs`` more epochs (default Settings.epochs).

        ``memory_ids=None`` extends every published memory of the namespace
        (combine with :meth:`expiring` to pick the ones that need it). The
        same sealed bytes are stored again (grouped into quilts), so the
        content and its signature are unchanged; blob / patch ids and end
        epochs are updated, and the next manifest lists the new locations.
        """
        self._check_open()
        return maintenance.extend(self._parts, self._ns(namespace), memory_ids, epochs)

    # -- maintenance -------------------------------------------------------------------

    def reindex(self, namespace: str | None = None) -> int:
        """Re-embed every memory of a namespace with this Memory's embedder.

        The way out of :class:`~walrus_mem.errors.ModelMismatch` after
        changing the embedding model. Local only; returns the count.
        """
        self._check_open()
        return maintenance.reindex(self._parts, self._ns(namespace))

    def compact(self, namespace: str | None = None) -> None:
        """Rewrite local files so nothing forgotten lingers in them.

        Rebuilds the namespace's USearch file from the catalog (USearch keeps
        removed vectors in its file until then), merges the FTS5 index and
        VACUUMs the catalog. O(n): run it after forgetting, not on every call.
        """
        self._check_open()
        maintenance.compact(self._parts, self._ns(namespace))

    def stats(self, namespace: str | None = None) -> MemoryStats:
        """Counts, sizes, model and latest manifest of a namespace (local, no network)."""
        self._check_open()
        return maintenance.stats(self._parts, self._ns(namespace))
