"""Public record types returned by :class:`walrus_mem.Memory`.

All are pydantic models (frozen where they describe stored state), except
:class:`RecallResult`, a ``list`` of :class:`RecallHit` that also says how many
candidates the filters and the relevance cutoff removed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, SupportsIndex, overload

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ExtendReport",
    "ForgetReport",
    "HistoryEntry",
    "MemoryRecord",
    "MemoryStats",
    "PullReport",
    "RecallHit",
    "RecallResult",
    "RememberManyResult",
    "RestoreReport",
    "SyncReport",
    "from_timestamp",
]

Status = Literal["published", "queued"]
HistoryEvent = Literal["ADD", "UPDATE", "DELETE", "RESTORE", "MERGE", "CONFLICT"]


def from_timestamp(ts: float | None) -> datetime | None:
    """Unix seconds (as stored in the catalog) to an aware UTC datetime."""
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


class MemoryRecord(BaseModel):
    """One remembered fact, as held in the local catalog.

    ``status`` is ``queued`` until the sealed blob is on Walrus; then
    ``blob_id`` (and ``quilt_patch_id`` for facts stored in a quilt) and
    ``end_epoch`` (exclusive: the blob is readable through epoch
    ``end_epoch - 1``) are set. ``deduplicated`` is true when ``remember``
    found the text already remembered: the memory re-stated under a new id
    (walrus_mem._memory.restate), or an earlier item of the same call.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    namespace: str
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    category: str | None = None
    importance: float = 0.5
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    version: int = 1
    status: Status
    blob_id: str | None = None
    quilt_patch_id: str | None = None
    end_epoch: int | None = None
    deduplicated: bool = False


class RecallHit(BaseModel):
    """A recalled record with its fused ``score`` and the components behind it.

    ``dense`` is the cosine similarity, ``lexical`` the normalised keyword
    (bm25) score in [0, 1] (``None`` when the text does not match the query's
    terms), ``context`` the relevance inherited from the memory written just
    before it (an answer after a question), ``recency`` and ``importance`` the
    factors' inputs (see walrus_mem._recall.ranking for the formula).
    """

    model_config = ConfigDict(frozen=True)

    record: MemoryRecord
    score: float
    dense: float | None = None
    lexical: float | None = None
    recency: float = 0.0
    importance: float = 0.0
    context: float = 0.0

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def text(self) -> str:
        return self.record.text

    @property
    def metadata(self) -> dict[str, Any]:
        return self.record.metadata

    @property
    def category(self) -> str | None:
        return self.record.category


class RecallResult(list[RecallHit]):
    """The hits of one recall, best first, plus what was left out.

    It is a plain ``list`` (``for hit in mem.recall(...)`` works) with three
    attributes: ``candidates`` (how many were scored), ``filtered_out`` (how
    many the metadata filters removed) and ``below_min_score`` (how many the
    relevance cutoff removed).
    """

    def __init__(
        self,
        hits: Sequence[RecallHit] = (),
        *,
        candidates: int = 0,
        filtered_out: int = 0,
        below_min_score: int = 0,
    ) -> None:
        super().__init__(hits)
        self.candidates = candidates
        self.filtered_out = filtered_out
        self.below_min_score = below_min_score

    def __repr__(self) -> str:
        return (
            f"RecallResult({list.__repr__(self)}, candidates={self.candidates}, "
            f"filtered_out={self.filtered_out}, below_min_score={self.below_min_score})"
        )


class RememberManyResult(BaseModel):
    """Outcome of :meth:`Memory.remember_many`: nothing is dropped silently.

    ``records`` holds one record per accepted item, in input order (items in
    ``failed`` are skipped). ``stored`` counts new records, ``deduplicated``
    the items that matched an existing memory, ``queued`` the new records not
    yet on Walrus, and ``failed`` lists ``(input index, error message)``.
    ``replayed`` is true when the ``idempotency_key`` had been used before and
    this is the earlier result (nothing was stored by this call).
    Iterating the result iterates ``records``.
    """

    model_config = ConfigDict(frozen=True)

    records: list[MemoryRecord] = Field(default_factory=list)
    stored: int = 0
    deduplicated: int = 0
    queued: int = 0
    failed: list[tuple[int, str]] = Field(default_factory=list)
    replayed: bool = False

    def __iter__(self) -> Iterator[MemoryRecord]:  # type: ignore[override]
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    @overload
    def __getitem__(self, index: SupportsIndex) -> MemoryRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[MemoryRecord]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> MemoryRecord | list[MemoryRecord]:
        return self.records[index]


class HistoryEntry(BaseModel):
    """One event in a memory's history. ``text`` is ``None`` once forgotten."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    namespace: str
    version: int
    event: HistoryEvent
    text: str | None = None
    metadata: dict[str, Any] | None = None
    at: datetime
    blob_id: str | None = None
    quilt_patch_id: str | None = None
    end_epoch: int | None = None


class MemoryStats(BaseModel):
    """Counts, sizes and configuration of one namespace (see ``Memory.stats``)."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    memories: int
    published: int
    queued: int
    forgotten: int
    text_bytes: int
    sealed_bytes: int
    index_vectors: int
    index_path: Path
    index_bytes: int
    index_pending: int = 0
    """Memories recall finds by an exact scan while the background builder has not put
    them in the HNSW graph yet (after a restore or pull; ``index_building``: it runs)."""
    index_building: bool = False
    catalog_path: Path
    catalog_bytes: int
    model_id: str | None
    dim: int | None
    key_fingerprint: str | None
    manifest_blob_id: str | None
    manifest_seq: int
    manifest_at: datetime | None
    outbox_batches: int
    current_epoch: int | None
    embedded: bool
    data_dir: Path
    # What this data dir's stores of the namespace paid, in storage units (1 MiB of
    # encoded size for one epoch; the Walrus cost model, docs/walrus.md): facts, the log
    # (manifests and pages), renewals (extend / sync), and their total.
    storage_units: int = 0
    fact_units: int = 0
    log_units: int = 0
    renewal_units: int = 0
    stores: int = 0
    facts_stored: int = 0
    units_per_1000_facts: float | None = None
    # What renewing the blobs the live memories are in now costs, per epoch and for the
    # configured ``epochs`` (stored as they are; a renewal re-packs them, often for less).
    renewal_units_per_epoch: int = 0
    renewal_estimate_units: int = 0


class PullReport(BaseModel):
    """Outcome of :meth:`Memory.pull`: what merging the heads changed here.

    ``added`` / ``updated`` / ``forgotten`` count local changes; ``conflicts``
    versions that lost the merge rule (kept in ``history`` as CONFLICT);
    ``deduplicated`` memories merged in whose text another live memory holds
    (twins: both stay, recall shows one; docs/sync.md);
    ``deleted_blobs`` / ``kept_blobs``: this data dir's blobs of the memories
    forgotten by the merge, deleted or kept with the reason, as in
    :class:`ForgetReport`;
    ``missing`` / ``expired`` (memory id, blob id) pairs whose blob is gone
    (a missing one stays pending: retried by later pulls and syncs and listed in
    this data dir's manifests meanwhile, docs/sync.md);
    ``unreadable`` (memory id, reason) entries whose location serves no good
    bytes (blocked, 451; wrong or tampered bytes): another writer's bad entry,
    pending as a missing one is, never blocking this one;
    ``failed`` fetches that may succeed later (an outage: then ``complete`` is
    False and the namespace stays marked until a pull or restore finishes it).
    """

    model_config = ConfigDict(frozen=True)

    namespace: str
    heads: list[str] = Field(default_factory=list)
    legacy: str | None = None
    """Blob id of the format-1 manifest merged (``allow_legacy``); it has no head."""
    total: int = 0
    added: int = 0
    updated: int = 0
    forgotten: int = 0
    conflicts: int = 0
    deduplicated: int = 0
    deleted_blobs: list[str] = Field(default_factory=list)
    kept_blobs: dict[str, str] = Field(default_factory=dict)
    unchanged: int = 0
    missing: list[tuple[str, str]] = Field(default_factory=list)
    expired: list[tuple[str, str]] = Field(default_factory=list)
    unreadable: list[tuple[str, str]] = Field(default_factory=list)
    failed: list[tuple[str, str]] = Field(default_factory=list)
    complete: bool = True
    resumed: bool = False
    up_to_date: bool = False
    skipped: list[str] = Field(default_factory=list)
    """Heads-file heads that cannot be merged (``"<head>: <reason>"``), left out; seen
    heads whose manifest answers 404 before its end epoch passed, not merged now and read
    again by the next pull; and those whose manifest is gone from Walrus past its end
    epoch, recorded as parents (docs/sync.md)."""
    equivocations: list[str] = Field(default_factory=list)
    """Pairs of different manifests one writer published with the same seq (a data dir
    restored from a backup, or copied, that forgot its newer manifest), among the heads
    merged here: both were merged (nothing either lists is lost) and are named here."""
    reembedded: int = 0
    """Memories merged in whose text was embedded again here, because the vector sealed
    with them was made by another model (or other weights) or they carry none (sealed
    before vectors travelled); the others' sealed vectors were inserted as they are."""
    reembedded_because: dict[str, int] = Field(default_factory=dict)
    """Why they were re-embedded: reason -> count."""
    key_generation: int | None = None
    """Set when this call moved the namespace to another key generation: a data dir
    holding nothing of it took the one the heads are sealed under, or one holding it
    under an older generation followed a rotation made on another machine
    (docs/keys.md)."""


class SyncReport(BaseModel):
    """Outcome of :meth:`Memory.sync`."""

    model_config = ConfigDict(frozen=True)

    published: int = 0
    still_queued: int = 0
    errors: list[str] = Field(default_factory=list)
    manifests: dict[str, str] = Field(default_factory=dict)
    renewed: int = 0  # memories re-published because their blobs were about to end
    pulled: dict[str, PullReport] = Field(default_factory=dict)
    """namespace -> what merging heads learned from the heads file / heads store changed."""
    skipped_heads: list[str] = Field(default_factory=list)
    """``"<namespace> <head>: <reason>"`` of heads that were not merged: heads-file lines
    that cannot be (blob gone, forged, another key's namespace) and seen heads whose
    manifest answers 404 before its end epoch passed (read again by the next sync),
    skipped with a warning, the manifest published without them (a manifest that omits
    memories deletes none); and heads past their end epoch recorded as parents."""


class RestoreReport(BaseModel):
    """Outcome of :meth:`Memory.restore` (a pull into this data dir, with progress).

    ``manifest_blob_id`` is the head reference restored from. ``missing`` and
    ``expired`` list (memory id, blob id) of facts whose blobs are gone;
    ``unreadable`` (memory id, reason) those whose location serves no good bytes
    (as :attr:`PullReport.unreadable`: the restore completes without them);
    ``failed`` those that could not be fetched now (the restore is then
    incomplete and resumes on the next ``restore``).
    """

    model_config = ConfigDict(frozen=True)

    namespace: str
    manifest_blob_id: str
    total: int
    restored: int
    skipped: int
    failed: list[tuple[str, str]] = Field(default_factory=list)
    missing: list[tuple[str, str]] = Field(default_factory=list)
    expired: list[tuple[str, str]] = Field(default_factory=list)
    unreadable: list[tuple[str, str]] = Field(default_factory=list)
    forgotten: int = 0
    conflicts: int = 0
    equivocations: list[str] = Field(default_factory=list)
    """As :attr:`PullReport.equivocations`."""
    complete: bool = True
    resumed: bool = False
    reembedded: int = 0
    """As :attr:`PullReport.reembedded`."""
    reembedded_because: dict[str, int] = Field(default_factory=dict)
    """As :attr:`PullReport.reembedded_because`."""
    key_generation: int | None = None
    """As :attr:`PullReport.key_generation`."""
    skipped_heads: list[str] = Field(default_factory=list)
    """``"<head>: <reason>"`` of heads not merged (as :attr:`PullReport.skipped`): one
    whose manifest answers 404 before its end epoch passed keeps the restore incomplete
    (``complete`` False) until a later restore reads it (docs/sync.md)."""


class ExtendReport(BaseModel):
    """Outcome of :meth:`Memory.extend`: new end epochs per memory id."""

    model_config = ConfigDict(frozen=True)

    extended: dict[str, int | None] = Field(default_factory=dict)
    failed: list[tuple[str, str]] = Field(default_factory=list)


class ForgetReport(BaseModel):
    """Outcome of :meth:`Memory.forget` / :meth:`Memory.forget_all`.

    ``deleted_blobs`` were deleted from the storage backend; ``kept_blobs``
    maps each blob that could not be deleted to the reason (real Walrus has no
    HTTP delete; a quilt still holding other live memories; a permanent blob).
    Kept blobs stay readable as ciphertext until their end epoch.
    """

    model_config = ConfigDict(frozen=True)

    forgotten: list[str] = Field(default_factory=list)
    deleted_blobs: list[str] = Field(default_factory=list)
    kept_blobs: dict[str, str] = Field(default_factory=dict)
    manifest_blob_id: str | None = None
