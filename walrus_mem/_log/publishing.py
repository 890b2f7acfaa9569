"""The publish side of :class:`~walrus_mem._log.namespace_log.NamespaceLog` (a mixin).

A manifest is published only after merging what this data dir has seen and not
merged, never while a restore is unfinished, with its pages checked before reuse,
and it becomes the head only once an aggregator serves its root intact.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final, NoReturn

from .._catalog.log_tables import LogSnapshot
from .._catalog.manifest_cache import Segments
from .._keys.generations import reseal_unfinished
from .._memory.inputs import new_memory_id
from .._walrus.cost import store_scope
from .._walrus.expiry import BACKWARDS_KEY, JUMP_SLACK, EpochClock
from .._walrus.publish_check import require_read_back
from ..envelope import seal
from ..errors import (
    RestoreIncomplete,
    RotationIncomplete,
    StaleDataDir,
    StorageError,
    WalrusMemError,
)
from ..keys import NamespaceKeys
from . import manifest as mf
from .announce import announce, announce_pending, announce_record
from .context import LogPart
from .expired import still_served
from .gone import clock_epoch, root_end_bound, store_root
from .heads import HeadRef, SeenHead
from .pending import carry_pending, parse_pending
from .segments import Chunk, build, entry_of

__all__ = ["MANIFEST_MAX_PLAINTEXT", "Publishing"]

log = logging.getLogger(__name__)

MANIFEST_MAX_PLAINTEXT: Final = 8 * 1024 * 1024


_ATTEMPTS: Final = 3


def _epoch(clock: EpochClock, snap: LogSnapshot) -> int | None:
    """The epoch a page must outlive by more than one to be reused."""
    current = clock.current()
    if current is None or (snap.current_epoch or 0) > current:
        return snap.current_epoch
    return current


def _lasts(reuse: tuple[str, str | None, int | None], current_epoch: int | None) -> bool:
    """A stored page's end epoch is unknown or more than one epoch away."""
    return reuse[2] is None or current_epoch is None or reuse[2] > current_epoch + 1


class Publishing(LogPart):
    """Publishing a namespace's manifest."""

    def publish(self, ns: str) -> str:
        """Merge what is unmerged, then seal and publish a manifest of ``ns``; its head.

        One manifest of a namespace at a time, across threads and processes:
        snapshot, stores and the recorded head of one manifest all happen
        before the next one takes its snapshot.
        """
        if self.unfinished(ns) == "running":  # refused at once, not after the merge
            raise RestoreIncomplete(
                f"a pull or restore of namespace {ns!r} is under way (this or another "
                "process); no manifest until it finishes: the next sync publishes one")
        with self.turn(ns, wait=True):
            return self.publish_now(ns)  # refuses an interrupted one (mark read under the lock)

    def unfinished(self, ns: str) -> str | None:
        """``"interrupted"`` when a restore / pull of ``ns`` was interrupted, ``"running"``
        while one holds the namespace's manifest lock (this or another process), else None.

        A pull sets and clears its mark holding that lock, so the mark is read again
        once the lock is ours: one read before could be of a pull that finished since,
        and calling that interrupted advised a needless restore (red team f9)."""
        if self.tables.restoring(ns) is None:
            return None
        with self.turn(ns, wait=False) as ours:
            if not ours:
                return "running"
            return None if self.tables.restoring(ns) is None else "interrupted"

    def _refuse_unfinished(self, ns: str) -> NoReturn:
        raise RestoreIncomplete(
            f"a restore of namespace {ns!r} was interrupted; this data dir lacks part of "
            f"it and publishes no manifest until `walrus-mem restore --namespace {ns}` "
            "(Memory.restore) resumes and finishes it")

    def publish_now(self, ns: str, *, again: bool = False) -> str:
        """:meth:`publish` for a caller already holding :meth:`turn` (its stores are the
        namespace's ``log`` costs, walrus_mem/_walrus/cost.py)."""
        with store_scope(ns, "log"):
            return self._publish_now(ns, again=again)

    def _publish_now(self, ns: str, *, again: bool = False) -> str:
        """``again``: the root
        stored first named an epoch below the clock's (a wipe or reset not yet followed,
        so it may list lost locations): it was not recorded, this one is."""
        if self.tables.restoring(ns) is not None:
            self._refuse_unfinished(ns)
        if reseal_unfinished(self.catalog, ns):  # it would list the old generation's blobs
            raise RotationIncomplete(
                f"a key rotation of {ns!r} has not re-sealed every memory yet: no manifest "
                f"until `walrus-mem -n {ns} keys rotate` (or the next sync) "
                "finishes it")
        keys = self.host.keys_for(ns)
        self._refresh_from_mirror()
        unmerged = self.unmerged(ns, keys)
        if unmerged:  # never publish a manifest that forgets what it did not know
            log.info("merging %d unmerged head(s) of %r before publishing", len(unmerged), ns)
            queued = self.catalog.queued_count(ns)
            report = self._merge(ns, keys, unmerged, progress=None, gone_ok=True,
                                 reuse=True)
            self.merged_on_publish[ns] = report
            if report.failed:
                raise RestoreIncomplete(
                    f"merging {len(unmerged)} head(s) of {ns!r} before publishing left "
                    f"{len(report.failed)} memories unfetched; retry sync")
            if self.catalog.queued_count(ns) > queued:
                self._publish_resealed(ns, queued)
        client = self.host.walrus
        require_read_back(client, "a manifest")  # else each sync pays for pages and root
        self.host.settle_reset(ns)  # never list what a wiped network lost (network_reset.py)
        clock = self._clock()
        snap, chunks, segments = self._chunks(ns, keys, clock)
        info = snap.info
        current_epoch = _epoch(clock, snap)
        writes_seen = int(info["writes_since_manifest"])
        count = sum(chunk.count for chunk in chunks)
        deadline = self.host.settings.publish_deadline
        inline: list[mf.Entry] | None = None
        layout: list[tuple[str, int]] = []  # (digest, entry count) in page order
        placed: dict[str, tuple[str, str | None, int | None]] = {}  # digest -> location
        to_store: list[tuple[str, bytes]] = []
        if count <= mf.INLINE_MAX:
            inline = [entry for chunk in chunks for entry in chunk.entries or ()]
        else:
            changed: list[tuple[list[mf.Entry], dict[str, Any], str]] = []
            for chunk in chunks:
                reuse = snap.pages.get(chunk.digest)
                if chunk.entries is None:  # a cached page _chunks found reusable and intact
                    assert reuse is not None
                    placed[chunk.digest] = reuse
                    layout.append((chunk.digest, chunk.count))
                    continue
                record, digest = mf.page_record(chunk.entries)
                if reuse is not None and _lasts(reuse, current_epoch) \
                        and self.pages.intact(ns, keys, digest, reuse[0], reuse[1]):
                    placed[digest] = reuse  # unchanged, intact and not about to expire
                    layout.append((digest, chunk.count))
                else:
                    changed.append((chunk.entries, record, digest))
            # Changed entries ride inline in the root (one store call) up to about
            # 1 MiB of root; more become pages, stored together as one quilt.
            if sum(len(entries) for entries, _, _ in changed) <= mf.CHANGED_INLINE_MAX:
                inline = [entry for entries, _, _ in changed for entry in entries]
            else:
                for entries, record, digest in changed:
                    layout.append((digest, len(entries)))
                    if digest not in placed:
                        sealed_page = seal(keys, record, max_plaintext=MANIFEST_MAX_PLAINTEXT)
                        to_store.append((digest, sealed_page))
                        placed[digest] = ("", None, None)
        new_pages = self.pages.store(keys, to_store, placed, deadline)
        pages = [(placed[d][0], placed[d][1], d, n) for d, n in layout]
        parents = self.merged(ns)
        for parent in parents:  # heads.sqlite3 lost or new: learn the parents' origins
            if self.seen.get(ns, parent.blob_id) is None:
                try:
                    self.learn(ns, keys, parent)
                except (WalrusMemError, ValueError) as exc:
                    log.warning("parent %s of the next manifest of %r is unreadable (%s)",
                                parent, ns, type(exc).__name__)
        # A state that merged no head yet while this data dir has seen some of ``ns`` (a
        # catalog rebuilt while its heads answered 404, a restore that failed) is no new
        # start of the namespace: its manifest names the origins it knows, so neither it
        # nor the machines that pull it take the other side for a fork (ForkedHead).
        origins = sorted(self.origins(ns) or (
            set() if parents else self.seen.known_origins(ns)))
        seq = max((p.seq for p in parents), default=0) + 1
        writer = self.seen.writer_id()
        own = self.seen.max_own_seq(ns, writer)
        if seq <= own:  # this writer's seq must only grow: never publish a second seq `own`
            raise StaleDataDir(
                f"this data dir already published manifest seq {own} of {ns!r}, but its state "
                f"does not contain it (restored from a backup, or copied?) and it could not be "
                f"merged; a manifest now (seq {seq}) would fork the namespace and drop what "
                f"that one holds: `walrus-mem pull` its head, then sync",
                served_seq=seq, expected_seq=own)
        root = mf.root_record(
            manifest_id=f"manifest-{new_memory_id()}", seq=seq, writer=writer,
            parents=[str(p) for p in parents], origins=origins, created_at=time.time(),
            model_id=info["model_id"], dim=info["dim"], count=count, entries=inline,
            pages=pages, clock=clock.export(),
            ends_by=root_end_bound(clock, self.host.settings.epochs),
        )
        sealed, stored = store_root(client, keys, root, MANIFEST_MAX_PLAINTEXT, deadline)
        self.catalog.note_epoch(stored.registered_epoch)
        believed, now_epoch = clock_epoch(root.get("clock")), stored.registered_epoch
        backwards = None if believed is None or now_epoch is None \
            or now_epoch >= believed - JUMP_SLACK else (now_epoch, believed)
        if not again and (backwards or self.catalog.get_meta(BACKWARDS_KEY)):
            log.warning("manifest of %r stored while the network's epoch went back (a wipe or "
                        "an epoch reset?): not recorded; checked, then published again", ns)
            self.host.settle_reset(ns, backwards)
            return self.publish_now(ns, again=True)
        ref = HeadRef(seq, stored.blob_id, mf.sealed_digest(sealed))
        self._read_back(ref, sealed)  # the head only once an aggregator serves it intact
        seen = SeenHead(ref, writer, tuple(parents), tuple(origins) or (ref.blob_id,),
                        stored.end_epoch, stored.registered_epoch)
        with self.lock:
            self.tables.record_manifest(
                ns, seq=seq, blob_id=stored.blob_id, head=str(ref),
                parents=[str(p) for p in parents], entries=count, pages=len(pages),
                end_epoch=stored.end_epoch, new_pages=new_pages, writes_seen=writes_seen,
                registered_epoch=stored.registered_epoch, announce=announce_record(seen),
                segments=segments, upto=snap.upto)
        self.host.manifest_published(ns, ref)  # read back: found served (network_reset.py)
        announce(self, ns, keys, seen, retry=False)
        log.info("published manifest %d of %r (%d entries, %d pages)", seq, ns, count,
                 len(pages))
        return str(ref)

    def _chunks(self, ns: str, keys: NamespaceKeys, clock: EpochClock
                ) -> tuple[LogSnapshot, list[Chunk], Segments | None]:
        """The snapshot a manifest of ``ns`` is built from, its pages in order, and the
        segments to cache for the next one (None: this one was computed in full).

        Incremental (segments.py) unless a row has expired by the clock or merged
        entries are pending: both reorder or replace entries, so the full list is
        built as it always was. A cached page whose location fails its check is
        dropped and its segment read again; the last attempt reads every row."""
        for attempt in range(_ATTEMPTS):
            with self.lock:
                if self.tables.lacks_digests(ns):
                    self._fill_digests(ns)
                with self.catalog.snapshot():
                    snap = self.tables.snapshot(ns, rows=False)
                    current_epoch = _epoch(clock, snap)
                    if snap.pending or self.tables.expires_by(ns, clock.current()):
                        return self._full(ns, clock)
                    cached, dirty = self.tables.segments(ns)
                    tail = [mf.Entry.tombstone(mid, v)
                            for mid, v in sorted(snap.tombstones.items())]

                    def reusable(digest: str, pages: dict[str, Any] = snap.pages,
                                 epoch: int | None = current_epoch) -> bool:
                        reuse = pages.get(digest)
                        return reuse is not None and _lasts(reuse, epoch)

                    def rows(after: int | None, upto: int | None) -> list[Any]:
                        return self.tables.rows_between(ns, after, upto)

                    last = attempt == _ATTEMPTS - 1
                    chunks, segments = build(None if last else cached, dirty, reusable, rows,
                                             tail)
                    if any(c.entries is None for c in chunks) and \
                            sum(c.count for c in chunks) <= mf.INLINE_MAX:
                        chunks, segments = build(None, dirty, reusable, rows, tail)
            if all(self.pages.intact(ns, keys, c.digest, *snap.pages[c.digest][:2])
                   for c in chunks if c.entries is None):
                return snap, chunks, segments
        raise AssertionError("unreachable: the last attempt lists every page's entries")

    def _full(self, ns: str, clock: EpochClock
              ) -> tuple[LogSnapshot, list[Chunk], Segments | None]:
        """Every live entry, expired blobs and pending entries handled (call inside the
        snapshot of :meth:`_chunks`): the computation before segments."""
        snap = self.tables.snapshot(ns)
        # Never list a blob past its end epoch (expiry.py; on real Walrus the
        # clock is learned from store answers, not the mock's admin route).
        rows, expired = clock.drop_expired(snap.rows)
        if expired:
            rows += still_served(self.host, self._gone_blobs, ns, snap.rows, expired)
        if len(rows) < len(snap.rows):
            log.warning("manifest of %r leaves out %d memories whose blobs expired", ns,
                        len(snap.rows) - len(rows))
        live = [entry_of(r) for r in rows]
        live = carry_pending(live, parse_pending(snap.pending), snap.tombstones, clock)
        entries = live + [mf.Entry.tombstone(mid, v) for mid, v in sorted(snap.tombstones.items())]
        chunks = [Chunk(mf.entries_digest(page), len(page), page)
                  for page in mf.chunk_entries(entries)]
        return snap, chunks, None

    def _publish_resealed(self, ns: str, queued: int) -> None:
        """The merge took memories from blobs of a retired key generation and sealed them
        again under this one (older.py): queued, in no blob. The manifest names the merged
        heads as parents, so it must list them: they are published first, or no manifest
        (a rotation's manifest left them out, and a machine holding it took the older head
        as contained and never fetched them: stateful finding N2)."""
        errors = self.host.publish_queued(ns)
        if self.catalog.queued_count(ns) > queued:
            raise StorageError(
                f"memories of {ns!r} a merge re-sealed under the current key generation are "
                f"not published yet ({'; '.join(errors) or 'still queued'}): no manifest "
                "until they are; the next sync publishes them")

    def announce_pending(self, ns: str) -> str | None:
        """Announce the head this data dir recorded but did not (_log/announce.py)."""
        return announce_pending(self, ns)

    def _read_back(self, ref: HeadRef, sealed: bytes) -> None:
        """An aggregator must serve exactly the stored root (i11's read-back check), within
        ``read_back_deadline`` (a fresh blob may answer a cached 404 for a while), not
        the ``read_deadline`` of an ordinary read."""
        self.host.walrus.read_back(sealed, blob_id=ref.blob_id,
                                   deadline=self.host.settings.read_back_deadline)

    def _fill_digests(self, ns: str) -> None:
        missing = self.catalog.sealed_without_digest(ns)
        if missing:
            self.tables.fill_digests([(mf.sealed_digest(sealed), mid) for mid, sealed in missing])

