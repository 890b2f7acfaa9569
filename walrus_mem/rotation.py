"""Key rotation: move a namespace to a new key generation.

A namespace's keys come in generations (:meth:`NamespaceKeys.derive` /
``from_agent_key`` with ``generation=g``; generation 0 is the original
derivation). :func:`rotate_key` moves a namespace from generation ``g`` to
``g + 1``:

1. **begin**: the new generation becomes current at once (every later write is
   sealed under it) and the namespace's recorded fingerprint changes to the new
   key's, so the local access check now wants the new key. The rotation is
   recorded in the catalog (``meta`` key ``keygen:<namespace>``).
2. **reseal**: every live memory's sealed copy is opened with the old key and
   sealed again, unchanged, under the new one (new dedupe hashes too), and
   queued for publishing, in transactions of 256. A memory whose sealed copy
   already carries the new fingerprint is skipped, which is what makes a killed
   rotation resumable: running it again continues where it stopped.
3. **publish**: the outbox is flushed (quilts of up to 666 facts). If the
   publisher fails, the rotation stays *in progress*; run it again (or ``sync``
   then rotate again) to finish. A poisoned batch (:mod:`walrus_mem.outbox_poison`)
   does not hold it back: re-queued alone, still poisoned, under the new key.
4. **manifest**: a new manifest is published under the new key.
5. **retire**: the old generation is recorded with the blob ids it sealed and
   its last manifest, so its blobs can be read during the transition (with the
   old generation's key, which stays derivable) and deleted afterwards
   (``delete_old=True`` deletes the deletable ones the backend lets us delete).

Restore on a fresh machine finds the generation by itself: the manifest root's
envelope carries the key fingerprint, which is matched against generations
0..:data:`MAX_PROBE` (:func:`adopt_generation`).

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from filelock import FileLock, Timeout

from . import manifest as mf
from .catalog import twin_slot
from .envelope import envelope_fingerprint, open_envelope, seal
from .errors import (
    BlobNotFound,
    EnvelopeError,
    InvalidEnvelope,
    KeyMaterialError,
    LocalStoreError,
    StorageError,
    VerificationFailed,
    WalrusMemError,
)
from .heads import HeadRef
from .index import index_file_stem
from .keys import NamespaceKeys
from .outbox_poison import is_poisoned

if TYPE_CHECKING:
    from .catalog import Catalog
    from .memory import Memory

__all__ = ["MAX_PROBE", "RotationReport", "adopt_generation", "adopt_generation_of_head",
           "current_generation", "rotate_key"]

log = logging.getLogger(__name__)

MAX_PROBE: Final = 64  # generations tried when a fresh machine restores a manifest
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


def _meta_key(namespace: str) -> str:
    return f"keygen:{namespace}"


def _state(catalog: Catalog, namespace: str) -> dict[str, Any]:
    raw = catalog.get_meta(_meta_key(namespace))
    if raw is None:
        return {"generation": 0, "rotating": None, "retired": []}
    try:
        state = json.loads(raw)
        int(state["generation"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LocalStoreError(f"key generation record of {namespace!r} is corrupt") from exc
    return dict(state)


def _save(catalog: Catalog, namespace: str, state: dict[str, Any]) -> None:
    catalog.set_meta(_meta_key(namespace), json.dumps(state, sort_keys=True))


def current_generation(catalog: Catalog, namespace: str) -> int:
    """The key generation a namespace uses now (0 unless it was rotated)."""
    return int(_state(catalog, namespace)["generation"])


def adopt_generation(memory: Memory, namespace: str, sealed: bytes) -> int | None:
    """Make the generation whose key sealed ``sealed`` (e.g. a manifest root) current
    for a namespace this data dir holds nothing of yet; return it (None: no match)."""
    catalog = memory._catalog
    if catalog.count(namespace) > 0 or current_generation(catalog, namespace) != 0:
        return None
    try:
        wanted = envelope_fingerprint(sealed)
    except (InvalidEnvelope, EnvelopeError):
        return None
    for generation in range(MAX_PROBE + 1):
        keys = memory._derive(namespace, generation)
        if keys.fingerprint_bytes == wanted:
            if generation:
                with memory._lock:
                    _switch(memory, namespace, keys, {"generation": generation,
                                                      "rotating": None, "retired": []})
            return generation
    return None


def adopt_generation_of_head(memory: Memory, namespace: str, head: str) -> int | None:
    """:func:`adopt_generation` from the manifest a head reference names, only from bytes
    that match its digest: a restore that then fails (a mistyped digest, another
    manifest served) has changed nothing. A bare blob id (seen here, or a format-1
    one) binds no digest: any bytes served for it are used, as the pull checks them."""
    try:
        ref: HeadRef | None = HeadRef.parse(head)
    except ValueError:  # InvalidHead: a bare blob id
        ref = None

    def matches(data: bytes) -> None:
        if ref is not None and mf.sealed_digest(data) != ref.digest:
            raise ValueError("bytes do not match the head reference's digest")

    try:
        root = memory.walrus.read_blob(head.split(".")[0], verify=matches)
    except (VerificationFailed, BlobNotFound, ValueError):
        return None  # the restore reads it again and names what is wrong with it
    # another StorageError (no aggregator answered within the read deadline): raised
    # now, else the restore would wait out a second read deadline for the same answer
    return adopt_generation(memory, namespace, root)


def _switch(memory: Memory, namespace: str, keys: NamespaceKeys, state: dict[str, Any]) -> None:
    """Record ``state`` and make ``keys`` the namespace's current keys (one transaction)."""
    catalog = memory._catalog
    with catalog.write() as c:
        catalog.ensure_namespace(namespace, keys.fingerprint)  # a fresh machine has no row
        c.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                  "SET value = excluded.value", (_meta_key(namespace), json.dumps(state)))
        c.execute("UPDATE namespaces SET key_fingerprint = ? WHERE name = ?",
                  (keys.fingerprint, namespace))
    memory._keys[namespace] = keys


def rotate_key(memory: Memory, namespace: str, *, delete_old: bool = False) -> RotationReport:
    """Rotate ``namespace`` to a new key generation, or finish an interrupted rotation."""
    current = memory.keys_for(namespace)  # the access check: only the key holder rotates
    ns = current.namespace
    path = memory.data_dir / "locks" / f"rotate-{index_file_stem(ns)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        with FileLock(str(path), timeout=_LOCK_TIMEOUT, mode=0o600):
            return _rotate(memory, ns, delete_old=delete_old)
    except Timeout:
        raise LocalStoreError(f"another process has been rotating {ns!r} for over "
                              f"{_LOCK_TIMEOUT:.0f} s") from None


def _rotate(memory: Memory, ns: str, *, delete_old: bool) -> RotationReport:
    catalog = memory._catalog
    with memory._lock:
        state = _state(catalog, ns)
        rotating = state.get("rotating")
        if rotating is None:  # begin: the new generation is current from now on
            old_gen = int(state["generation"])
            info = catalog.namespace(ns)
            rotating = {"from": old_gen, "to": old_gen + 1, "old_blobs": [],
                        "old_manifest": None if info is None else info["manifest_blob_id"],
                        "started_at": time.time()}
            state = {**state, "generation": old_gen + 1, "rotating": rotating}
            _switch(memory, ns, memory._derive(ns, old_gen + 1), state)
            log.info("rotating %r from key generation %d to %d", ns, old_gen, old_gen + 1)
    old_keys = memory._derive(ns, int(rotating["from"]))
    new_keys = memory._derive(ns, int(rotating["to"]))
    memory._keys[ns] = new_keys
    report = RotationReport(namespace=ns, old_generation=old_keys.generation,
                            generation=new_keys.generation, fingerprint=new_keys.fingerprint)
    report.resealed = _reseal(memory, ns, old_keys, new_keys, state)
    rotating = _state(catalog, ns)["rotating"]  # with the old blob ids _reseal recorded
    published, errors = memory._flush(ns)
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
        report.manifest_blob_id = memory._log.publish(ns) if catalog.count(ns) else None
    except (StorageError, WalrusMemError) as exc:
        report.errors.append(f"manifest: {type(exc).__name__}: {exc}")
        report.old_blobs = list(rotating["old_blobs"])
        return report
    with memory._lock:
        state = _state(catalog, ns)
        retired = list(state.get("retired", []))
        retired.append({"generation": int(rotating["from"]), "fingerprint": old_keys.fingerprint,
                        "blobs": rotating["old_blobs"], "manifest": rotating["old_manifest"],
                        "retired_at": time.time()})
        state.update(rotating=None, retired=retired)
        _save(catalog, ns, state)
    report.old_blobs = list(rotating["old_blobs"])
    report.complete = True
    if delete_old and report.old_blobs:
        deletable = {b: None for b in report.old_blobs}
        report.deleted_blobs, report.kept_blobs = memory._delete_blobs(deletable)
    return report


def _reseal(memory: Memory, ns: str, old: NamespaceKeys, new: NamespaceKeys,
            state: dict[str, Any]) -> int:
    """Seal every live memory again under ``new``; queue it. Resumable (see module doc)."""
    catalog = memory._catalog
    limit = memory._max_plaintext()
    done = 0
    last = 0
    while True:
        rows = catalog.query(
            "SELECT key, id, version, text, sealed, blob_id, dedupe_hash FROM memories "
            "WHERE namespace = ? AND key > ? ORDER BY key LIMIT ?", (ns, last, RESEAL_CHUNK))
        if not rows:
            return done
        last = int(rows[-1]["key"])
        work: list[tuple[Any, bytes]] = []
        for row in rows:
            sealed = row["sealed"]
            if sealed is None:
                raise LocalStoreError(f"memory {row['id']} has no sealed copy to rotate")
            sealed = bytes(sealed)
            if envelope_fingerprint(sealed) == new.fingerprint_bytes:
                continue  # done before an interruption, or written after the switch
            try:
                record = open_envelope(old, sealed, expected_id=str(row["id"]),
                                       expected_kind="fact")
            except EnvelopeError as exc:
                raise KeyMaterialError(
                    f"memory {row['id']} of {ns!r} is not sealed under key generation "
                    f"{old.generation}: {type(exc).__name__}"
                ) from None
            work.append((row, seal(new, record, max_plaintext=limit)))
        if not work:
            continue
        poisoned = _poisoned_members(catalog, ns)
        with memory._lock, catalog.write() as c:
            rotating = _state(catalog, ns)["rotating"]
            for row, sealed in work:
                if row["blob_id"] is not None:
                    rotating["old_blobs"].append(str(row["blob_id"]))
                c.execute(
                    "UPDATE memories SET sealed = ?, digest = ?, dedupe_hash = ?, "
                    "status = 'queued', blob_id = NULL, quilt_patch_id = NULL, object_id = NULL, "
                    "end_epoch = NULL, deletable = NULL WHERE key = ? AND version = ?",
                    (sealed, mf.sealed_digest(sealed), _rotated_slot(new, row),
                     int(row["key"]), int(row["version"])),
                )
            rotating["old_blobs"] = sorted(set(rotating["old_blobs"]))
            full = _state(catalog, ns)
            full["rotating"] = rotating
            c.execute("UPDATE meta SET value = ? WHERE key = ?",
                      (json.dumps(full, sort_keys=True), _meta_key(ns)))
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


def _poisoned_members(catalog: Catalog, ns: str) -> dict[str, tuple[int, str]]:
    """Memory id -> (attempts, last error) of the namespace's poisoned outbox batches."""
    out: dict[str, tuple[int, str]] = {}
    for batch in catalog.outbox_batches(ns):
        if is_poisoned(batch):
            for mid in catalog.outbox_members(int(batch["id"])):
                out[mid] = (int(batch["attempts"]), str(batch["last_error"]))
    return out


def _rotated_slot(new: NamespaceKeys, row: Any) -> str:
    """The row's dedupe hash under the new key; a twin (catalog.dedupe_slot) stays one."""
    plain = new.dedupe_hash(str(row["text"]))
    return twin_slot(plain, str(row["id"])) if ":" in str(row["dedupe_hash"]) else plain


def _progress_hook(done: int) -> None:
    """Called after each committed chunk (tests interrupt a rotation here)."""
