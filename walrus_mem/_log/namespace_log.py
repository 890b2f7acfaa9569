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

Memory (memory.py) is the façade; the SQL lives in _catalog/ (the log's in log_tables.py).
The class itself holds the heads and the reads; the publish side (publishing.py)
and the merge side (merging.py) are mixins of it. Parts of the job have modules of
their own: applying a merge's fetched versions (_log/apply.py), announcing a
published head (_log/announce.py), expired blobs (_log/expired.py), format-1
manifests (_log/legacy.py), manifest pages (_log/pages.py) and pending entries
(_log/pending.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from filelock import FileLock, Timeout

from .._catalog.catalog import Catalog
from .._catalog.log_tables import LogTables
from .._recall.index import index_file_stem
from .._recall.index_store import IndexStore
from .._walrus.expiry import EpochClock
from ..envelope import open_envelope
from ..errors import (
    EnvelopeError,
    HeadMismatch,
    InvalidHead,
    KeyMaterialError,
    LocalStoreError,
    LogError,
    RestoreIncomplete,
    StaleManifest,
    StorageError,
    VerificationFailed,
    WalrusMemError,
    WrongNamespace,
)
from ..keys import NamespaceKeys
from ..models import PullReport
from . import manifest as mf
from .context import ProgressCallback
from .generation import foreign_head, generation_of, holds_nothing
from .gone import stored_bound
from .heads import HeadRef, HeadsFile, SeenHead, SeenHeads, parse_head
from .heads_mirror import HeadsMirror, default_state_dir
from .host import BlobDeleter, KeyAdopter, LogHost
from .legacy import merge_legacy, read_legacy_root, split_legacy
from .legacy_manifest import LegacyRoot
from .merging import Merging
from .pages import ManifestPages, read_page
from .publishing import MANIFEST_MAX_PLAINTEXT, Publishing

__all__ = [
    "MANIFEST_MAX_PLAINTEXT",
    "LogHost",
    "NamespaceLog",
    "ProgressCallback",
]

log = logging.getLogger(__name__)

MANIFEST_LOCK_TIMEOUT: Final = 300.0
PAGE_WORKERS: Final = 8
"""Manifest pages read at once by a restore or pull."""
MAX_WALK = 10_000
"""Manifests an ancestry check visits at most; beyond, the heads count as concurrent."""
MAX_FETCH = 1_000
"""Unseen manifests an ancestry check reads at most (one request each); beyond, the
heads count as concurrent (they are then remembered, so the next check goes further)."""


class NamespaceLog(Merging, Publishing):
    """Manifests of every namespace of one data dir."""

    def __init__(self, host: LogHost, catalog: Catalog, indexes: IndexStore,
                 lock: threading.RLock, *, deleter: BlobDeleter,
                 adopt_keys: KeyAdopter) -> None:
        self.host = host
        self.deleter = deleter
        self.adopt_keys = adopt_keys
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
        this data dir's: another machine rotated, this one follows (_log/generation.py)."""
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
        (_log/generation.py); a newer generation's is recorded in :attr:`ahead`, to
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
                        self.learn(ns, keys, ref) if seen is None else self._read_root(
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
                    known = self.learn(ns, keys, node)
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

    def learn(self, ns: str, keys: NamespaceKeys, ref: HeadRef) -> SeenHead:
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
        """The root's entries and its pages', in order."""
        return self._read_pages(keys, root)[0]

    def _read_pages(self, keys: NamespaceKeys, root: mf.Root, skip: Collection[str] = (),
                    ) -> tuple[list[mf.Entry], dict[str, list[mf.Entry]]]:
        """The root's entries and those of its pages whose digest is not in ``skip``, in
        order, and the pages read (digest -> entries). The pages are read in parallel
        (:data:`PAGE_WORKERS`): one after the other they took 10-17 s of a 100k restore
        before its first fact was fetched."""
        client = self.host.walrus
        entries = list(root.entries or [])

        def page(spec: tuple[str, str | None, str, int]) -> list[mf.Entry]:
            blob_id, patch_id, digest, _ = spec  # the root binds each page's digest
            return read_page(client, keys, blob_id, patch_id, digest,
                             opener=lambda data: self._sealed_under(keys, data))

        pages = [spec for spec in root.pages if spec[2] not in skip]
        read: dict[str, list[mf.Entry]] = {}
        if len(pages) <= 1:
            for spec in pages:
                read[spec[2]] = part = page(spec)
                entries.extend(part)
            return entries, read
        with ThreadPoolExecutor(max_workers=min(PAGE_WORKERS, len(pages))) as pool:
            # in order; the first failure is raised
            for spec, part in zip(pages, pool.map(page, pages), strict=True):
                read[spec[2]] = part
                entries.extend(part)
        return entries, read

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

    def _clock(self) -> EpochClock:
        return self.host.epoch_clock  # configured, network-known or learned epoch length

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
        raises LegacyManifest unless ``allow_legacy`` (_log/legacy.py).
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
                # current only once the merge starts, _log/generation.py).
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
        # its manifest answers 404 (_log/gone.py); a sync's pull reports and retries it.
        hold = {*resumed, *(r for r in todo if r not in contained)} if recheck else {*resumed}
        try:
            report = self._merge(ns, keys, todo, progress=progress,
                                 allow_unrelated=allow_unrelated, resumed=bool(resumed),
                                 gone_ok=heads is None, hold=hold, reuse=not recheck)
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
                                 gone_ok=heads is None, hold=hold, reuse=not recheck)
        if skipped:
            report = report.model_copy(update={"skipped": [*skipped, *report.skipped]})
        return report

    def _generations(self, ns: str, refs: list[HeadRef]) -> dict[HeadRef, NamespaceKeys]:
        """The key generation each of ``refs`` verifies under (_log/generation.py), for
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

