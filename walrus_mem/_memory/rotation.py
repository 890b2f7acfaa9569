"""Key rotation: move a namespace to a new key generation.

A namespace's keys come in generations (:meth:`NamespaceKeys.derive` /
``from_agent_key`` with ``generation=g``; generation 0 is the original
derivation). :func:`rotate_key` moves a namespace from generation ``g`` to
``g + 1``. It never begins, nor goes on, while a pull or restore of the namespace
is unfinished (RestoreIncomplete: finish the restore first):

1. **begin**: the new generation becomes current at once (every later write is
   sealed under it) and the namespace's recorded fingerprint changes to the new
   key's, so the local access check now wants the new key. The rotation is
   recorded in the catalog (``meta`` key ``keygen:<namespace>``).
2. **reseal**: every live memory's sealed copy is opened with the old key and
   sealed again, unchanged, under the new one (new dedupe hashes too), and
   queued for publishing, in transactions of 256. A memory whose sealed copy
   already carries the new fingerprint is skipped, which is what makes a killed
   rotation resumable: running it again continues where it stopped. Until every
   memory is re-sealed no manifest of the namespace is published by anything
   (RotationIncomplete: it would list the old generation's blobs); ``sync`` and
   ``repair`` finish an interrupted rotation first (:func:`finish_rotation`).
3. **publish**: the outbox is flushed (quilts of up to 666 facts). If the
   publisher fails, the rotation stays *in progress*; run it again (or ``sync``,
   which finishes it) to finish. A poisoned batch (:mod:`walrus_mem._catalog.outbox_poison`)
   does not hold it back: re-queued alone, still poisoned, under the new key.
4. **manifest**: a new manifest is published under the new key.
5. **retire**: the old generation is recorded with the blob ids it sealed and
   its last manifest, so its blobs can be read during the transition (with the
   old generation's key, which stays derivable) and deleted afterwards
   (``delete_old=True``: every blob of the older generations this data dir knows,
   :mod:`walrus_mem._memory.rotation_cleanup`).

A version sealed under a retired generation that a merge meets later (an entry
that was pending when the rotation ran, _log/pending.py) is opened with that
generation's key where a manifest's digest binds it, never replaces a copy of
the same version held here, and once merged is re-sealed under the current
generation (:func:`reseal_fetched`, _log/older.py).

Other machines follow a rotation by themselves (_log/generation.py): a manifest
root's envelope carries the key fingerprint, which is matched against
generations 0..:data:`MAX_PROBE` and trusted only once the manifest verifies
under that generation's key. A data dir holding nothing of the namespace then
adopts the generation (:func:`adopt_keys`); one holding memories under an older
generation rotates to it (:func:`follow_rotation`).

What rotation protects: everything published after it is sealed under a key
the old namespace key cannot open. What it cannot do: make blobs already
published under the old key unreadable to whoever holds that key (until they
expire or are deleted), and, for a derived namespace, protect against a leak
of the master seed itself, from which every generation is derivable (rotate
the master seed by moving to a new installation key for that: docs/keys.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from filelock import FileLock, Timeout

from .._catalog.catalog import dedupe_key, twin_slot
from .._catalog.outbox_poison import is_poisoned
from .._keys.chain import older_generation
from .._keys.generations import (
    MAX_PROBE,
    current_generation,
    load_state,
    meta_key,
    reseal_unfinished,
    rotation_in_progress,
    save_state,
)
from .._log import manifest as mf
from .._recall.index import index_file_stem
from ..envelope import envelope_fingerprint, open_envelope, seal
from ..errors import (
    EnvelopeError,
    KeyMaterialError,
    LocalStoreError,
    RestoreIncomplete,
    RotationIncomplete,
    StorageError,
    WalrusMemError,
    WrongNamespace,
)
from ..keys import NamespaceKeys
from .rotation_cleanup import delete_retired

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog
    from .parts import Parts

__all__ = ["MAX_PROBE", "RotationReport", "adopt_keys", "current_generation",
           "finish_rotation", "follow_rotation", "older_generation", "reseal_fetched",
           "reseal_unfinished", "rotate_key", "rotation_in_progress"]

log = logging.getLogger(__name__)

RESEAL_CHUNK: Final = 256
_LOCK_TIMEOUT: Final = 300.0


@dataclass
class RotationReport:
    """What one :func:`rotate_key` call did."""

    namespace: str
    old_generation: int
    generation: int
    fingerprint: str
    resealed: int = 0
    published: int = 0
    manifest_blob_id: str | None = None
    complete: bool = False
    old_blobs: list[str] = field(default_factory=list)
    deleted_blobs: list[str] = field(default_factory=list)
    kept_blobs: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def adopt_keys(parts: Parts, namespace: str, keys: NamespaceKeys) -> bool:
    """Make ``keys``' generation current for a namespace this data dir holds nothing of
    (a fresh data dir restoring a rotated namespace); whether that changed anything.

    The caller has verified a manifest sealed and signed under ``keys``
    (_log/generation.py): the fingerprint in an envelope's header alone is
    unauthenticated, and a failed restore must change nothing (issue 23, item 11).
    """
    catalog = parts.catalog
    with parts.lock:
        state = load_state(catalog, namespace)
        if keys.generation == int(state["generation"]):
            return False
        if catalog.count(namespace) > 0 or state.get("rotating") is not None:
            raise LocalStoreError(
                f"namespace {namespace!r} holds memories under key generation "
                f"{state['generation']}: it follows generation {keys.generation} by a rotation "
                "(follow_rotation), not by adopting it")
        _switch(parts, namespace, keys, {**state, "generation": keys.generation,
                                          "rotating": None})
        log.info("namespace %r uses key generation %d (found in a verified manifest)",
                 namespace, keys.generation)
        return True


def follow_rotation(parts: Parts, namespace: str, generation: int) -> RotationReport:
    """Move a namespace this data dir holds under an older key generation to
    ``generation``, the one another machine rotated it to (a manifest of it verified:
    _log/generation.py): a rotation to that generation, begun here and carried out by
    :func:`rotate_key` (re-seal, publish, a manifest that merges the newer heads,
    retire). A rotation already in progress is finished instead (a later sync follows
    on from there). The caller has made sure no pull or restore of it is unfinished
    (follow.py), as rotate_key refuses to go on over one."""
    ns = parts.keys.for_namespace(namespace).namespace  # the access check, as rotate_key's
    catalog = parts.catalog
    with _rotate_lock(parts, ns), parts.lock:
        state = load_state(catalog, ns)
        if state.get("rotating") is None and int(state["generation"]) < generation:
            old_gen = int(state["generation"])
            info = catalog.namespace(ns)
            # the record rotate_key's begin writes, with the target generation
            rotating: dict[str, Any] = {
                "from": old_gen, "to": generation, "old_blobs": [],
                "old_manifest": None if info is None else info["manifest_blob_id"],
                "started_at": time.time()}
            _switch(parts, ns, parts.keys.derive(ns, generation),
                    {**state, "generation": generation, "rotating": rotating})
            log.warning("following the rotation of %r from key generation %d to %d made on "
                        "another machine: re-sealing this data dir's memories", ns, old_gen,
                        generation)
    return rotate_key(parts, ns)


@contextmanager
def _rotate_lock(parts: Parts, ns: str) -> Iterator[None]:
    path = parts.data_dir / "locks" / f"rotate-{index_file_stem(ns)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        with FileLock(str(path), timeout=_LOCK_TIMEOUT, mode=0o600):
            yield
    except Timeout:
        raise LocalStoreError(f"another process has been rotating {ns!r} for over "
                              f"{_LOCK_TIMEOUT:.0f} s") from None


def _switch(parts: Parts, namespace: str, keys: NamespaceKeys, state: dict[str, Any]) -> None:
    """Record ``state`` and make ``keys`` the namespace's current keys (one transaction)."""
    catalog = parts.catalog
    with catalog.write() as c:
        catalog.ensure_namespace(namespace, keys.fingerprint)  # a fresh machine has no row
        c.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                  "SET value = excluded.value", (meta_key(namespace), json.dumps(state)))
        c.execute("UPDATE namespaces SET key_fingerprint = ? WHERE name = ?",
                  (keys.fingerprint, namespace))
    parts.keys.use(namespace, keys)


def rotate_key(parts: Parts, namespace: str, *, delete_old: bool = False) -> RotationReport:
    """Rotate ``namespace`` to a new key generation, or finish an interrupted rotation."""
    current = parts.keys.for_namespace(namespace)  # the access check: only the key holder rotates
    ns = current.namespace
    path = parts.data_dir / "locks" / f"rotate-{index_file_stem(ns)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        with FileLock(str(path), timeout=_LOCK_TIMEOUT, mode=0o600):
            _refuse_while_restoring(parts, ns)
            return _rotate(parts, ns, delete_old=delete_old)
    except Timeout:
        raise LocalStoreError(f"another process has been rotating {ns!r} for over "
                              f"{_LOCK_TIMEOUT:.0f} s") from None


def finish_rotation(parts: Parts, namespace: str) -> RotationReport:
    """Finish a rotation of ``namespace`` that was interrupted (what ``sync`` and
    ``repair`` do before anything else of it). Never waits for a rotation another
    process is running: RotationIncomplete, and the next sync tries again."""
    ns = parts.keys.for_namespace(namespace).namespace
    path = parts.data_dir / "locks" / f"rotate-{index_file_stem(ns)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        with FileLock(str(path), timeout=0, mode=0o600):
            _refuse_while_restoring(parts, ns)
            return _rotate(parts, ns, delete_old=False)
    except Timeout:
        raise RotationIncomplete(
            f"a key rotation of {ns!r} is running in another process; no manifest of it "
            "until that finishes (the next sync checks again)") from None


def _refuse_while_restoring(parts: Parts, ns: str) -> None:
    """A rotation never begins (or goes on) while a pull or restore of ``ns`` is
    unfinished: that restore reads heads of the current generation, and the rotation's
    manifest would be refused until it is done (issue 23, item 3)."""
    state = parts.log.unfinished(ns)
    if state is not None:
        raise RestoreIncomplete(
            f"a pull or restore of namespace {ns!r} is "
            f"{'running' if state == 'running' else 'unfinished'}: finish it first "
            f"(`walrus-mem -n {ns} restore`, Memory.restore), then rotate; "
            "nothing was changed")


def _rotate(parts: Parts, ns: str, *, delete_old: bool) -> RotationReport:
    catalog = parts.catalog
    with parts.lock:
        state = load_state(catalog, ns)
        rotating = state.get("rotating")
        if rotating is None:  # begin: the new generation is current from now on
            old_gen = int(state["generation"])
            info = catalog.namespace(ns)
            rotating = {"from": old_gen, "to": old_gen + 1, "old_blobs": [],
                        "old_manifest": None if info is None else info["manifest_blob_id"],
                        "started_at": time.time()}
            state = {**state, "generation": old_gen + 1, "rotating": rotating}
            _switch(parts, ns, parts.keys.derive(ns, old_gen + 1), state)
            log.info("rotating %r from key generation %d to %d", ns, old_gen, old_gen + 1)
    old_keys = parts.keys.derive(ns, int(rotating["from"]))
    new_keys = parts.keys.derive(ns, int(rotating["to"]))
    parts.keys.use(ns, new_keys)
    report = RotationReport(namespace=ns, old_generation=old_keys.generation,
                            generation=new_keys.generation, fingerprint=new_keys.fingerprint)
    report.resealed = _reseal(parts, ns, old_keys, new_keys, state)
    with parts.lock:  # from now on no memory is left under the old key: manifests may go
        state = load_state(catalog, ns)
        rotating = state["rotating"]  # with the old blob ids _reseal recorded
        if not rotating.get("resealed"):
            rotating["resealed"] = True
            save_state(catalog, ns, state)
    published, errors = parts.publisher.flush(ns)
    report.published = published
    report.errors.extend(errors)
    # A poisoned batch (outbox_poison.py) is refused for good: waiting for it would keep
    # the rotation in progress forever. It stays queued, sealed under the new key, and is
    # left out of the manifest, as sync does (its error, naming it, is in report.errors).
    if any(not is_poisoned(b) for b in catalog.outbox_batches(ns)):
        report.errors.append("some re-sealed memories are still queued: the rotation stays in "
                             "progress; run it again when the publisher is reachable")
        report.old_blobs = list(rotating["old_blobs"])
        return report
    try:
        report.manifest_blob_id = parts.log.publish(ns) if catalog.count(ns) else None
    except (StorageError, WalrusMemError) as exc:
        report.errors.append(f"manifest: {type(exc).__name__}: {exc}")
        report.old_blobs = list(rotating["old_blobs"])
        return report
    with parts.lock:
        state = load_state(catalog, ns)
        retired = list(state.get("retired", []))
        retired.append({"generation": int(rotating["from"]), "fingerprint": old_keys.fingerprint,
                        "blobs": rotating["old_blobs"], "manifest": rotating["old_manifest"],
                        "started_at": rotating.get("started_at"), "retired_at": time.time()})
        state.update(rotating=None, retired=retired)
        save_state(catalog, ns, state)
    report.old_blobs = list(rotating["old_blobs"])
    report.complete = True
    if delete_old:
        report.deleted_blobs, report.kept_blobs = delete_retired(parts, ns, state)
    return report


def _reseal(parts: Parts, ns: str, old: NamespaceKeys | None, new: NamespaceKeys,
            state: dict[str, Any] | None = None, *, ids: Collection[str] | None = None) -> int:
    """Seal every live memory (of ``ids``) again under ``new``; queue it. Resumable (see
    module doc). A copy is opened with ``old``, or with the older generation its
    fingerprint names: a memory merged from a blob of a retired generation (a pending
    entry fetched late) takes part in the rotation like every other."""
    catalog = parts.catalog
    limit = parts.publisher.max_plaintext()
    done = 0
    last = 0
    only = "" if ids is None else " AND id IN (SELECT value FROM json_each(?))"
    while True:
        rows = catalog.query(
            "SELECT key, id, version, text, sealed, blob_id, quilt_patch_id, digest, "
            "dedupe_hash FROM memories "
            f"WHERE namespace = ? AND key > ?{only} ORDER BY key LIMIT ?",
            (ns, last, *([] if ids is None else [json.dumps(sorted(ids))]), RESEAL_CHUNK))
        if not rows:
            return done
        last = int(rows[-1]["key"])
        work: list[tuple[Any, bytes]] = []
        for row in rows:
            sealed = catalog.sealed_from_row(row)  # the embedded relayer's, if the row has none
            if sealed is None:
                raise LocalStoreError(f"memory {row['id']} has no sealed copy to rotate "
                                      "(walrus-mem repair seals it again)")
            fpr = envelope_fingerprint(sealed)
            if fpr == new.fingerprint_bytes:
                continue  # done before an interruption, or written after the switch
            opener = old if old is not None and fpr == old.fingerprint_bytes else (
                older_generation(parts.keys, new, fpr))
            try:
                if opener is None:
                    raise WrongNamespace("no earlier key generation has this fingerprint")
                record = open_envelope(opener, sealed, expected_id=str(row["id"]),
                                       expected_kind="fact")
            except EnvelopeError as exc:
                raise KeyMaterialError(
                    f"memory {row['id']} of {ns!r} is not sealed under key generation "
                    f"{new.generation - 1 if old is None else old.generation} or an earlier "
                    f"one: {type(exc).__name__}"
                ) from None
            work.append((row, seal(new, record, max_plaintext=limit)))
        if not work:
            continue
        poisoned = _poisoned_members(catalog, ns)
        with parts.lock, catalog.write() as c:
            full = load_state(catalog, ns)
            # the old blob ids go with the rotation (retired with it); a late straggler's,
            # after it, to the stray ones (both deleted by delete_old: rotation_cleanup.py)
            rotating = full["rotating"] or {"old_blobs": full.get("stray_blobs", [])}
            for row, sealed in work:
                if row["blob_id"] is not None:
                    rotating["old_blobs"].append(str(row["blob_id"]))
                c.execute(
                    "UPDATE memories SET sealed = ?, digest = ?, dedupe_hash = ?, "
                    "status = 'queued', blob_id = NULL, quilt_patch_id = NULL, object_id = NULL, "
                    "end_epoch = NULL, deletable = NULL WHERE key = ? AND version = ?",
                    (sealed, mf.sealed_digest(sealed), _rotated_slot(catalog, ns, new, row),
                     int(row["key"]), int(row["version"])),
                )
            rotating["old_blobs"] = sorted(set(rotating["old_blobs"]))
            if full["rotating"] is not None:
                full["rotating"] = rotating
            else:
                full["stray_blobs"] = rotating["old_blobs"]
            c.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                      "SET value = excluded.value",
                      (meta_key(ns), json.dumps(full, sort_keys=True)))
            fresh = [(str(r["id"]), int(r["version"])) for r, _ in work
                     if str(r["id"]) not in poisoned]
            for start in range(0, len(fresh), 666):
                catalog.add_outbox_batch(ns, fresh[start : start + 666], time.time())
            for row, _ in work:  # re-queued alone, still poisoned: never holds a quilt back
                if str(row["id"]) in poisoned:
                    batch = catalog.add_outbox_batch(
                        ns, [(str(row["id"]), int(row["version"]))], time.time())
                    c.execute("UPDATE outbox SET attempts = ?, last_error = ? WHERE id = ?",
                              (*poisoned[str(row["id"])], batch))
        done += len(work)
        _progress_hook(done)


def reseal_fetched(parts: Parts, ns: str, ids: Collection[str]) -> int:
    """Seal again under the current generation the memories of ``ids`` a merge just
    took from blobs of an older one (pending entries of a rotated namespace): they take
    part in the rotation like the rest, and are queued for publishing."""
    return _reseal(parts, ns, None, parts.keys.for_namespace(ns), ids=ids) if ids else 0


def _poisoned_members(catalog: Catalog, ns: str) -> dict[str, tuple[int, str]]:
    """Memory id -> (attempts, last error) of the namespace's poisoned outbox batches."""
    out: dict[str, tuple[int, str]] = {}
    for batch in catalog.outbox_batches(ns):
        if is_poisoned(batch):
            for mid in catalog.outbox_members(int(batch["id"])):
                out[mid] = (int(batch["attempts"]), str(batch["last_error"]))
    return out


def _rotated_slot(catalog: Catalog, ns: str, new: NamespaceKeys, row: Any) -> str:
    """The row's dedupe hash under the new key; a twin (catalog.dedupe_slot) stays one.
    A memory written under the new key while the rotation was unfinished may hold that
    text already (remember() looks up the new generation's hash only, so it did not see
    this row): this one then becomes its twin, as a merge keeps both (a clash of the
    slot's unique index made every later rotation, sync and repair fail)."""
    plain = dedupe_key(new, str(row["text"]))
    if ":" in str(row["dedupe_hash"]):
        return twin_slot(plain, str(row["id"]))
    return catalog.dedupe_slot(ns, plain, str(row["id"]))


def _progress_hook(done: int) -> None:
    """Called after each committed chunk (tests interrupt a rotation here)."""
