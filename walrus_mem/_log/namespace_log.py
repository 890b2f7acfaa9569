"""The namespace log: publishing manifests, reading them back, merging them in.

Each namespace's state on Walrus is a chain (a DAG once machines merge) of
sealed manifests (format: manifest.py). This module

* **publishes** one (:meth:`NamespaceLog.publish`): merge first whatever this
  data dir has seen but not merged, refuse while a restore is unfinished,
  build the snapshot (live memories + tombstones), reuse cached pages only
  after checking them against their digest, store the root, read it back
  and verify it, and only then make it the head (catalog, ``heads.sqlite3``,
  heads file);
* **reads** one by head reference (``<blob id>.<seq>.<digest>``), checking
  that the bytes are exactly the manifest named, that its seq follows its
  parents', and that it is not older than what this data dir has seen;
* **merges** heads into the local state (:meth:`NamespaceLog.pull`; restore
  is a pull with a progress bar) by the rule in merge.py, marking the
  namespace while it runs so an interrupted restore is resumed, never
  published over.

Memory (memory.py) is the façade; the SQL lives in catalog.py / catalog_log.py.
Parts of the job have modules of their own: applying a merge's fetched versions
(log_apply.py), announcing a published head (log_announce.py), expired blobs
(log_expiry.py), format-1 manifests (log_legacy.py), manifest pages
(log_pages.py) and pending entries (log_pending.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn, Protocol

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from .._catalog.catalog import Catalog
from .._catalog.log_tables import LogTables
from .._memory.inputs import new_memory_id
from .._memory.rotation import older_generation, reseal_unfinished
from .._recall.embeddings import Embedder
from .._recall.index import IndexStore, index_file_stem
from .._walrus.blobio import read_checked
from .._walrus.expiry import BACKWARDS_KEY, JUMP_SLACK, EpochClock
from .._walrus.publish_check import require_read_back
from ..config import Settings
from ..envelope import envelope_fingerprint, open_envelope, seal
from ..errors import (
    AggregatorUnavailable,
    BadRequest,
    BlobNotFound,
    EnvelopeError,
    ForbiddenBlob,
    ForkedHead,
    HeadMismatch,
    InvalidHead,
    InvalidInput,
    KeyMaterialError,
    LocalStoreError,
    LogError,
    RestoreIncomplete,
    RotationIncomplete,
    StaleDataDir,
    StaleManifest,
    StorageError,
    VerificationFailed,
    WalrusMemError,
    WrongNamespace,
)
from ..keys import NamespaceKeys
from ..models import PullReport
from ..walrus import WalrusClient
from . import manifest as mf
from .announce import announce, announce_pending, announce_record
from .apply import Tally, apply_fetched, concurrent_check, local_state, record_rivals
from .expired import name_expired, still_served
from .generation import foreign_head, generation_of, holds_nothing
from .gone import clock_epoch, provably_gone, root_end_bound, store_root, stored_bound
from .heads import HeadRef, HeadsFile, SeenHead, SeenHeads, parse_head
from .heads_mirror import HeadsMirror, default_state_dir
from .legacy import merge_legacy, read_legacy_root, split_legacy
from .legacy_manifest import LegacyRoot
from .merge import MergePlan, plan_merge
from .older import split_older
from .pages import ManifestPages, read_page
from .pending import carry_pending, parse_pending, yield_pending

__all__ = [
    "MANIFEST_MAX_PLAINTEXT",
    "LogHost",
    "NamespaceLog",
    "ProgressCallback",
]

log = logging.getLogger(__name__)

MANIFEST_MAX_PLAINTEXT: Final = 8 * 1024 * 1024
MANIFEST_LOCK_TIMEOUT: Final = 300.0
RESTORE_WORKERS: Final = 8
RESTORE_CHUNK: Final = 256
MAX_WALK = 10_000
"""Manifests an ancestry check visits at most; beyond, the heads count as concurrent."""
MAX_FETCH = 1_000
"""Unseen manifests an ancestry check reads at most (one request each); beyond, the
heads count as concurrent (they are then remembered, so the next check goes further)."""

ProgressCallback = Callable[[int, int], object]

_UNREADABLE: Final = (ForbiddenBlob, VerificationFailed, EnvelopeError, InvalidInput,
                      BadRequest, ValueError)
"""Fetch failures that are the entry's own (its location is blocked, 451, or serves no
bytes that verify as the version listed): another writer's bad entry. A pull reports
them (``unreadable``), completes, and later pulls retry them; they never keep the
restore marker, or one bad entry would stop this data dir publishing for good."""


class LogHost(Protocol):
    """What the log needs from its Memory."""

    settings: Settings
    data_dir: Path

    @property
    def embedder(self) -> Embedder: ...

    @property
    def walrus(self) -> WalrusClient: ...

    def keys_for(self, namespace: str | None = None) -> NamespaceKeys: ...

    def derive_keys(self, namespace: str) -> NamespaceKeys: ...

    def _derive(self, namespace: str, generation: int | None = None) -> NamespaceKeys: ...

    def _adopt_keys(self, namespace: str, keys: NamespaceKeys) -> bool: ...

    def embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]: ...

    def check_model(self, namespace: str) -> None: ...

    def reseal_fetched(self, namespace: str, ids: set[str]) -> int: ...

    @property
    def epoch_clock(self) -> EpochClock: ...

    def epoch_estimate(
        self, *, probe: bool = False, fresh_since: float | None = None
    ) -> tuple[int | None, bool]: ...

    def probe_epoch(self) -> int | None: ...

    def reset_followed(self, namespace: str, ref: HeadRef) -> bool: ...

    def settle_reset(self, namespace: str,
                     backwards: tuple[int, int] | None = None) -> None: ...

    def _delete_blobs(
        self, blobs: Mapping[str, bool | None]
    ) -> tuple[list[str], dict[str, str]]: ...


@dataclass
class _Read:
    """A verified manifest: its head, root and every entry."""

    ref: HeadRef
    root: mf.Root
    entries: list[mf.Entry] = field(default_factory=list)


class NamespaceLog:
    """Manifests of every namespace of one data dir."""

    def __init__(self, host: LogHost, catalog: Catalog, indexes: IndexStore,
                 lock: threading.RLock) -> None:
        self.host = host
        self.catalog = catalog
        self.tables = LogTables(catalog)
        self.indexes = indexes
        self.pages = ManifestPages(host, self.tables, lock)
        self.lock = lock
        state_dir = host.settings.state_dir or default_state_dir()
        self.seen = SeenHeads(host.data_dir / "heads.sqlite3",
                              HeadsMirror(state_dir, host.data_dir))
        self._manifest_locks: dict[str, tuple[threading.Lock, FileLock]] = {}
        self._unusable: dict[tuple[str, HeadRef], str] = {}
        self._bad_lines_warned: set[tuple[str, str]] = set()
        self._gone_blobs: set[str] = set()  # answered 404 past their end epoch: gone for good
        self.ahead: dict[str, NamespaceKeys] = {}
        """Per namespace, the keys of the newest key generation a head seen by the last
        :meth:`usable_newest` (or an explicit head) is sealed under, when it is newer than
        this data dir's: another machine rotated, this one follows (log_generation.py)."""
        self.merged_on_publish: dict[str, PullReport] = {}
        """Per namespace, what the merge :meth:`publish_now` ran before its manifest changed
        (a followed rotation's publish merges the newer heads: Memory reports it)."""
        self.rolled_back: dict[str, list[HeadRef]] = {}
        """Per namespace, heads the per-user mirror knew and this data dir had forgotten
        (restored from a backup, or copied) when it opened: merged before it publishes."""
        try:
            caught_up = self.seen.catch_up()
        except (LocalStoreError, ValueError) as exc:  # doctor / repair report a broken store
            log.warning("heads store or mirror not readable (%s); mirror not consulted",
                        type(exc).__name__)
            caught_up = {}
        self._note_caught_up(caught_up)

    def _refresh_from_mirror(self) -> None:
        """Take in what a copy of this data dir (same writer id) published meanwhile."""
        try:
            self._note_caught_up(self.seen.catch_up())
        except (LocalStoreError, ValueError) as exc:
            log.warning("seen-heads mirror not readable (%s)", type(exc).__name__)

    def _note_caught_up(self, caught_up: Mapping[str, list[SeenHead]]) -> None:
        for ns, heads in caught_up.items():
            refs = sorted((h.ref for h in heads), reverse=True)
            self.rolled_back[ns] = sorted({*self.rolled_back.get(ns, []), *refs}, reverse=True)
            log.warning(
                "data dir %s had forgotten %d manifest(s) of %r it had seen (newest seq %d): "
                "it was restored from a backup or copied; they are merged before its next "
                "manifest is published (docs/sync.md)", self.host.data_dir, len(refs), ns,
                refs[0].seq)

    def close(self) -> None:
        self.seen.close()

    # -- heads ---------------------------------------------------------------------

    def heads_file(self) -> HeadsFile | None:
        path = self.host.settings.heads_file
        return None if path is None else HeadsFile(Path(path))

    def resolve(self, ns: str, head: str | HeadRef) -> HeadRef:
        """A head reference; a bare blob id only if this data dir has seen that manifest."""
        if isinstance(head, HeadRef):
            return head
        parsed = parse_head(head)
        if isinstance(parsed, HeadRef):
            return parsed
        seen = self.seen.get(ns, parsed)
        if seen is None:
            raise InvalidHead(
                f"blob id {parsed} is not a manifest this data dir has seen for namespace "
                f"{ns!r}, so nothing binds its content: pass the full head reference "
                "<blob id>.<seq>.<digest> that `walrus-mem sync` printed (a manifest id from "
                "before format 2 needs allow_legacy=True / --legacy)"
            )
        return seen.ref

    def merged(self, ns: str) -> list[HeadRef]:
        """The heads the local state of ``ns`` contains (newest first)."""
        out = []
        for text in self.tables.merged_heads(ns):
            try:
                out.append(HeadRef.parse(text))
            except InvalidHead:  # a format-1 blob id from before head references
                continue
        return sorted(out, reverse=True)

    def newest(self, ns: str) -> list[HeadRef]:
        """The newest heads this data dir has seen (from its own log and the heads file)."""
        return self._newest_checked(ns)[0]

    def _newest_checked(self, ns: str) -> tuple[list[HeadRef], list[str]]:
        """:meth:`newest`, and the heads-file lines of ``ns`` that could not be read."""
        refs = [h.ref for h in self.seen.newest(ns)]
        problems: list[str] = []
        heads_file = self.heads_file()
        if heads_file is not None:
            pairs, problems = heads_file.read_checked(ns)
            refs.extend(ref for _, ref in pairs)
            for problem in problems:
                if (str(heads_file.path), problem) not in self._bad_lines_warned:
                    self._bad_lines_warned.add((str(heads_file.path), problem))
                    log.warning("%s: %s (ignored; fix or remove that line)",
                                heads_file.path, problem)
        return sorted(set(refs), reverse=True), problems

    def unmerged(self, ns: str, keys: NamespaceKeys) -> list[HeadRef]:
        """Newest seen heads the local state does not contain yet."""
        merged = self.merged(ns)
        usable, _ = self.usable_newest(ns, keys)
        return [ref for ref in usable
                if not any(self.descends(ns, keys, m, ref) for m in merged)]

    def usable_newest(self, ns: str, keys: NamespaceKeys) -> tuple[list[HeadRef], list[str]]:
        """:meth:`newest`, less the heads-file heads that cannot be merged, and those
        (``"<head>: <reason>"``).

        Anyone who can write the shared heads file can add a line; one whose manifest
        is gone or expired, forged (seq / digest), or of another key's namespace of the
        same name must not block every later sync. Skipping it loses nothing: a
        manifest that omits memories deletes none (docs/sync.md, union rule). One
        sealed under another key generation of this namespace is named as such
        (log_generation.py); a newer generation's is recorded in :attr:`ahead`, to
        be adopted or followed, and never cached as unusable.
        """
        usable: list[HeadRef] = []
        refs, skipped = self._newest_checked(ns)
        self.ahead.pop(ns, None)
        for ref in refs:
            seen = self.seen.get(ns, ref.blob_id)
            if seen is not None and seen.ref == ref:
                usable.append(ref)
                continue
            reason = self._unusable.get((ns, ref))
            if reason is None:
                try:
                    try:
                        self._learn(ns, keys, ref) if seen is None else self._read_root(
                            ns, keys, ref)
                    except WrongNamespace:  # another generation's, or another key's
                        reason = foreign_head(self, ns, keys, ref)
                except StorageError as exc:
                    # An outage, a lagging aggregator: not the line's fault. Never cached,
                    # so the next sync tries it again (the client retries each read with
                    # backoff); a long-running process must not skip it for good.
                    reason = f"{type(exc).__name__}: {exc} (retried at the next sync)"
                    log.warning("heads file %s: line '%s %s' not readable now (%s)",
                                self.host.settings.heads_file, ns, ref, reason)
                except (WalrusMemError, ValueError) as exc:
                    # forged, malformed: the same bytes fail the same way
                    reason = (f"{type(exc).__name__}: {exc} (it can never be merged: remove "
                              "the line from the file)")
                    self._unusable[(ns, ref)] = reason
                    log.warning("heads file %s: skipped line '%s %s' (%s)",
                                self.host.settings.heads_file, ns, ref, reason)
            if reason is None:
                usable.append(ref)
            else:
                skipped.append(f"{ref}: {reason}")
        return usable, skipped

    def descends(self, ns: str, keys: NamespaceKeys, newer: HeadRef, older: HeadRef) -> bool:
        """Whether ``newer`` is ``older`` or descends from it (walks parents, fetching
        manifests this data dir has not seen; seq only grows along the way).

        A walk past :data:`MAX_WALK` manifests (or :data:`MAX_FETCH` reads) answers
        False: the two count as concurrent, so they are merged. That is safe, since
        merging a head the state already holds changes nothing (union, versions,
        tombstones: merge.py), while giving up (it raised) left a machine away for
        10,000 manifests unable to sync ever again (red team f27)."""
        if newer == older:
            return True
        if newer.seq <= older.seq:
            return False
        stack, visited, fetched = [newer], {newer.blob_id}, 0
        while stack:
            node = stack.pop()
            known = self.seen.get(ns, node.blob_id)
            if known is None:
                fetched += 1
                if fetched > MAX_FETCH:
                    return self._beyond_window(ns, newer, older, "reads")
                try:
                    known = self._learn(ns, keys, node)
                except (WalrusMemError, ValueError) as exc:
                    log.info("ancestry of %s not readable (%s); treated as unrelated",
                             node, type(exc).__name__)
                    continue
            for parent in known.parents:
                if parent == older:
                    return True
                if parent.seq > older.seq and parent.blob_id not in visited:
                    visited.add(parent.blob_id)
                    if len(visited) > MAX_WALK:
                        return self._beyond_window(ns, newer, older, "manifests")
                    stack.append(parent)
        return False

    @staticmethod
    def _beyond_window(ns: str, newer: HeadRef, older: HeadRef, what: str) -> bool:
        log.info("ancestry of %r from seq %d down to seq %d exceeds %d %s: taken as "
                 "concurrent (merged)", ns, newer.seq, older.seq,
                 MAX_FETCH if what == "reads" else MAX_WALK, what)
        return False

    def _learn(self, ns: str, keys: NamespaceKeys, ref: HeadRef) -> SeenHead:
        root = self._read_root(ns, keys, ref)
        return self._remember(ns, ref, root)

    def _remember(self, ns: str, ref: HeadRef, root: mf.Root) -> SeenHead:
        seen = SeenHead(ref, root.writer, tuple(HeadRef.parse(p) for p in root.parents),
                        tuple(root.origins) or (ref.blob_id,), root.ends_by,
                        stored_bound(root.clock))
        self.seen.add(ns, seen)
        return seen

    def origins(self, ns: str) -> set[str]:
        out: set[str] = set()
        for ref in self.merged(ns):
            seen = self.seen.get(ns, ref.blob_id)
            if seen is not None:
                out.update(seen.origins)
        return out

    # -- reading -------------------------------------------------------------------

    def _read_root(self, ns: str, keys: NamespaceKeys, ref: HeadRef, *,
                   deadline: float | None = None) -> mf.Root:
        """Fetch and check the root a head reference names (nothing is written)."""
        client = self.host.walrus

        def matches(data: bytes) -> None:
            if mf.sealed_digest(data) != ref.digest:
                raise HeadMismatch(f"bytes of {ref.blob_id} do not match the head's digest")

        data = client.read_blob(ref.blob_id, deadline=deadline)
        if mf.sealed_digest(data) != ref.digest:
            problem = self._explain(keys, data, ref)
            log.warning("aggregator served other bytes for head %s: %s", ref, problem)
            try:
                data = client.read_blob(ref.blob_id, verify=matches, deadline=deadline)
            except VerificationFailed as exc:
                raise problem from exc
        # Digest matched: a failure to open now is our key's fault (WrongNamespace).
        seen = self.seen.get(ns, ref.blob_id)
        if seen is not None and seen.ref == ref:  # e.g. a restore resumed after a rotation
            keys = self._sealed_under(keys, data)
        return self.check_root(keys, data, ref)

    @staticmethod
    def check_root(keys: NamespaceKeys, data: bytes, ref: HeadRef) -> mf.Root:
        """The root in ``data`` (bytes matching ``ref``'s digest), opened under ``keys``
        (signature checked) and checked against ``ref`` (seq, parents)."""
        root = mf.parse_root(open_envelope(keys, data, expected_kind="manifest"))
        if root.seq != ref.seq:  # the digest matched: the reference's seq is wrong
            raise InvalidHead(
                f"head reference {ref} names seq {ref.seq}, but the manifest its digest names "
                f"has seq {root.seq}: the reference is mistyped or damaged (use "
                f"{ref.blob_id}.{root.seq}.{ref.digest}, or copy it again from what "
                "`walrus-mem sync` printed)")
        try:
            parents = [HeadRef.parse(p) for p in root.parents]
        except InvalidHead as exc:
            raise HeadMismatch(f"manifest {ref.blob_id} names a malformed parent") from exc
        expected = max((p.seq for p in parents), default=0) + 1
        if root.seq != expected:
            raise HeadMismatch(
                f"manifest {ref.blob_id} has seq {root.seq} but its parents make it {expected}")
        return root

    def _explain(self, keys: NamespaceKeys, data: bytes, ref: HeadRef) -> LogError:
        """Name what an aggregator served instead of the head's manifest."""
        try:
            other = mf.parse_root(open_envelope(keys, data, expected_kind="manifest"))
        except (EnvelopeError, ValueError):
            return HeadMismatch(
                f"an aggregator served bytes for {ref.blob_id} that are not the manifest "
                f"the head reference names (seq {ref.seq})")
        if other.seq < ref.seq:
            return StaleManifest(
                f"an aggregator served manifest seq {other.seq} of this namespace for head "
                f"seq {ref.seq} ({ref.blob_id}): a rollback; nothing was changed",
                served_seq=other.seq, expected_seq=ref.seq)
        if other.seq == ref.seq:
            # Signed by this namespace's key, of the seq named, at the blob id named: it
            # is the digest in the reference that is wrong (raised once no aggregator
            # served bytes matching it).
            return InvalidHead(
                f"head reference {ref} does not match the manifest stored at "
                f"{ref.blob_id}, which every aggregator serves: seq {ref.seq} of this "
                f"namespace, signed by its key, head {ref.blob_id}.{ref.seq}."
                f"{mf.sealed_digest(data)}; the reference's digest is mistyped or damaged "
                "(copy it again from what `walrus-mem sync` printed)")
        return HeadMismatch(
            f"an aggregator served another manifest (seq {other.seq}) of this namespace "
            f"for head seq {ref.seq} ({ref.blob_id})")

    def _read_entries(self, keys: NamespaceKeys, root: mf.Root) -> list[mf.Entry]:
        client = self.host.walrus
        entries = list(root.entries or [])
        for blob_id, patch_id, digest, _ in root.pages:  # the root binds each page's digest
            entries.extend(read_page(client, keys, blob_id, patch_id, digest,
                                     opener=lambda data: self._sealed_under(keys, data)))
        return entries

    def read(self, ns: str, head: str | HeadRef) -> tuple[HeadRef, list[mf.Entry]]:
        """A verified manifest's entries (live + tombstones); changes nothing locally.

        For tools (key rotation, audits): ``head`` is a head reference or a
        bare blob id this data dir has seen.
        """
        keys = self._keys_readonly(ns)
        ref = self.resolve(ns, head)
        return ref, self._read_entries(keys, self._read_root(ns, keys, ref))

    def verify_head(self, ns: str, head: str | HeadRef, *,
                    deadline: float | None = None) -> HeadRef:
        """Read a head's root from the aggregators and check it (digest, seq, parents,
        key); the pages and facts are not read. Changes nothing locally."""
        keys = self._keys_readonly(ns)
        ref = self.resolve(ns, head)
        self._read_root(ns, keys, ref, deadline=deadline)
        return ref

    def _keys_readonly(self, ns: str) -> NamespaceKeys:
        """The namespace's keys without registering it (a failed restore writes nothing)."""
        keys = self.host.derive_keys(ns)
        info = self.catalog.namespace(ns)
        if info is not None and info["key_fingerprint"] not in (None, keys.fingerprint):
            raise KeyMaterialError(
                f"namespace {ns!r} was created with key {info['key_fingerprint']}, but the "
                f"configured key is {keys.fingerprint}; use the original master/agent key")
        return keys

    # -- publishing ------------------------------------------------------------------

    @contextmanager
    def turn(self, ns: str, *, wait: bool) -> Iterator[bool]:
        """Hold the namespace's manifest lock (this process's threads and other processes):
        taken by every publish and every pull / restore of the namespace.

        Yields False, holding nothing, when ``wait`` is False and it is taken.
        """
        with self.lock:
            locks = self._manifest_locks.get(ns)
            if locks is None:
                path = self.host.data_dir / "locks" / f"manifest-{index_file_stem(ns)}.lock"
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                locks = self._manifest_locks[ns] = (threading.Lock(),
                                                    FileLock(str(path), mode=0o600))
        thread_lock, file_lock = locks
        busy = LocalStoreError(
            f"another process has been merging or publishing manifests of {ns!r} for over "
            f"{MANIFEST_LOCK_TIMEOUT:.0f} s"
        )
        if not (thread_lock.acquire(timeout=MANIFEST_LOCK_TIMEOUT) if wait
                else thread_lock.acquire(blocking=False)):
            if wait:
                raise busy
            yield False
            return
        try:
            try:
                file_lock.acquire(timeout=MANIFEST_LOCK_TIMEOUT if wait else 0)
            except Timeout:
                if wait:
                    raise busy from None
                yield False
                return
            try:
                yield True
            finally:
                file_lock.release()
        finally:
            thread_lock.release()

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
        """:meth:`publish` for a caller already holding :meth:`turn`. ``again``: the root
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
            report = self._merge(ns, keys, unmerged, progress=None, gone_ok=True)
            self.merged_on_publish[ns] = report
            if report.failed:
                raise RestoreIncomplete(
                    f"merging {len(unmerged)} head(s) of {ns!r} before publishing left "
                    f"{len(report.failed)} memories unfetched; retry sync")
        client = self.host.walrus
        require_read_back(client, "a manifest")  # else each sync pays for pages and root
        self.host.settle_reset(ns)  # never list what a wiped network lost (network_reset.py)
        with self.lock:
            self._fill_digests(ns)
            snap = self.tables.snapshot(ns)
        clock = self._clock()
        # Never list a blob past its end epoch (expiry.py; on real Walrus the
        # clock is learned from store answers, not the mock's admin route).
        rows, expired = clock.drop_expired(snap.rows)
        if expired:
            rows += still_served(self.host, self._gone_blobs, ns, snap.rows, expired)
        if len(rows) < len(snap.rows):
            log.warning("manifest of %r leaves out %d memories whose blobs expired", ns,
                        len(snap.rows) - len(rows))
        info, known = snap.info, snap.pages
        current_epoch = clock.current()
        if current_epoch is None or (snap.current_epoch or 0) > current_epoch:
            current_epoch = snap.current_epoch
        writes_seen = int(info["writes_since_manifest"])
        live = [mf.Entry(str(r["id"]), int(r["version"]), str(r["blob_id"]), r["quilt_patch_id"],
                         r["end_epoch"], float(r["updated_at"]), str(r["digest"]))
                for r in rows]
        live = carry_pending(live, parse_pending(snap.pending), snap.tombstones, clock)
        entries = live + [mf.Entry.tombstone(mid, v) for mid, v in sorted(snap.tombstones.items())]
        deadline = self.host.settings.publish_deadline
        inline: list[mf.Entry] | None = entries
        layout: list[tuple[str, int]] = []  # (digest, entry count) in page order
        placed: dict[str, tuple[str, str | None, int | None]] = {}  # digest -> location
        to_store: list[tuple[str, bytes]] = []
        if len(entries) > mf.INLINE_MAX:
            changed: list[tuple[list[mf.Entry], dict[str, Any], str]] = []
            for chunk in mf.chunk_entries(entries):
                record, digest = mf.page_record(chunk)
                reuse = known.get(digest)
                if reuse is not None and (
                    reuse[2] is None or current_epoch is None or reuse[2] > current_epoch + 1
                ) and self.pages.intact(ns, keys, digest, reuse[0], reuse[1]):
                    placed[digest] = reuse  # unchanged, intact and not about to expire
                    layout.append((digest, len(chunk)))
                else:
                    changed.append((chunk, record, digest))
            # Changed entries ride inline in the root (one store call) up to about
            # 1 MiB of root; more become pages, stored together as one quilt.
            if sum(len(chunk) for chunk, _, _ in changed) <= mf.CHANGED_INLINE_MAX:
                inline = [entry for chunk, _, _ in changed for entry in chunk]
            else:
                inline = None
                for chunk, record, digest in changed:
                    layout.append((digest, len(chunk)))
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
                    self._learn(ns, keys, parent)
                except (WalrusMemError, ValueError) as exc:
                    log.warning("parent %s of the next manifest of %r is unreadable (%s)",
                                parent, ns, type(exc).__name__)
        origins = sorted(self.origins(ns))
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
            model_id=info["model_id"], dim=info["dim"], count=len(entries), entries=inline,
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
                parents=[str(p) for p in parents], entries=len(entries), pages=len(pages),
                end_epoch=stored.end_epoch, new_pages=new_pages, writes_seen=writes_seen,
                registered_epoch=stored.registered_epoch, announce=announce_record(seen))
        announce(self, ns, keys, seen, retry=False)
        log.info("published manifest %d of %r (%d entries, %d pages)", seq, ns, len(entries),
                 len(pages))
        return str(ref)

    def announce_pending(self, ns: str) -> str | None:
        """Announce the head this data dir recorded but did not (log_announce.py)."""
        return announce_pending(self, ns)

    def _clock(self) -> EpochClock:
        return self.host.epoch_clock  # configured, network-known or learned epoch length

    def _read_back(self, ref: HeadRef, sealed: bytes) -> None:
        """An aggregator must serve exactly the stored root (i11's read-back check)."""
        self.host.walrus.read_back(sealed, blob_id=ref.blob_id)

    def _fill_digests(self, ns: str) -> None:
        missing = self.catalog.sealed_without_digest(ns)
        if missing:
            self.tables.fill_digests([(mf.sealed_digest(sealed), mid) for mid, sealed in missing])

    # -- merging -----------------------------------------------------------------------

    def pull(
        self,
        ns: str,
        heads: Sequence[str | HeadRef] | None = None,
        *,
        allow_stale: bool = False,
        allow_unrelated: bool = False,
        progress: ProgressCallback | None = None,
        quiet: bool = False,
        recheck: bool = False,
        allow_legacy: bool = False,
    ) -> PullReport:
        """Merge heads into the local state of ``ns`` (see merge.py for the rule).

        ``heads=None`` takes the newest heads this data dir knows of (its own
        log, the heads file) plus an interrupted restore's. A head older than
        one already seen raises StaleManifest (``quiet=True``: skipped, as for
        heads read from the heads file); one sharing no history with the
        local state raises ForkedHead, unless allowed. ``recheck=True``
        (restore) merges heads already merged again, fetching whatever the
        local state lacks of them. A bare blob id of a format-1 manifest
        raises LegacyManifest unless ``allow_legacy`` (log_legacy.py).
        """
        # One merge (or manifest) of a namespace at a time, across threads and processes:
        # a merge planned against a state another one changes meanwhile could re-insert
        # what that one forgot.
        with self.turn(ns, wait=True):
            return self._pull(ns, heads, allow_stale=allow_stale,
                              allow_unrelated=allow_unrelated, progress=progress, quiet=quiet,
                              recheck=recheck, allow_legacy=allow_legacy)

    def _pull(self, ns: str, heads: Sequence[str | HeadRef] | None, *, allow_stale: bool,
              allow_unrelated: bool, progress: ProgressCallback | None, quiet: bool,
              recheck: bool, allow_legacy: bool) -> PullReport:
        keys = self._keys_readonly(ns)
        marker = self.tables.restoring(ns)
        legacy_marker = (marker or {}).get("legacy")
        legacy: LegacyRoot | None = None
        if heads is not None:
            heads, legacy = split_legacy(self, ns, keys, heads, allow_legacy)
        elif isinstance(legacy_marker, str):  # resume: consent was given when it started
            legacy = read_legacy_root(self.host.walrus, keys, legacy_marker)
        if legacy is not None:
            if marker is not None and legacy_marker != legacy.blob_id:
                raise RestoreIncomplete(
                    f"another restore of {ns!r} was interrupted: run `walrus-mem restore "
                    f"--namespace {ns}` (no head) to finish it first")
            return merge_legacy(self, ns, keys, legacy, progress=progress,
                                resumed=marker is not None)
        if isinstance(legacy_marker, str):
            raise RestoreIncomplete(
                f"the restore of format-1 manifest {legacy_marker} into {ns!r} was interrupted: "
                f"run `walrus-mem restore --namespace {ns}` (no head) to finish it first")
        resumed = [HeadRef.parse(h) for h in (marker or {}).get("heads", [])]
        skipped: list[str] = []
        if heads is None:
            self._refresh_from_mirror()
            usable, skipped = self.usable_newest(ns, keys)
            ahead = self.ahead.get(ns)
            if ahead is not None and holds_nothing(self, ns):
                # A fresh data dir takes the newer generation as it is (verified; made
                # current only once the merge starts, log_generation.py).
                keys = ahead
                usable, skipped = self.usable_newest(ns, keys)
            wanted = list(dict.fromkeys([*resumed, *usable]))
            quiet = True
            # Heads this data dir was handed through its own log or the heads file are
            # the namespace's other writers: two machines that each published a first
            # manifest before seeing the other's are two roots of one namespace (same
            # key, signed), not an intruder, and refusing them would never converge.
            allow_unrelated = True
        else:
            wanted = list(dict.fromkeys([*(self.resolve(ns, h) for h in heads), *resumed]))
        merged = self.merged(ns)
        todo: list[HeadRef] = []
        contained: set[HeadRef] = set()
        for ref in wanted:
            if ref in resumed:
                todo.append(ref)
                continue
            if heads is not None and self.seen.is_gone(ns, ref.blob_id):
                todo.append(ref)  # taken as merged when it answered 404: its content now
                continue
            if any(self.descends(ns, keys, m, ref) for m in merged):
                if ref in merged or allow_stale:
                    if recheck:
                        todo.append(ref)
                        contained.add(ref)
                    continue  # already contained
                if quiet:
                    continue
                raise StaleManifest(
                    f"head seq {ref.seq} of {ns!r} is older than the state this data dir "
                    f"holds (seq {max(m.seq for m in merged)}), which contains it; pass "
                    "allow_stale=True to accept it anyway (a pull changes nothing here; a "
                    "restore fetches what the state lacks of it)",
                    served_seq=ref.seq, expected_seq=max(m.seq for m in merged))
            newer = [h.ref for h in self.seen.newest(ns) if h.ref != ref and h.ref.seq > ref.seq]
            if not allow_stale and any(self.descends(ns, keys, n, ref) for n in newer):
                if quiet:
                    continue
                raise StaleManifest(
                    f"head seq {ref.seq} of {ns!r} is older than head seq "
                    f"{max(n.seq for n in newer)} this data dir has seen; pull that one, or "
                    "pass allow_stale=True", served_seq=ref.seq,
                    expected_seq=max(n.seq for n in newer))
            todo.append(ref)
        if not todo:
            if not self.tables.pending(ns):
                return PullReport(namespace=ns, heads=[str(h) for h in wanted],
                                  up_to_date=True, skipped=skipped)
            # memories merged earlier whose blobs could not be read then: try them again
            report = self._merge_read(ns, keys, [], progress=progress, resumed=False)
            return report.model_copy(update={"skipped": skipped}) if skipped else report
        # A head a resumed restore, or a restore, still lacks keeps it incomplete while
        # its manifest answers 404 (log_gone.py); a sync's pull reports and retries it.
        hold = {*resumed, *(r for r in todo if r not in contained)} if recheck else {*resumed}
        try:
            report = self._merge(ns, keys, todo, progress=progress,
                                 allow_unrelated=allow_unrelated, resumed=bool(resumed),
                                 gone_ok=heads is None, hold=hold)
        except WrongNamespace:  # raised reading the roots, before anything changed here
            found = self._generations(ns, todo)
            later = [k for k in found.values() if k.generation > keys.generation]
            if not later:
                older = [(r, k) for r, k in found.items() if k.generation < keys.generation]
                if not older:
                    raise
                old_ref, old_keys = older[0]
                raise WrongNamespace(
                    f"head {old_ref} of {ns!r} is sealed under key generation "
                    f"{old_keys.generation}, "
                    f"which this data dir has rotated away from (it uses {keys.generation}): a "
                    "retired generation's head is not merged, as its key may be the leaked "
                    "one; its writer follows the rotation at its next sync (docs/keys.md)"
                ) from None
            rotated = max(later, key=lambda k: k.generation)
            if not holds_nothing(self, ns):
                self.ahead[ns] = rotated
                raise WrongNamespace(
                    f"a head of {ns!r} is sealed under key generation {rotated.generation}, "
                    f"newer than this data dir's ({keys.generation}): another machine "
                    "rotated the key; Memory.sync / pull / restore follow such a rotation "
                    "first (docs/keys.md)") from None
            report = self._merge(ns, rotated, todo, progress=progress,
                                 allow_unrelated=allow_unrelated, resumed=bool(resumed),
                                 gone_ok=heads is None, hold=hold)
        if skipped:
            report = report.model_copy(update={"skipped": [*skipped, *report.skipped]})
        return report

    def _generations(self, ns: str, refs: list[HeadRef]) -> dict[HeadRef, NamespaceKeys]:
        """The key generation each of ``refs`` verifies under (log_generation.py), for
        those that verify under one of this namespace's."""
        out: dict[HeadRef, NamespaceKeys] = {}
        for ref in refs:
            try:
                found = generation_of(self, ns, ref)
            except (WalrusMemError, ValueError):
                continue  # forged, unreadable: the merge's own error stands
            if found is not None:
                out[ref] = found
        return out

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
    ) -> PullReport:
        """``gone_ok``: a seen head whose manifest answers 404 (BlobNotFound) is not merged
        now, reported (``skipped``) and read again by the next sync or restore; one of
        ``hold`` (a restore's) keeps the restore incomplete and marked meanwhile. Only once
        the network has passed the manifest's end epoch (log_gone.py) is the head recorded
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
                if not theirs & local_origins:
                    raise ForkedHead(
                        f"head seq {r.ref.seq} of {ns!r} shares no history with this data "
                        "dir's (another start of the same namespace); pass "
                        "allow_unrelated=True (`--allow-unrelated`) to merge it anyway")
        for r in reads:
            r.entries = self._read_entries(keys, r.root)
        report = self._merge_read(ns, keys, reads, progress=progress, resumed=resumed,
                                  gone=gone, unread=held)
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
    ) -> PullReport:
        """Merge verified manifests (``legacy``: a format-1 manifest's blob id and entries,
        which adds no head) into the local state. ``unread``: heads this merge owes and
        could not read now: they stay in the restore mark and it stays incomplete."""
        # Everything verified: from here on the data dir changes.
        adopted = self.host._adopt_keys(ns, keys)  # a fresh data dir: a generation found
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
        # unless a copy of the same version is here or merged now (log_pending.py).
        remote = [e for r in reads for e in r.entries] + (legacy[1] if legacy else [])
        live, tombstones = local_state(self.catalog, ns)
        remote += yield_pending(self._pending(ns), remote, live).values()
        plan = plan_merge(remote, live, tombstones, concurrent_check(self.catalog, ns, keys))
        # Progress counts live memories; tombstones are applied first, uncounted.
        total = len({e.memory_id for e in remote} - {e.memory_id for e in remote if e.deleted})
        tally = Tally()
        clock = self._clock()
        for r in reads:  # a fresh machine learns the epoch from the writers' sightings
            clock.seed(r.root.clock)
        # Past its end epoch by the clock: read anyway (the clock may be wrong), and named
        # as expired, not missing, when the read answers 404.
        fetches = list(plan.fetches)
        past_end = {e.memory_id for e in fetches if clock.expired(e.end_epoch)}
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
        with ThreadPoolExecutor(max_workers=RESTORE_WORKERS) as pool:
            for start in range(0, len(fetches), RESTORE_CHUNK):
                chunk = fetches[start : start + RESTORE_CHUNK]
                futures = [(e, pool.submit(fetch, e)) for e in chunk]
                fetched: list[tuple[mf.Entry, bytes, dict[str, Any]]] = []
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
                # a retired generation's copy: kept out, or re-sealed below (log_older.py)
                fetched, more, dropped = split_older(keys, fetched, live,
                                                     {e.memory_id for e in plan.kept})
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
        listed = {str(e.blob_id) for e in remote if not e.deleted and e.blob_id}
        kept_blobs = {b: "a live memory in the merged heads is stored in this blob"
                      for b in tally.forgotten_blobs if b in listed}
        deleted_blobs, kept_now = self.host._delete_blobs(
            {b: d for b, d in tally.forgotten_blobs.items() if b not in listed})
        kept_blobs.update(kept_now)
        complete = not tally.failed and not unread
        if complete:
            self._finish(ns, keys, [*(r.ref for r in reads), *gone], remote, plan)
        with self.lock:
            self.indexes.save_all()
        return PullReport(
            namespace=ns, heads=[str(r.ref) for r in reads],
            legacy=None if legacy is None else legacy[0], total=total,
            added=tally.added, updated=tally.updated, forgotten=tally.forgotten,
            conflicts=tally.conflicts, deduplicated=tally.deduplicated,
            deleted_blobs=deleted_blobs, kept_blobs=kept_blobs,
            unchanged=plan.unchanged, missing=tally.missing, expired=tally.expired,
            unreadable=tally.unreadable, failed=tally.failed, complete=complete,
            resumed=resumed,
            equivocations=equivocations,
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

        def check(data: bytes) -> None:
            record = open_envelope(opener(data), data, expected_id=entry.memory_id,
                                   expected_kind="fact")
            if record.get("version") != entry.version:
                raise InvalidInput(f"blob holds version {record.get('version')}, "
                                   f"manifest says {entry.version}")
            if entry.digest is not None and mf.sealed_digest(data) != entry.digest:
                raise InvalidInput("blob is not the version the manifest lists (digest)")

        data = read_checked(self.host.walrus, check, blob_id=entry.blob_id,
                            patch_id=entry.patch_id)
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
                remote: list[mf.Entry], plan: MergePlan) -> None:
        """The merge is complete: record the heads the local state now contains."""
        candidates = list(dict.fromkeys([*self.merged(ns), *refs]))
        newest = [c for c in candidates
                  if not any(o != c and self.descends(ns, keys, o, c) for o in candidates)]
        listed = {e.memory_id: e for e in remote}
        live, tombstones = local_state(self.catalog, ns)
        ours_only = sum(1 for mid in live if mid not in listed or listed[mid].deleted) + sum(
            1 for mid in tombstones if mid not in listed or not listed[mid].deleted)
        ahead = ours_only + len(plan.kept) + (1 if len(newest) > 1 else 0)
        with self.lock:
            self.tables.set_head_state(ns, [str(h) for h in sorted(newest, reverse=True)],
                                       ahead=ahead)
            self.tables.set_restoring(ns, None)
