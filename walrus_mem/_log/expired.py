"""Expired blobs: the epoch clock proposes, a 404 decides.

The epoch clock (expiry.py) may be wrong (a lying publisher, another network),
so neither a manifest nor a pull takes its word alone: a publish still lists a
memory whose blob an aggregator serves (:func:`still_served`), and a pull names a
missing blob expired only once the epoch is known (:func:`name_expired`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._walrus.expiry import ExpiredEntry
from ..errors import AggregatorUnavailable, BlobNotFound, WalrusMemError
from .apply import Tally

if TYPE_CHECKING:
    from .host import LogHost

__all__ = ["name_expired", "still_served"]

log = logging.getLogger(__name__)


def still_served(host: LogHost, gone_blobs: set[str], ns: str, rows: Sequence[Any],
                 expired: Sequence[ExpiredEntry]) -> list[Any]:
    """Rows the clock calls expired that an aggregator still serves (or that could
    not be checked): a manifest drops a memory only once a read answered 404.

    The clock may be wrong (a lying publisher, another network): on its word
    alone a manifest listed 1 of 21 memories. One 1-byte read per blob."""
    by_id = {str(r["id"]): r for r in rows}
    client = host.walrus
    kept: list[Any] = []
    verdict: dict[str, bool] = {}  # blob id -> gone
    unreachable = False  # no aggregator answered: asking about the next blob costs as much
    for gone in expired:
        blob = gone.blob_id
        if blob not in verdict:
            if blob in gone_blobs:
                verdict[blob] = True
            elif unreachable:
                verdict[blob] = False  # unconfirmed, as below: listing it loses nothing
            else:
                try:
                    client.read_byte_range(blob, 0, 1)
                    verdict[blob] = False
                    log.warning("blob %s of %r is past its end epoch %s by the epoch "
                                "clock, yet an aggregator serves it: kept in the manifest "
                                "(is the clock wrong? %s)", blob, ns, gone.end_epoch,
                                host.epoch_clock.reading().describe())
                except BlobNotFound:
                    verdict[blob] = True
                    gone_blobs.add(blob)
                except (WalrusMemError, ValueError) as exc:
                    verdict[blob] = False  # unconfirmed: listing it loses nothing
                    unreachable = isinstance(exc, AggregatorUnavailable)
                    log.info("expiry of blob %s not confirmed (%s); kept listed", blob,
                             type(exc).__name__)
        if not verdict[blob]:
            kept.append(by_id[gone.memory_id])
    return kept


def name_expired(host: LogHost, tally: Tally, ends: dict[str, int | None]) -> None:
    """Blobs that answered 404 while the clock could not tell the epoch: read it (the
    mock's clock, or one probe store) and name those past their end as expired."""
    try:
        current, known = host.epoch_estimate(probe=True)
    except WalrusMemError as exc:  # e.g. no publisher: an aggregator-only restore
        log.info("epoch probe after missing blobs failed: %s", type(exc).__name__)
        return
    if current is None or not known:
        return
    still: list[tuple[str, str]] = []
    for mid, blob in tally.missing:
        end = ends.get(mid)
        (tally.expired if end is not None and end <= current else still).append((mid, blob))
    tally.missing = still
