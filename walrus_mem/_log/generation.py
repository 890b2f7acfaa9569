"""Heads sealed under another key generation of their namespace (following a rotation).

After one machine rotates a namespace's key (rotation.py), its heads are sealed under
a generation the other machines do not use yet; and a machine that has not followed
yet keeps publishing heads under the older one. Which generation sealed a manifest
is told by the key fingerprint in its envelope header, which is *unauthenticated*:
it only picks the candidate keys. A head counts as generation ``g``'s only once its
bytes match the head reference's digest, the envelope opens and its signature
verifies under ``g``'s key, and the root parses and agrees with the reference
(seq, parents). Only the namespace's key holder can make one, so a newer verified
generation is the owner's rotation: a data dir holding nothing of the namespace
adopts it (_log/merging.py, committed when the merge starts), one holding
memories under an older generation follows it (Memory: ``rotation.follow_rotation``).
Nothing here writes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .._keys.generations import MAX_PROBE, rotation_in_progress
from ..envelope import envelope_fingerprint
from ..errors import EnvelopeError, HeadMismatch, VerificationFailed
from ..keys import NamespaceKeys
from . import manifest as mf
from .heads import HeadRef

if TYPE_CHECKING:
    from .context import LogContext

__all__ = ["foreign_head", "generation_of", "holds_nothing"]

log = logging.getLogger(__name__)


def generation_of(nslog: LogContext, ns: str, ref: HeadRef) -> NamespaceKeys | None:
    """The keys of the generation of ``ns`` (0..MAX_PROBE) that sealed and signed the
    manifest ``ref`` names, checked as the module doc says; None when no generation's
    fingerprint matches (another key). A forgery raises (TamperedBlob, HeadMismatch)."""

    def matches(data: bytes) -> None:
        if mf.sealed_digest(data) != ref.digest:
            raise HeadMismatch(f"bytes of {ref.blob_id} do not match the head's digest")

    try:
        data = nslog.host.walrus.read_blob(ref.blob_id, verify=matches)
    except VerificationFailed as exc:
        raise HeadMismatch(f"no aggregator serves the bytes head {ref} names") from exc
    try:
        wanted = envelope_fingerprint(data)
    except EnvelopeError:
        return None
    for generation in range(MAX_PROBE + 1):
        keys = nslog.host.derive_keys(ns, generation=generation)
        if keys.fingerprint_bytes == wanted:
            nslog.check_root(keys, data, ref)  # the claim holds only if this opens
            return keys
    return None


def holds_nothing(nslog: LogContext, ns: str) -> bool:
    """Whether this data dir holds nothing sealed of ``ns`` (no memory, no pending
    entry, no unfinished restore or rotation): it can take any generation as is."""
    return (nslog.catalog.count(ns) == 0 and not nslog.tables.pending(ns)
            and nslog.tables.restoring(ns) is None
            and not rotation_in_progress(nslog.catalog, ns))


def foreign_head(nslog: LogContext, ns: str, keys: NamespaceKeys, ref: HeadRef) -> str:
    """Why a heads-file head whose manifest is not sealed under ``keys`` is left out,
    with advice that fits it. A newer generation is recorded in ``nslog.ahead`` (to be
    adopted or followed, never cached as unusable); an older one or another key's is
    cached, as the same bytes give the same answer. Raises for a forgery."""
    found = generation_of(nslog, ns, ref)
    current = keys.generation
    if found is not None and found.generation > current:
        held = nslog.ahead.get(ns)
        if held is None or held.generation < found.generation:
            nslog.ahead[ns] = found
        reason = (f"sealed under key generation {found.generation} of {ns!r}, newer than "
                  f"this data dir's ({current}): another machine rotated the key; this "
                  "data dir follows the rotation (docs/keys.md)")
        log.info("heads file: head %s of %r is of key generation %d (this data dir: %d)",
                 ref, ns, found.generation, current)
        return reason
    if found is not None:
        reason = (f"sealed under key generation {found.generation} of {ns!r}, older than "
                  f"this data dir's ({current}): its writer has not followed the rotation "
                  "yet; its next sync follows it and replaces this line (nothing to remove; "
                  "docs/keys.md)")
    else:
        reason = (f"sealed under another key than any generation of {ns!r} here: another "
                  "installation's namespace of the same name (another master or agent key), "
                  "or a line someone else wrote; remove it only if no machine with another "
                  "key writes to this file")
    nslog._unusable[(ns, ref)] = reason
    log.warning("heads file %s: skipped line '%s %s' (%s)", nslog.host.settings.heads_file,
                ns, ref, reason)
    return reason

