"""Manifest pages: stored with a manifest, read back, and checked before reuse.

A manifest of more than ``manifest.INLINE_MAX`` entries lists them in sealed
pages; an unchanged page is reused from an earlier manifest, but only once a
read shows its location still holds it (once per process: :class:`ManifestPages`).
New pages are stored one quilt per batch and each one read back before the root
names it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._catalog.log_tables import LogTables
from .._walrus.blobio import (
    PART_OVERHEAD,
    check_patches,
    quilt_budget,
    read_checked,
    store_batches,
)
from ..envelope import open_envelope
from ..errors import AggregatorUnavailable, WalrusMemError
from ..keys import NamespaceKeys
from ..walrus import WalrusClient
from . import manifest as mf

if TYPE_CHECKING:
    from .host import LogHost

__all__ = ["ManifestPages", "read_page"]

log = logging.getLogger(__name__)


def read_page(client: WalrusClient, keys: NamespaceKeys, blob_id: str,
              patch_id: str | None, digest: str, *,
              opener: Callable[[bytes], NamespaceKeys] | None = None) -> list[mf.Entry]:
    """A manifest page's entries, read (with failover) until its bytes check out.
    ``opener``: the keys to open given bytes with (a retired generation's page)."""
    checked: list[tuple[bytes, list[mf.Entry]]] = []

    def check(data: bytes) -> None:
        entries = mf.parse_page(open_envelope(opener(data) if opener else keys, data,
                                              expected_id=f"page-{digest}",
                                              expected_kind="manifest-page"), digest)
        checked.append((data, entries))

    raw = read_checked(client, check, blob_id=blob_id, patch_id=patch_id)
    for data, entries in reversed(checked):  # opened and parsed once, by the check
        if data is raw or data == raw:
            return entries
    return mf.parse_page(open_envelope(opener(raw) if opener else keys, raw,
                                       expected_id=f"page-{digest}",
                                       expected_kind="manifest-page"), digest)


class ManifestPages:
    """The pages of one data dir's manifests, as its NamespaceLog stores and reuses them."""

    def __init__(self, host: LogHost, tables: LogTables, lock: threading.RLock) -> None:
        self.host = host
        self.tables = tables
        self.lock = lock
        self._verified: set[tuple[str, str, str | None]] = set()

    def store(
        self, keys: NamespaceKeys, to_store: list[tuple[str, bytes]],
        placed: dict[str, tuple[str, str | None, int | None]], deadline: float,
    ) -> list[tuple[str, str, str | None, int | None]]:
        """Store new pages (one quilt per batch), read each back; their locations."""
        client = self.host.walrus
        new_pages: list[tuple[str, str, str | None, int | None]] = []
        # under the publishers' request cap (10 MiB on public ones, or one a 413 taught
        # the client), as fact batches are: a 96 MiB quilt of pages was a 413 there
        cap = self.host.settings.publisher_max_request_bytes
        if client.request_cap is not None:
            cap = min(cap, client.request_cap)
        for span in store_batches([len(data) + PART_OVERHEAD for _, data in to_store],
                                  quilt_budget(cap)):
            part = [to_store[i] for i in span]
            if len(part) == 1:
                stored = client.store_blob(part[0][1], deadline=deadline)
                found: dict[str, str | None] = {part[0][0]: None}
            else:
                quilt = client.store_quilt(dict(part), deadline=deadline)
                check_patches(quilt.patches, [d for d, _ in part])
                stored = quilt.blob
                found = {d: quilt.patches.get(d) for d, _ in part}
            for digest, patch in found.items():
                read_page(client, keys, stored.blob_id, patch, digest)
                self._verified.add((digest, stored.blob_id, patch))
                placed[digest] = (stored.blob_id, patch, stored.end_epoch)
                new_pages.append((digest, stored.blob_id, patch, stored.end_epoch))
        return new_pages

    def intact(self, ns: str, keys: NamespaceKeys, digest: str, blob_id: str,
               patch_id: str | None) -> bool:
        """A cached page location holds that page (checked once per process)."""
        if (digest, blob_id, patch_id) in self._verified:
            return True
        client = self.host.walrus
        try:  # one plain read: a page that fails is republished, no failover needed
            raw = (client.read_quilt_patch(patch_id) if patch_id is not None
                   else client.read_blob(blob_id))
            mf.parse_page(open_envelope(keys, raw, expected_id=f"page-{digest}",
                                        expected_kind="manifest-page"), digest)
        except AggregatorUnavailable:
            # No aggregator answered: not the page's fault. Raised, so the publish stops
            # here instead of paying to store it again and waiting out its read-back too.
            raise
        except (WalrusMemError, ValueError) as exc:
            log.warning("cached manifest page %s of %r failed its check (%s); republishing it",
                        digest[:12], ns, type(exc).__name__)
            with self.lock:
                self.tables.drop_page(ns, digest)
            return False
        self._verified.add((digest, blob_id, patch_id))
        return True
