"""The merge side of :class:`~walrus_mem._log.namespace_log.NamespaceLog` (a mixin).

Reads the heads a pull (or a publish) merges, checks they may be merged (gone,
unrelated), plans the merge (merge.py), fetches the winning versions in chunks and
applies them (apply.py), and records the merged heads once nothing is missing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

from .._keys.chain import older_generation
from .._walrus.blobio import read_checked
from .._walrus.retry import call_deadline
from ..envelope import envelope_fingerprint, open_envelope
from ..errors import (
    AggregatorUnavailable,
    BadRequest,
    BlobNotFound,
    EnvelopeError,
    ForbiddenBlob,
    ForkedHead,
    InvalidInput,
    VerificationFailed,
    WalrusMemError,
)
from ..keys import NamespaceKeys
from ..models import PullReport
from . import manifest as mf
from .apply import Tally, apply_fetched, concurrent_check, local_state, record_rivals
from .bulk import BULK_MAX_BYTES, BULK_MIN, envelope_prefix, find_sealed
from .context import LogPart, ProgressCallback, _Read
from .expired import name_expired
from .gone import provably_gone
from .heads import HeadRef
from .merge import MergePlan, plan_merge
from .older import split_older
from .page_memory import Skipped, held_pages, record_merged
from .pending import parse_pending, yield_pending

__all__ = ["RESTORE_CHUNK", "RESTORE_WORKERS", "Merging"]

log = logging.getLogger(__name__)

RESTORE_WORKERS: Final = 8
RESTORE_CHUNK: Final = 1024
BULK_DEADLINE: Final = 20.0  # one whole-quilt read; past it the facts are read one by one
_UNREADABLE: Final = (ForbiddenBlob, VerificationFailed, EnvelopeError, InvalidInput,
                      BadRequest, ValueError)
"""Fetch failures that are the entry's own (its location is blocked, 451, or serves no
bytes that verify as the version listed): another writer's bad entry. A pull reports
them (``unreadable``), completes, and later pulls retry them; they never keep the
restore marker, or one bad entry would stop this data dir publishing for good."""


class Merging(LogPart):
    """Merging verified heads into the local state of a namespace."""

    def _history_lost(self, ns: str, keys: NamespaceKeys) -> bool:
        """Whether every head of ``ns`` the local state contains is gone from the network
        (past its end epoch, or lost with a network that changed behind the endpoints:
        asked as a seen head's 404 is, network_reset.py). A head of another start of the
        namespace is then no fork: the history it shares nothing with is lost, and this
        data dir stores what it held again (N11: a machine whose catalog was rebuilt
        after the change started the namespace again on the new network)."""
        asked = False
        for ref in self.merged(ns):
            if self.seen.is_gone(ns, ref.blob_id) or provably_gone(self, ns, ref)[0]:
                continue
            try:
                self._read_root(ns, keys, ref)
                return False  # served: the history is here
            except BlobNotFound:
                if asked or not self.host.reset_followed(ns, ref):
                    return False
                asked = True
                if not provably_gone(self, ns, ref)[0]:
                    return False
            except WalrusMemError:
                return False
        return True

    def _merge(
        self,
        ns: str,
        keys: NamespaceKeys,
        refs: list[HeadRef],
        *,
        progress: ProgressCallback | None,
        allow_unrelated: bool = True,
        resumed: bool = False,
        gone_ok: bool = False,
        hold: Collection[HeadRef] = (),
        reuse: bool = False,
    ) -> PullReport:
        """``reuse``: manifest pages merged before whose entries the local state still
        holds are not read again (_log/page_memory.py; a restore reads them all).
        ``gone_ok``: a seen head whose manifest answers 404 (BlobNotFound) is not merged
        now, reported (``skipped``) and read again by the next sync or restore; one of
        ``hold`` (a restore's) keeps the restore incomplete and marked meanwhile. Only once
        the network has passed the manifest's end epoch (_log/gone.py) is the head recorded
        as merged, so the next manifest names it as a parent and never reuses its seq,
        instead of blocking every sync for good; what only it listed cannot be merged."""
        reads: list[_Read] = []
        gone: list[HeadRef] = []
        unread: dict[HeadRef, str] = {}
        asked = False  # whether the network was reset: asked once per merge
        for ref in refs:
            try:
                reads.append(_Read(ref, self._read_root(ns, keys, ref)))
            except BlobNotFound as exc:
                if self.seen.get(ns, ref.blob_id) is None:
                    raise
                expired, bound = provably_gone(self, ns, ref)
                if not expired and not asked:
                    asked = True  # a wipe or an epoch reset makes it gone (network_reset.py)
                    if self.host.reset_followed(ns, ref):
                        expired, bound = provably_gone(self, ns, ref)
                if not gone_ok:
                    if expired:
                        raise BlobNotFound(
                            f"manifest of head {ref} of {ns!r} is gone from Walrus (past its "
                            f"end epoch {bound}, or lost in a wipe / epoch reset of the "
                            "network): nothing can be restored from it") from exc
                    raise
                if not expired:
                    unread[ref] = (
                        f"{ref}: BlobNotFound: no aggregator serves its manifest now, and its "
                        f"end epoch ({'unknown' if bound is None else f'at most {bound}'}) "
                        "has not passed on the network: an aggregator lagging or missing it; "
                        "not merged, read again by the next sync or restore")
                    log.warning("manifest of seen head %s of %r answers 404 before its end "
                                "epoch passed: not merged now, retried", ref, ns)
                    continue
                log.warning("manifest of seen head %s of %r is gone from Walrus (past its "
                            "end epoch %s, or lost in a wipe / epoch reset): recorded as a "
                            "parent; what only it listed is lost", ref, ns, bound)
                gone.append(ref)
        held = [ref for ref in unread if ref in hold]
        if not reads and not gone and not held:
            return PullReport(namespace=ns, skipped=list(unread.values()))
        local_origins = self.origins(ns)
        if local_origins and not allow_unrelated and not resumed:
            for r in reads:
                theirs = set(r.root.origins) or {r.ref.blob_id}
                if not theirs & local_origins and not self._history_lost(ns, keys):
                    raise ForkedHead(
                        f"head seq {r.ref.seq} of {ns!r} shares no history with this data "
                        "dir's (another start of the same namespace); pass "
                        "allow_unrelated=True (`--allow-unrelated`) to merge it anyway")
        held_now = held_pages(self.catalog, ns, keys.generation) if reuse else {}
        skipped = Skipped()
        for r in reads:
            r.entries, r.pages = self._read_pages(keys, r.root, held_now)
            for _, _, digest, _ in r.root.pages:
                if digest in held_now:
                    skipped.add(digest, held_now[digest])
        report = self._merge_read(ns, keys, reads, progress=progress, resumed=resumed,
                                  gone=gone, unread=held, skipped=skipped)
        if report.complete:
            for ref in gone:
                self.seen.mark_gone(ns, ref.blob_id, True)
            for r in reads:
                if self.seen.is_gone(ns, r.ref.blob_id):
                    self.seen.mark_gone(ns, r.ref.blob_id, False)
        if gone or unread:
            report = report.model_copy(update={"skipped": [
                *(f"{ref}: BlobNotFound: its manifest is gone from Walrus (past its end "
                  "epoch, or lost in a wipe / epoch reset of the network); recorded as a "
                  "parent, what only it listed cannot be merged"
                  for ref in gone), *unread.values()]})
        return report

    def _merge_read(
        self,
        ns: str,
        keys: NamespaceKeys,
        reads: list[_Read],
        *,
        progress: ProgressCallback | None,
        resumed: bool,
        legacy: tuple[str, list[mf.Entry]] | None = None,
        gone: Sequence[HeadRef] = (),
        unread: Sequence[HeadRef] = (),
        skipped: Skipped | None = None,
    ) -> PullReport:
        """Merge verified manifests (``legacy``: a format-1 manifest's blob id and entries,
        which adds no head) into the local state. ``unread``: heads this merge owes and
        could not read now: they stay in the restore mark and it stays incomplete.
        ``skipped``: pages of ``reads`` not read, whose entries the local state holds
        (_log/page_memory.py): the merge plans over the others only."""
        skipped = skipped if skipped is not None else Skipped()
        # Everything verified: from here on the data dir changes.
        adopted = self.adopt_keys(ns, keys)  # a fresh data dir: a generation found
        self.host.keys_for(ns)
        self.host.check_model(ns)
        for r in reads:
            self._remember(ns, r.ref, r.root)
        equivocations = self._equivocations(ns, [r.ref for r in reads])
        marker: dict[str, Any] = {"heads": [*(str(r.ref) for r in reads),
                                            *(str(h) for h in unread)],
                                  "started": time.time()}
        if legacy is not None:
            marker["legacy"] = legacy[0]
        with self.lock:
            self.tables.set_restoring(ns, marker)
            self._fill_digests(ns)
        # Entries an earlier merge could not fetch merge again with the rest (retried),
        # unless a copy of the same version is here or merged now (_log/pending.py).
        remote = [e for r in reads for e in r.entries] + (legacy[1] if legacy else [])
        pending = self._pending(ns)
        if skipped.pages:  # the local state of what the merge plans over, not all of it
            wanted = {e.memory_id for e in remote} | set(pending)
            live, tombstones = local_state(self.catalog, ns, wanted)
        else:
            live, tombstones = local_state(self.catalog, ns)
        remote += yield_pending(pending, remote, live).values()
        plan = plan_merge(remote, live, tombstones, concurrent_check(self.catalog, ns, keys))
        # Progress counts live memories; tombstones are applied first, uncounted.
        total, unchanged_skipped = skipped.totals(remote)
        plan.unchanged += unchanged_skipped
        tally = Tally()
        clock = self._clock()
        for r in reads:  # a fresh machine learns the epoch from the writers' sightings
            clock.seed(r.root.clock)
        # Past its end epoch by the clock: read anyway (the clock may be wrong), and named
        # as expired, not missing, when the read answers 404.
        fetches = list(plan.fetches)
        epoch_now = clock.current()  # read once: each reading is a catalog query
        past_end = {e.memory_id for e in fetches if clock.expired(e.end_epoch,
                                                                 current=epoch_now)}
        done = total - len(fetches)
        if progress is not None:
            progress(done, total)
        now = time.time()
        with self.lock, self.catalog.write():
            for entry in plan.forget:
                blobs = self.catalog.forget_memory(ns, entry.memory_id, now, entry.version)
                if blobs is not None:
                    tally.forgotten += 1
                    tally.forgotten_blobs.update(blobs)
            for entry in plan.tombstones:
                self.catalog.forget_memory(ns, entry.memory_id, now, entry.version)
        if plan.forget:
            with self.lock:
                self.indexes.refresh(ns)
        # Once a read got no answer from any aggregator within its deadline, the rest are
        # not asked (each would wait out its own): they stay pending, the next pull or the
        # resumed restore fetches them.
        unanswered = threading.Event()

        def fetch(entry: mf.Entry) -> tuple[mf.Entry, bytes, dict[str, Any]]:
            if unanswered.is_set():
                raise AggregatorUnavailable("not asked: no aggregator answered an earlier "
                                            "read of this pull in time")
            try:
                return self._fetch(keys, entry)
            except AggregatorUnavailable:
                unanswered.set()
                raise

        older: set[str] = set()
        chunks = [fetches[start : start + RESTORE_CHUNK]
                  for start in range(0, len(fetches), RESTORE_CHUNK)]
        bulk = _BulkReads(self, keys, unanswered)
        with ThreadPoolExecutor(max_workers=RESTORE_WORKERS) as pool:
            # One chunk is fetched while the one before is applied (never more: memory
            # stays bounded by two chunks' blobs), so the catalog writes and the index
            # take nothing off the network's time. Many facts of one quilt come in one
            # read of the quilt (_log/bulk.py), the rest one read each.
            ahead = bulk.submit(pool, chunks[0], fetch) if chunks else None
            for number, chunk in enumerate(chunks):
                assert ahead is not None
                futures, fetched = bulk.collect(pool, ahead, fetch)
                ahead = bulk.submit(pool, chunks[number + 1], fetch) \
                    if number + 1 < len(chunks) else None
                for entry, future in futures:
                    try:
                        fetched.append(future.result())
                    except BlobNotFound:
                        (tally.expired if entry.memory_id in past_end else tally.missing
                         ).append((entry.memory_id, str(entry.blob_id)))
                    except _UNREADABLE as exc:  # the entry's fault, not an interruption
                        tally.unreadable.append(
                            (entry.memory_id, f"{type(exc).__name__}: {exc}"))
                    except (WalrusMemError, ValueError) as exc:
                        tally.failed.append((entry.memory_id, f"{type(exc).__name__}: {exc}"))
                # a retired generation's copy: kept out, or re-sealed below (_log/older.py)
                fetched, more, dropped = split_older(keys, fetched, live, tally.ids_of(plan)[1])
                older |= more
                plan.unchanged += dropped
                apply_fetched(self, ns, keys, plan, fetched, tally, live)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
        self.host.reseal_fetched(ns, older)  # they take part in the rotation (rotation.py)
        record_rivals(self, ns, keys, [e for e in plan.rivals if not clock.expired(e.end_epoch)],
                      tally)
        if tally.missing and not clock.reading().known:
            name_expired(self.host, tally, {e.memory_id: e.end_epoch for e in fetches})
        # A winning entry whose blob could not be read (404 on every aggregator, a
        # blocked or unverifiable location, or a failed read) stays pending: retried by
        # later pulls and syncs, and listed in this data dir's manifests meanwhile, so
        # its absence here never reads as a deletion to whoever restores from them
        # (docs/sync.md).
        unfetched = {mid for mid, _ in [*tally.missing, *tally.unreadable, *tally.failed]}
        with self.lock:
            self.tables.set_pending(ns, {e.memory_id: e.to_json()
                                         for e in [*plan.add, *plan.replace]
                                         if e.memory_id in unfetched})
        if plan.forget or plan.tombstones:
            # Text left the catalog: push it out of the FTS5 segments and the WAL,
            # as Memory.forget does (a forget must not linger on the pulling machine).
            with self.lock:
                self.catalog.scrub()
        # Delete this data dir's blobs of the forgotten memories as Memory.forget does
        # (best effort, quilts still holding live memories kept), after the fetches so
        # every memory restored by this pull counts as live; a blob any remote live
        # entry lists is kept too (its memory may not have been fetched yet).
        listed = {str(e.blob_id) for e in remote if not e.deleted and e.blob_id} | skipped.blobs
        kept_blobs = {b: "a live memory in the merged heads is stored in this blob"
                      for b in tally.forgotten_blobs if b in listed}
        deleted_blobs, kept_now = self.deleter.delete_blobs(
            {b: d for b, d in tally.forgotten_blobs.items() if b not in listed})
        kept_blobs.update(kept_now)
        complete = not tally.failed and not unread
        if complete:
            unclean = {mid for mid, _ in [*tally.missing, *tally.expired, *tally.unreadable]}
            unclean |= {e.memory_id for e in plan.rivals}
            read = {d: part for r in reads for d, part in r.pages.items()}
            self._finish(ns, keys, [*(r.ref for r in reads), *gone], remote, plan, gone,
                         skipped=skipped, read=read if reads else None, unclean=unclean)
        with self.lock:
            self.indexes.save_all()
            self.indexes.start_build(ns)  # what the merge held pending: index_builder.py
        return PullReport(
            namespace=ns, heads=[str(r.ref) for r in reads],
            legacy=None if legacy is None else legacy[0], total=total,
            added=tally.added, updated=tally.updated, forgotten=tally.forgotten,
            conflicts=tally.conflicts, deduplicated=tally.deduplicated,
            deleted_blobs=deleted_blobs, kept_blobs=kept_blobs,
            unchanged=plan.unchanged, missing=tally.missing, expired=tally.expired,
            unreadable=tally.unreadable, failed=tally.failed, complete=complete,
            resumed=resumed,
            equivocations=equivocations, reembedded=tally.reembedded,
            reembedded_because=dict(tally.reembed_reasons),
            key_generation=keys.generation if adopted else None,
        )

    def _equivocations(self, ns: str, refs: list[HeadRef]) -> list[str]:
        """Seen manifests their writer also published with the seq of one of ``refs``
        (being merged now): both are merged, and the pair named (warning + report)."""
        out: list[str] = []
        pairs: set[tuple[HeadRef, HeadRef]] = set()
        for ref in refs:
            head = self.seen.get(ns, ref.blob_id)
            if head is None:
                continue
            for other in self.seen.same_seq(ns, head):
                a, b = sorted((head.ref, other.ref), key=lambda r: r.blob_id)
                if (a, b) in pairs:
                    continue
                pairs.add((a, b))
                text = (f"writer {head.writer} published two manifests of {ns!r} with seq "
                        f"{ref.seq}: {a} and {b} (a data dir restored from a backup or "
                        "copied); both merged")
                log.warning("equivocation: %s", text)
                out.append(text)
        return out

    def _pending(self, ns: str) -> dict[str, mf.Entry]:
        return parse_pending(self.tables.pending(ns))

    def _fetch(self, keys: NamespaceKeys,
               entry: mf.Entry) -> tuple[mf.Entry, bytes, dict[str, Any]]:
        # A version sealed under a retired generation (a pending entry, a rotation
        # elsewhere) opens with that generation's key: the manifest's digest binds it.
        def opener(data: bytes) -> NamespaceKeys:
            return keys if entry.digest is None else self._sealed_under(keys, data)

        opened: list[tuple[bytes, dict[str, Any]]] = []  # the last bytes that passed

        def check(data: bytes) -> None:
            record = open_envelope(opener(data), data, expected_id=entry.memory_id,
                                   expected_kind="fact")
            if record.get("version") != entry.version:
                raise InvalidInput(f"blob holds version {record.get('version')}, "
                                   f"manifest says {entry.version}")
            if entry.digest is not None and mf.sealed_digest(data) != entry.digest:
                raise InvalidInput("blob is not the version the manifest lists (digest)")
            opened[:] = [(data, record)]

        data = read_checked(self.host.walrus, check, blob_id=entry.blob_id,
                            patch_id=entry.patch_id)
        if opened and opened[0][0] is data:  # opened once, by the check
            return entry, data, opened[0][1]
        record = open_envelope(opener(data), data, expected_id=entry.memory_id,
                               expected_kind="fact")
        return entry, data, record

    def _sealed_under(self, keys: NamespaceKeys, data: bytes) -> NamespaceKeys:
        """``keys``, or the retired generation of their namespace whose fingerprint
        ``data`` carries (rotation.older_generation): only for bytes a digest binds."""
        try:
            fingerprint = envelope_fingerprint(data)
        except EnvelopeError:
            return keys  # opening it names what is wrong
        if fingerprint == keys.fingerprint_bytes:
            return keys
        return older_generation(self.host, keys, fingerprint) or keys

    def _finish(self, ns: str, keys: NamespaceKeys, refs: list[HeadRef],
                remote: list[mf.Entry], plan: MergePlan,
                gone: Sequence[HeadRef] = (), *, skipped: Skipped,
                read: Mapping[str, Sequence[mf.Entry]] | None,
                unclean: Collection[str]) -> None:
        """The merge is complete: record the heads the local state now contains, and
        (``read``: the pages read, when heads were read) the pages it merged
        (_log/page_memory.py). A newest
        one that is gone from Walrus (``gone``: merged without content) makes a manifest
        due, so the namespace gets a head the network serves again: else a data dir
        holding nothing of its own (a catalog repaired after a wipe) kept naming the lost
        head as its latest manifest, and nobody could restore or read it."""
        candidates = list(dict.fromkeys([*self.merged(ns), *refs]))
        newest = [c for c in candidates
                  if not any(o != c and self.descends(ns, keys, o, c) for o in candidates)]
        # the ids only: local_state's versions and digests of every row cost a pull of
        # 10k new memories into 100k about 2 s (1.2 s of SQL, 0.7 s of tuples)
        live = {str(r[0]) for r in self.catalog.query(
            "SELECT id FROM memories WHERE namespace = ?", (ns,))}
        tombstones = self.catalog.tombstones(ns)
        listed_live, listed_dead = skipped.listed(remote)
        ours_only = len(live - listed_live) + len(tombstones.keys() - listed_dead)
        lost = any(c in gone or self.seen.is_gone(ns, c.blob_id) for c in newest)
        ahead = ours_only + len(plan.kept) + (1 if len(newest) > 1 or lost else 0)
        with self.lock, self.catalog.write():  # the pages merged, with the heads merged
            self.tables.set_head_state(ns, [str(h) for h in sorted(newest, reverse=True)],
                                       ahead=ahead)
            self.tables.set_restoring(ns, None)
            if read is not None:
                record_merged(self.catalog, ns, keys.generation, read, skipped, unclean)



_Fetched = tuple[mf.Entry, bytes, dict[str, Any]]
_Submitted = tuple[dict[str, "Future[dict[str, _Fetched]]"], dict[str, list[mf.Entry]],
                   list[tuple[mf.Entry, "Future[_Fetched]"]]]


class _BulkReads:
    """A merge's whole-quilt reads (_log/bulk.py): used while they find facts, given up
    after the first that fails or finds none (a layout whose patches are not contiguous,
    a quilt over the size bound), for the rest of the merge."""

    def __init__(self, log_: Merging, keys: NamespaceKeys, unanswered: threading.Event) -> None:
        self.log = log_
        self.keys = keys
        self.unanswered = unanswered
        self.prefix = envelope_prefix(keys.fingerprint_bytes)
        self.on = True

    def submit(self, pool: ThreadPoolExecutor, chunk: list[mf.Entry],
               fetch: Callable[[mf.Entry], _Fetched]) -> _Submitted:
        groups: dict[str, list[mf.Entry]] = {}
        if self.on:
            for entry in chunk:
                if entry.patch_id is not None and entry.digest is not None and entry.blob_id:
                    groups.setdefault(str(entry.blob_id), []).append(entry)
        whole = {blob: pool.submit(self._read, blob, group)
                 for blob, group in groups.items() if len(group) >= BULK_MIN}
        in_whole = {e.memory_id for blob in whole for e in groups[blob]}
        singles = [(e, pool.submit(fetch, e)) for e in chunk if e.memory_id not in in_whole]
        return whole, groups, singles

    def collect(self, pool: ThreadPoolExecutor, submitted: _Submitted,
                fetch: Callable[[mf.Entry], _Fetched],
                ) -> tuple[list[tuple[mf.Entry, Future[_Fetched]]], list[_Fetched]]:
        """The chunk's facts found in whole quilts, and futures of the others (a fact
        not found in its quilt is read alone now)."""
        whole, groups, singles = submitted
        fetched: list[_Fetched] = []
        for blob, future in whole.items():
            try:
                found = future.result()
            except (WalrusMemError, ValueError) as exc:
                log.info("quilt %s not read whole (%s); its facts are read one by one",
                         blob, type(exc).__name__)
                found = {}
            if not found:
                self.on = False
            for entry in groups[blob]:
                got = found.get(entry.memory_id)
                if got is not None:
                    fetched.append(got)
                else:
                    singles.append((entry, pool.submit(fetch, entry)))
        return singles, fetched

    def _read(self, blob: str, group: list[mf.Entry]) -> dict[str, _Fetched]:
        if self.unanswered.is_set() or not self.on:
            return {}
        with call_deadline(BULK_DEADLINE):
            data = self.log.host.walrus.read_blob(blob, max_size=BULK_MAX_BYTES)
        found = find_sealed(data, self.prefix, {str(e.digest) for e in group})
        out: dict[str, _Fetched] = {}
        for entry in group:
            sealed = found.get(str(entry.digest))
            if sealed is None:
                continue
            try:
                record = open_envelope(self.keys, sealed, expected_id=entry.memory_id,
                                       expected_kind="fact")
            except (EnvelopeError, ValueError):
                continue  # its digest is listed, so only its sealer made it bad: read alone
            if record.get("version") == entry.version:
                out[entry.memory_id] = (entry, sealed, record)
        return out
