"""A Memory's way out to Walrus: the backend (built on first use), the circuit breaker
that keeps a down publisher from costing every call its deadline, the outbox publish of
sealed batches, and the deletion of forgotten memories' blobs.

A batch's sealed bytes are made once and kept, so a retry after a crash or a lost
response stores identical bytes (same blob id, no duplicate blobs).
"""

from __future__ import annotations

import builtins
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .._catalog.costs import cost_sink
from .._catalog.outbox_poison import REFUSED, is_poisoned, refused_for_good
from .._catalog.outbox_poison import describe as describe_poisoned
from .._walrus.adopt import dump_doubts, load_doubts
from .._walrus.blobio import (
    PART_OVERHEAD,
    batches_units,
    cheapest_batches,
    check_patches,
    quilt_budget,
    store_batches,
)
from .._walrus.cost import store_scope
from .._walrus.held_copies import RelayerCopies
from .._walrus.publish_check import require_read_back, verify_published
from .._walrus.retry import call_deadline
from .._walrus.storage import Backend, open_backend
from .._walrus.url_secrets import split_userinfo
from ..errors import (
    BodyTooLarge,
    KeyMaterialError,
    PublisherUnavailable,
    RateLimited,
    StorageError,
    WalrusMemError,
)
from . import deletions
from .inputs import MAX_METADATA_BYTES
from .integrity import split_damaged

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog
    from .._keys.chain import KeyChain
    from .._log.namespace_log import NamespaceLog
    from ..config import Settings
    from ..walrus import WalrusClient

__all__ = ["BREAKER_SECONDS", "Publisher"]

log = logging.getLogger(__name__)

BREAKER_SECONDS: Final = 30.0
CAPS_META: Final = "publisher_request_caps"
"""Catalog meta: JSON {publisher base URL: bytes}, request caps learned from 413s."""
DOUBTS_META: Final = "stores_in_doubt"
"""Catalog meta: JSON {request fingerprint: blob id}, stores whose answer was lost
(walrus_mem/_walrus/adopt.py): a later process checks them before paying again."""


class Publisher:
    """Publishes the outbox and deletes blobs for one Memory."""

    def __init__(self, settings: Settings, catalog: Catalog, lock: threading.RLock,
                 keys: KeyChain, walrus: WalrusClient | None,
                 check_open: Callable[[], None]) -> None:
        self.settings = settings
        self.catalog = catalog
        self.lock = lock
        self.keys = keys
        self.injected_walrus = walrus
        self.check_open = check_open
        self.log: NamespaceLog | None = None  # set by Memory once the log is built
        self.opened: Backend | None = None
        self.breaker_until = 0.0
        self.sink = cost_sink(catalog, lock)  # the catalog's store_costs ledger
        # Published rows drop their sealed copy while the embedded relayer stores them and
        # read it back from its folder (walrus_mem._catalog.held); with a Walrus URL the
        # catalog keeps every copy, and still reads those dropped before.
        self.copies = RelayerCopies(Path(settings.data_dir).expanduser() / "relayer",
                                    drops=bool(settings.embedded) and walrus is None
                                    and not settings.catalog_keeps_sealed)
        catalog.sealed_source = self.copies

    def backend(self) -> Backend:
        """The storage backend (built on first use; embedded relayer when no URL is set)."""
        with self.lock:
            self.check_open()
            if self.opened is None:
                self.opened = open_backend(self.settings, self.injected_walrus)
                if self.injected_walrus is None:  # stores outside a scope: recorded too
                    self.opened.client.cost_sink = self.sink
                try:  # stores an earlier process lost the answer of: checked, not re-paid
                    kept = json.loads(self.catalog.get_meta(DOUBTS_META) or "{}")
                except ValueError:
                    kept = {}
                if isinstance(kept, dict):
                    load_doubts(self.opened.client.in_doubt, kept, time.monotonic())
            return self.opened

    @property
    def client(self) -> WalrusClient:
        """The Walrus client of :meth:`backend`."""
        return self.backend().client

    def close(self) -> None:
        """Close the backend if it was opened."""
        try:
            if self.opened is not None:
                self.opened.close()
        finally:
            self.copies.close()

    def max_plaintext(self) -> int:
        """The largest plaintext a fact's envelope may hold."""
        return self.settings.max_fact_bytes + MAX_METADATA_BYTES + 4096

    def request_cap(self) -> int:
        """The request size quilts are sized under: the setting, or a smaller cap some
        publisher taught with a 413 (kept in the catalog: a new process knows it too)."""
        if self.opened is not None:
            urls = list(self.opened.client.publisher_urls)
        else:
            urls = [split_userinfo(u)[0] for u in self.settings.all_publisher_urls]
        caps = self.learned_caps()
        return min([self.settings.publisher_max_request_bytes,
                    *(caps[u] for u in urls if u in caps)])

    def quilt_budget(self) -> int:
        """Bytes of sealed facts (each + PART_OVERHEAD) one quilt request may carry."""
        return quilt_budget(self.request_cap())

    def learned_caps(self) -> dict[str, int]:
        try:
            data = json.loads(self.catalog.get_meta(CAPS_META) or "{}")
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, int) and v > 0}

    def keep_caps(self, client: WalrusClient) -> None:
        """Save the caps ``client`` learned (the smaller of old and new per publisher)."""
        with self.lock:
            caps = self.learned_caps()
            for url, cap in client.request_caps.items():
                caps[url] = min(cap, caps.get(url, cap))
            self.catalog.set_meta(CAPS_META, json.dumps(caps, sort_keys=True))

    def publish_budget(self) -> float:
        """Seconds one batch's publish may take: its store (``publish_deadline``, Walrus's
        guidance: 30 s or more) plus its read-back (``read_back_deadline``), budgeted
        apart so a slow store does not leave the read-back nothing."""
        return self.settings.publish_deadline + self.settings.read_back_deadline

    def keep_doubts(self, client: WalrusClient) -> None:
        """Save ``client``'s stores in doubt in the catalog (when they changed)."""
        text = json.dumps(dump_doubts(client.in_doubt), sort_keys=True)
        with self.lock:
            if (self.catalog.get_meta(DOUBTS_META) or "{}") != text:
                self.catalog.set_meta(DOUBTS_META, text)

    def breaker_open(self) -> bool:
        """Whether a recent outage says not to try the publisher now (sync still does)."""
        return time.monotonic() < self.breaker_until

    def trip_breaker(self, exc: StorageError) -> None:
        """Keep away from a publisher that rate-limits or is down, for a while."""
        if isinstance(exc, RateLimited):
            self.breaker_until = time.monotonic() + min(exc.retry_after or BREAKER_SECONDS,
                                                        300.0)
        elif isinstance(exc, PublisherUnavailable):
            self.breaker_until = time.monotonic() + BREAKER_SECONDS

    def publish_batch(self, batch_id: int, *, replay: bool = True
                      ) -> tuple[int, str | None, bool]:
        """Publish one outbox batch; return (facts published, error message or None,
        whether the publish path is failing: a store or read-back error other than a
        refusal of these very bytes, which the next batch would most likely meet too).

        A replay (sync, or a batch another call left) opens every sealed copy
        first (~0.2 ms each) and never stores one that fails; the first attempt
        right after sealing skips that.
        """
        with self.lock:
            batch = self.catalog.outbox_batch(batch_id)
            if batch is None:
                return 0, None, False  # already published (another thread/process)
            payload = self.catalog.outbox_payload(batch_id)
            if not payload:
                self.catalog.delete_outbox_batch(batch_id)
                return 0, None, False
        ns = str(batch["namespace"])
        damaged: str | None = None
        if replay:
            payload, damaged = self.sound_outbox(ns, batch_id, payload)
            if not payload:
                return 0, damaged, False
        if len(payload) > 1:  # a batch queued under a larger cap: size it under this one
            spans = store_batches([len(r["sealed"]) + PART_OVERHEAD for r in payload],
                                  self.quilt_budget())
            if len(spans) > 1:
                return self.publish_parts(ns, payload, spans, damaged)
        try:
            client = self.backend().client
            if self.settings.verify_publish != "none":
                require_read_back(client, f"verify_publish = {self.settings.verify_publish!r}")
            deadline = self.settings.publish_deadline  # the store; its read-back apart
            # A quilt's patch names are public: a keyed hash, never the memory id
            # (keys.quilt_identifier), so nothing ties versions or key generations.
            keys = self.keys.for_namespace(ns)
            names = {keys.quilt_identifier(str(r["memory_id"]), int(r["version"])):
                     str(r["memory_id"]) for r in payload}
            files = {name: bytes(r["sealed"]) for name, r in zip(names, payload, strict=True)}
            if len(payload) == 1:
                with store_scope(ns, "facts", self.sink):
                    stored = client.store_blob(bytes(payload[0]["sealed"]), deadline=deadline)
                blob = stored
                locations: dict[str, str | None] = {str(payload[0]["memory_id"]): None}
            else:
                with store_scope(ns, "facts", self.sink):
                    quilt = client.store_quilt(files, deadline=deadline)
                blob = quilt.blob
                check_patches(quilt.patches, list(files))
                locations = {mid: quilt.patches.get(name) for name, mid in names.items()}
            # a failed read-back keeps the batch queued (walrus_mem/_walrus/publish_check.py)
            verify_published(client, self.settings.verify_publish,
                             blob if len(payload) == 1 else quilt, files,
                             deadline=self.settings.read_back_deadline)
        except StorageError as exc:
            self.trip_breaker(exc)
            if self.opened is not None:  # a lost answer: the next process checks it too
                self.keep_doubts(self.opened.client)
            message = f"{type(exc).__name__}: {exc}"
            log.info("publish of outbox batch %d deferred: %s", batch_id, message)
            if isinstance(exc, BodyTooLarge) and len(payload) > 1:
                self.keep_caps(self.client)  # a 413 taught the client a smaller cap
                half = (len(payload) + 1) // 2
                spans = store_batches([len(r["sealed"]) + PART_OVERHEAD for r in payload],
                                      self.quilt_budget())
                if len(spans) < 2:  # no smaller cap learned (not a 413): halve
                    spans = [range(half), range(half, len(payload))]
                return self.publish_parts(ns, payload, spans, damaged)
            if refused_for_good(exc):  # outbox_poison.py: split it, or count towards poison
                message = REFUSED + message
                if len(payload) > 1:
                    with self.lock:
                        parts = self.catalog.split_outbox_batch(batch_id)
                    return 0, (f"{message} (split into {len(parts)} batches, each tried "
                               "alone)"), False
            with self.lock:
                self.catalog.outbox_failed(batch_id, message)
            return 0, message, not message.startswith(REFUSED)
        self.breaker_until = 0.0
        self.keep_doubts(client)  # one adopted (or found not to have landed): settled
        versions = {str(r["memory_id"]): int(r["version"]) for r in payload}
        with self.lock:  # damaged members stay in the batch, queued, for repair
            self.catalog.record_location(ns, versions, locations, blob,
                                         batch_id=None if damaged else batch_id)
        # A member forgotten while the store was in flight: its blob is recorded as a
        # pending deletion (record_location); delete it now, not only at the next sync.
        gone = deletions.pending(self.catalog, ns, blobs=[blob.blob_id])
        if gone:
            self.delete_blobs(gone)
        return len(locations), damaged, False

    def publish_parts(self, ns: str, payload: builtins.list[sqlite3.Row],
                      spans: builtins.list[range], damaged: str | None
                      ) -> tuple[int, str | None, bool]:
        """Queue each span of ``payload`` as a batch of its own and publish them in turn
        (a part refused as too large is halved again; one fact alone is a blob)."""
        with self.lock:
            ids = [self.catalog.add_outbox_batch(
                ns, [(str(payload[i]["memory_id"]), int(payload[i]["version"])) for i in span],
                time.time()) for span in spans]
        published, error = 0, damaged
        for part in ids:
            n, part_error, failing = self.publish_batch(part, replay=False)  # checked above
            published += n
            error = error or part_error
            if failing:  # the rest stay queued for the next sync
                return published, error, True
        return published, error, False

    def sound_outbox(
        self, ns: str, batch_id: int, payload: builtins.list[sqlite3.Row]
    ) -> tuple[builtins.list[sqlite3.Row], str | None]:
        """The batch members whose sealed bytes verify; damaged ones stay queued (repair)."""
        try:
            good, damaged = split_damaged(self.keys.for_namespace(ns), payload)
        except KeyMaterialError as exc:
            good, damaged = [], [("*", f"cannot verify sealed bytes: {exc}")]
        if not damaged:
            return good, None
        message = (f"{len(damaged)} sealed copies fail verification, not published "
                   f"(run `walrus-mem repair`): {damaged[0][0]}: {damaged[0][1]}")
        log.warning("outbox batch %d: %s", batch_id, message)
        with self.lock:
            self.catalog.outbox_failed(batch_id, message)
        return good, message

    def pool(self, namespace: str | None) -> int:
        """Re-group the outbox batches of each namespace into the quilts that cost the
        fewest storage units (blobio.cheapest_batches, under the request cap): writes
        queued for sync (``publish_writes = "sync"``: single remembers, several
        remember_many calls) are not paid a blob per fact. Only batches never tried are
        pooled: a tried one (refused, failed, or in doubt after a lost answer) keeps its
        bytes; pooling is deterministic, so a sync killed mid-publish pools the same way
        again. Returns how many pooled batches there are after."""
        grouped = 0
        for ns in sorted({str(b["namespace"]) for b in self.catalog.outbox_batches(namespace)}):
            with self.lock, self.catalog.write():
                # never tried only: a tried batch is re-sent as it was, so a store whose
                # answer was lost is recognised and adopted (walrus_mem/_walrus/adopt.py)
                batches = [b for b in self.catalog.outbox_batches(ns)
                           if int(b["attempts"]) == 0]
                if len(batches) < 2:
                    grouped += len(batches)
                    continue
                members: builtins.list[tuple[str, int, int]] = []
                now_spans: builtins.list[range] = []
                for b in batches:
                    payload = self.catalog.outbox_payload(int(b["id"]))
                    now_spans.append(range(len(members), len(members) + len(payload)))
                    members += [(str(r["memory_id"]), int(r["version"]), len(r["sealed"]))
                                for r in payload]
                sizes = [size + PART_OVERHEAD for _, _, size in members]
                spans = cheapest_batches(sizes, self.quilt_budget())
                if batches_units(sizes, spans) >= batches_units(sizes, now_spans):
                    grouped += len(batches)  # as cheap as it is: keep it (and its bytes)
                    continue
                now = time.time()
                for span in spans:  # moves the members; the emptied batches go
                    self.catalog.add_outbox_batch(
                        ns, [(members[i][0], members[i][1]) for i in span], now)
                grouped += len(spans)
        return grouped

    def flush(self, namespace: str | None, *, pool: bool = False) -> tuple[int, list[str]]:
        """Publish every outbox batch (of ``namespace``); (facts published, error lines).
        With ``publish_writes = "sync"`` or ``pool`` the batches are pooled first
        (:meth:`pool`, which leaves a tried batch as it was); with ``"now"`` a queued batch
        may be one whose store was sent before a crash, so it is re-sent as it was
        (identical bytes: the same blob id)."""
        if pool or self.settings.publish_writes == "sync":
            self.pool(namespace)
        published, errors = 0, builtins.list[str]()
        tried: set[int] = set()
        while True:  # a batch split on a permanent refusal: its parts are tried too
            batches = [b for b in self.catalog.outbox_batches(namespace)
                       if int(b["id"]) not in tried]
            if not batches:
                return published, errors
            for batch in batches:
                batch_id = int(batch["id"])
                tried.add(batch_id)
                with call_deadline(self.publish_budget()):  # store + read-back
                    n, error, failing = self.publish_batch(batch_id)
                published += n
                if not error:
                    continue
                now = self.catalog.outbox_batch(batch_id)
                if now is not None and is_poisoned(now):
                    error = describe_poisoned(now, self.catalog.outbox_members(batch_id))
                errors.append(f"outbox batch {batch_id} ({batch['namespace']}): {error}")
                if failing:  # each further batch would spend a whole deadline the same way
                    left = sum(1 for b in self.catalog.outbox_batches(namespace)
                               if int(b["id"]) not in tried)
                    if left > 0:
                        errors.append(f"{left} more outbox batch(es) not tried in this sync "
                                      "(the publish path is failing); the next sync tries them")
                    return published, errors

    def delete_blobs(
        self, blobs: Mapping[str, bool | None]
    ) -> tuple[list[str], dict[str, str]]:
        """Delete blobs of forgotten memories where nothing live is stored in them; settle
        their ``pending_deletions`` rows, except where a later retry may do better."""
        assert self.log is not None
        deleted: list[str] = []
        kept: dict[str, str] = {}
        retry_later: dict[str, str] = {}
        members: dict[str, dict[str, set[str]] | str] = {}  # namespace -> quilts known
        for blob_id, deletable in blobs.items():
            live = self.catalog.live_versions_in_blob(blob_id)
            if live > 0:
                kept[blob_id] = (
                    f"quilt still holds {live} other live memory version(s); "
                    "a single quilt patch cannot be deleted"
                )
                continue
            if deletable is False:
                kept[blob_id] = "permanent blob: cannot be deleted before its end epoch"
                continue
            backend = self.backend()
            if not backend.can_delete:  # real Walrus over HTTP: no reads for nothing
                kept[blob_id] = backend.delete_blob(blob_id)[1]
                if backend.delete_unknown:  # the server was unreachable: ask again later
                    retry_later[blob_id] = kept[blob_id]
                continue
            others = deletions.quilt_members_elsewhere(self.catalog, self.log, blob_id, members)
            if isinstance(others, str):
                kept[blob_id] = retry_later[blob_id] = others
                continue
            if others:
                kept[blob_id] = (
                    f"quilt holds {len(others)} live memory(ies) this data dir knows of but "
                    "does not hold (not fetched yet, or in a head not merged yet): kept"
                )
                continue
            ok, reason = backend.delete_blob(blob_id)
            if ok:
                deleted.append(blob_id)
            else:
                kept[blob_id] = retry_later[blob_id] = reason  # a failed request: retry later
        with self.lock:
            deletions.settle(self.catalog, [b for b in blobs if b not in retry_later])
            deletions.failed(self.catalog, retry_later)
        self.log.seen.drop_witnesses(deleted)  # a kept served mark no longer counts on them
        return deleted, kept

    def retry_deletions(self, namespace: str | None) -> list[str]:
        """Run the deletions recorded but not finished (a process killed, a backend that
        failed the request); return error lines for what is still waiting (never raises)."""
        todo = deletions.pending(self.catalog, namespace)
        if not todo:
            return []
        try:
            _, kept = self.delete_blobs(todo)
        except WalrusMemError as exc:
            return [f"pending blob deletions: {type(exc).__name__}: {exc}"]
        left = deletions.pending(self.catalog, namespace, blobs=kept)
        return [f"{len(left)} blob(s) of forgotten memories not deleted yet, retried by the "
                f"next sync: {next(iter(kept[b] for b in left))}"] if left else []
