"""``rotate_key(delete_old=True)``: delete what the retired key generations sealed.

After a complete rotation (rotation.py) the old generation's key still opens
whatever it sealed that storage still serves: every version of every memory
(not only the current ones the rotation re-sealed), the manifests and their
pages (memory ids, blob ids, times), and the grants other namespaces sent to
it. :func:`delete_retired` deletes every such blob this data dir knows of the
namespace, where the backend allows it, and says what it could not delete:

* known to be of an older generation without reading: the blobs a rotation
  re-sealed memories from (recorded as it went), and the manifests this data
  dir published or saw before the rotation began;
* checked by reading the envelope's key fingerprint (one read each): every
  other blob the catalog names for the namespace (earlier versions, conflicts,
  manifest pages, later manifests) and the grants its memories were accepted
  from (tried with each older generation's key);
* never deleted: a blob a live memory is stored in now, or one a pending
  entry (merged, not fetched yet: _log/pending.py) still needs.

Blobs other machines hold copies of, or wrote themselves and still list in
their heads before they follow the rotation, are deleted too if this data dir
knows them: run it once every machine has followed (docs/keys.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import nacl.exceptions
import nacl.public

from ..envelope import envelope_fingerprint
from ..errors import BlobNotFound, EnvelopeError, GrantError, WalrusMemError
from . import deletions
from .grants import GRANT_MAGIC, parse_reference

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["delete_retired"]

log = logging.getLogger(__name__)


def delete_retired(parts: Parts, ns: str,
                   state: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Delete the blobs of ``ns`` sealed under a generation older than the current one
    (``state``: the namespace's key generation record, rotation complete); return
    (deleted, kept: blob id -> why)."""
    known, to_check = _candidates(parts, ns, state)
    grants = _grant_blobs(parts, ns)
    in_use = _in_use(parts, ns)
    kept = {b: "a live memory or a pending entry is stored in it" for b in known & in_use}
    known -= in_use
    grants -= in_use
    settled = known | in_use | grants
    unchecked = {b: p for b, p in to_check.items() if b not in settled}
    backend = parts.publisher.backend()
    if not backend.can_delete:  # real Walrus over HTTP: say so, read nothing
        reason = backend.delete_blob("")[1]  # the backend's reason; nothing is sent
        kept.update({b: reason for b in sorted(known | grants | set(unchecked))})
        return [], kept
    older = {parts.keys.derive(ns, g).fingerprint_bytes
             for g in range(parts.keys.for_namespace(ns).generation)}
    old = set(known)
    old.update(b for b, patch in unchecked.items() if _sealed_by(parts, b, patch) in older)
    old.update(b for b in grants if _grant_to_older(parts, ns, b))
    deletable = _deletable(parts, ns)
    deleted: list[str] = []
    for blob_id in sorted(old):
        if deletable.get(blob_id) is False:
            kept[blob_id] = "permanent blob: cannot be deleted before its end epoch"
            continue
        ok, reason = backend.delete_blob(blob_id)
        if ok:
            deleted.append(blob_id)
        else:
            kept[blob_id] = reason
    deletions.settle(parts.catalog, deleted)  # some may have been waiting as a forget's
    log.info("deleted %d blob(s) of %r's retired key generations; %d kept", len(deleted), ns,
             len(kept))
    return deleted, kept


def _candidates(parts: Parts, ns: str,
                state: dict[str, Any]) -> tuple[set[str], dict[str, str | None]]:
    """(blobs known to be of an older generation, other blobs of ``ns`` to check by
    reading them: blob id -> the patch id to read it by)."""
    retired = list(state.get("retired", []))
    # everything this data dir published or saw before the last rotation began is older
    since = max((float(r["started_at"]) for r in retired if r.get("started_at")),
                default=None)
    known: set[str] = set(state.get("stray_blobs", []))
    for record in retired:
        known.update(record.get("blobs", []))
        if record.get("manifest"):
            known.add(str(record["manifest"]).split(".")[0])  # <blob id>.<seq>.<digest>
    to_check: dict[str, str | None] = {}
    manifests = {str(r[0]): float(r[1]) for r in parts.catalog.query(
        "SELECT blob_id, at FROM manifests WHERE namespace = ?", (ns,))}
    for blob_id, at in [*manifests.items(), *parts.log.seen.seen_at(ns).items()]:
        if since is not None and at < since:
            known.add(blob_id)
        else:
            to_check.setdefault(blob_id, None)
    for table, patch in (("versions", "quilt_patch_id"), ("memories", "quilt_patch_id"),
                         ("manifest_pages", "patch_id")):  # memories: current versions
        for row in parts.catalog.query(
                f"SELECT blob_id, {patch} FROM {table} WHERE namespace = ? "
                "AND blob_id IS NOT NULL", (ns,)):
            to_check.setdefault(str(row[0]), row[1])
    return known, to_check


def _in_use(parts: Parts, ns: str) -> set[str]:
    """Blobs the current state of ``ns`` needs: its live memories' and pending entries'."""
    rows = parts.catalog.query(
        "SELECT blob_id FROM memories WHERE namespace = ? AND blob_id IS NOT NULL", (ns,))
    used = {str(r[0]) for r in rows}
    used.update(str(e["b"]) for e in parts.log.tables.pending(ns).values()
                if isinstance(e, dict) and e.get("b"))
    for head in parts.log.merged(ns):
        used.add(head.blob_id)  # of the current generation; never deleted by this
    return used


def _deletable(parts: Parts, ns: str) -> dict[str, bool]:
    rows = parts.catalog.query(  # memories: the current versions' (catalog schema 8)
        "SELECT blob_id, deletable FROM versions WHERE namespace = ? AND deletable IS NOT NULL "
        "UNION ALL SELECT blob_id, deletable FROM memories WHERE namespace = ? "
        "AND event IS NOT NULL AND deletable IS NOT NULL", (ns, ns))
    return {str(r[0]): bool(r[1]) for r in rows}


def _sealed_by(parts: Parts, blob_id: str, patch_id: str | None) -> bytes | None:
    """The key fingerprint of the envelope stored there (None: gone, or not an envelope)."""
    try:
        data = (parts.publisher.client.read_quilt_patch(patch_id) if patch_id
                else parts.publisher.client.read_blob(blob_id))
        return envelope_fingerprint(data)
    except (BlobNotFound, EnvelopeError):
        return None
    except WalrusMemError as exc:  # unreadable now: left alone (not reported as old)
        log.info("blob %s not checked (%s)", blob_id, type(exc).__name__)
        return None


def _grant_blobs(parts: Parts, ns: str) -> set[str]:
    """Blob ids of the grants the memories of ``ns`` were accepted from."""
    refs: set[str] = set()
    for table in ("memories", "versions"):
        for row in parts.catalog.query(
                f"SELECT json_extract(metadata, '$.grant') FROM {table} WHERE namespace = ? "
                "AND json_valid(metadata) AND json_extract(metadata, '$.grant') IS NOT NULL",
                (ns,)):
            try:
                refs.add(parse_reference(str(row[0]))[0])
            except GrantError:
                continue
    return refs


def _grant_to_older(parts: Parts, ns: str, blob_id: str) -> bool:
    """Whether the grant stored there opens with an older generation's key of ``ns``."""
    try:
        data = parts.publisher.client.read_blob(blob_id)
    except WalrusMemError:
        return False
    if not data.startswith(GRANT_MAGIC):
        return False
    for generation in range(parts.keys.for_namespace(ns).generation):
        keys = parts.keys.derive(ns, generation)
        box = nacl.public.SealedBox(keys.signing_key.to_curve25519_private_key())
        try:
            box.decrypt(data[len(GRANT_MAGIC):])
        except nacl.exceptions.CryptoError:
            continue
        return True
    return False

