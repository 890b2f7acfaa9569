"""Pulling a format-1 manifest (read-only): found by its bare blob id, merged as a root.

What format 1 lacks, and why it is read only on request, is told in
legacy_manifest.py (which parses it). Here the namespace log tells a bare blob id
of a format-1 manifest from a head reference (:func:`split_legacy`), reads and
checks its root and pages, and merges its memories as a root of no history
(:func:`merge_legacy`): no head is recorded for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._walrus.blobio import read_checked
from ..envelope import open_envelope
from ..errors import (
    InvalidHead,
    InvalidInput,
    LegacyManifest,
    TamperedBlob,
    WalrusMemError,
    WrongNamespace,
)
from ..keys import NamespaceKeys
from ..models import PullReport
from ..walrus import WalrusClient
from .heads import HeadRef, parse_head
from .legacy_manifest import LegacyRoot, is_format_1, parse_page_v1, parse_root_v1

if TYPE_CHECKING:
    from .context import LogContext, ProgressCallback

__all__ = ["merge_legacy", "read_legacy_root", "split_legacy"]

log = logging.getLogger(__name__)


def split_legacy(
    nslog: LogContext, ns: str, keys: NamespaceKeys, heads: Sequence[str | HeadRef],
    allow_legacy: bool,
) -> tuple[list[str | HeadRef], LegacyRoot | None]:
    """Take out a bare blob id that names a format-1 manifest (read to find out)."""
    rest: list[str | HeadRef] = []
    found: LegacyRoot | None = None
    for head in heads:
        if not isinstance(head, HeadRef):
            parsed = parse_head(head)
            if isinstance(parsed, str) and nslog.seen.get(ns, parsed) is None:
                legacy = _peek_legacy(nslog.host.walrus, keys, parsed, strict=allow_legacy)
                if legacy is not None:
                    if not allow_legacy:
                        raise LegacyManifest(
                            f"{parsed} is a format-1 manifest of {ns!r} (from before head "
                            "references): it has no digest binding or seq, so a rollback "
                            "to an older manifest cannot be detected for it; pass "
                            "allow_legacy=True (`walrus-mem restore --legacy BLOB_ID`) to "
                            "restore it anyway")
                    if len(heads) > 1:
                        raise InvalidInput(
                            "a format-1 manifest is merged on its own: give its blob id "
                            "alone, then pull the head references")
                    found = legacy
                    continue
        rest.append(head)
    return rest, found


def _peek_legacy(client: WalrusClient, keys: NamespaceKeys, blob_id: str, *,
                 strict: bool) -> LegacyRoot | None:
    """The format-1 root ``blob_id`` names, or None if it is something else.

    ``strict``: errors reading or opening it (wrong key, missing blob) are raised,
    else they mean "not a format-1 manifest we can read" (None).
    """
    try:
        return read_legacy_root(client, keys, blob_id, any_format=True)
    except (WalrusMemError, ValueError):
        if strict:
            raise
        return None


def read_legacy_root(client: WalrusClient, keys: NamespaceKeys, blob_id: str, *,
                     any_format: bool = False) -> LegacyRoot | None:
    """Read and check a format-1 root (envelope: this namespace's key, kind
    ``manifest``). ``any_format``: a manifest of another format gives None."""
    def check(data: bytes) -> None:
        open_envelope(keys, data, expected_kind="manifest")

    data = read_checked(client, check, blob_id=blob_id,
                        fail_fast=(WrongNamespace,))
    record = open_envelope(keys, data, expected_kind="manifest")
    if not is_format_1(record):
        if any_format:
            return None
        raise InvalidHead(f"{blob_id} is not a format-1 manifest")
    return parse_root_v1(record, blob_id)


def merge_legacy(nslog: LogContext, ns: str, keys: NamespaceKeys, root: LegacyRoot, *,
                 progress: ProgressCallback | None, resumed: bool) -> PullReport:
    """Merge a format-1 manifest's memories as a root of no history: no head is
    recorded for it (the local state's heads, if any, stay as they were), so the
    next manifest published descends from nothing it names."""
    client = nslog.host.walrus
    entries = list(root.entries or [])
    for blob_id, patch_id, digest, count in root.pages:
        def check(data: bytes, digest: str = digest, count: int = count) -> None:
            parse_page_v1(open_envelope(keys, data, expected_id=f"page-{digest}",
                                        expected_kind="manifest-page"), digest, count)

        raw = read_checked(client, check, blob_id=blob_id, patch_id=patch_id)
        entries.extend(parse_page_v1(open_envelope(
            keys, raw, expected_id=f"page-{digest}", expected_kind="manifest-page"),
            digest, count))
    if len({e.memory_id for e in entries}) != len(entries):
        raise TamperedBlob(f"format-1 manifest {root.blob_id} lists a memory twice")
    log.warning("merging format-1 manifest %s of %r (seq %d, %d memories): no rollback "
                "check is possible for it", root.blob_id, ns, root.seq, len(entries))
    return nslog._merge_read(ns, keys, [], progress=progress, resumed=resumed,
                             legacy=(root.blob_id, entries))
