"""The epoch-plausibility guard: one lying store answer must not move the epoch clock.

A store answer names the epoch it was registered in and its blob's end epoch.
The catalog records both (``Catalog.note_epoch``, ``Catalog.record_location``);
the epoch clock (expiry.py, built by Memory from Settings) knows which epoch is
plausible now (``EpochClock.implausible``). Memory hands the catalog an
:class:`EpochGuard` over its clock (:func:`clock_guard`); with it a refused
sighting is logged and never moves the clock, and the end epoch of an answer
whose epoch was refused is shifted down to count from the clock's own estimate.
Such an answer's own epochs are kept by blob id (meta ``epoch_clock_refused``): when
the network behind the endpoints turns out to be another one, whose epochs are ahead
(network_reset.py), the blobs it stored keep the end epoch it really gave them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .expiry import ClockStore, EpochClock

__all__ = ["AHEAD_KEY", "REFUSED_KEY", "EpochGuard", "ahead_sightings", "clock_guard",
           "plausible_end", "refused_ends"]

log = logging.getLogger(__name__)

REFUSED_KEY = "epoch_clock_refused"
"""Catalog meta: blob id -> [registered, end] of store answers whose epoch was refused."""
_KEEP_REFUSED = 2_000  # the newest kept; older ones fall back to the shifted end
AHEAD_KEY = "epoch_clock_ahead"
"""Catalog meta: the refused sightings themselves (epochs ahead of what the clock allows),
epoch -> [first, last] wall time, until sync settles them (network_reset.py)."""


@dataclass(frozen=True)
class EpochGuard:
    """What the catalog asks the epoch clock about a store answer's epochs."""

    implausible: Callable[[int, float], str | None]
    """EpochClock.implausible: why a store answer's epoch cannot be true, or None.
    A refused sighting is logged and never moves the clock."""
    current: Callable[[], int | None]
    """EpochClock.current: where an answer whose epoch was refused counts its storage
    epochs from (its own end epoch is shifted as far)."""
    refused: Callable[[str, int, int], None] | None = None
    """Keeps a refused answer's own (registered, end) epochs by blob id."""
    ahead: Callable[[int, float], None] | None = None
    """Keeps a refused sighting (an epoch ahead of what the clock allows) for sync."""

    def refuses(self, epoch: int, at: float) -> bool:
        """Whether a sighting of ``epoch`` at ``at`` is implausible (then logged)."""
        reason = self.implausible(epoch, at)
        if reason is not None:
            log.warning("epoch clock: ignored a sighting of epoch %d: %s", epoch, reason)
            if self.ahead is not None:
                self.ahead(epoch, at)
            return True
        return False


def clock_guard(clock: Callable[[], EpochClock]) -> EpochGuard:
    """The guard of the epoch clock ``clock()`` returns, asked anew at every check."""
    return EpochGuard(lambda epoch, at: clock().implausible(epoch, at),
                      lambda: clock().current(),
                      lambda blob, registered, end: _keep_refused(clock().store, blob,
                                                                  registered, end),
                      lambda epoch, at: _keep_ahead(clock().store, epoch, at))


def ahead_sightings(store: ClockStore) -> dict[int, list[float]]:
    """epoch -> [first, last] wall time of the sightings the clock refused (ahead)."""
    try:
        raw = json.loads(store.get_meta(AHEAD_KEY) or "{}")
        return {int(e): [float(v[0]), float(v[1])] for e, v in raw.items()}
    except (ValueError, TypeError, AttributeError, IndexError):
        return {}


def _keep_ahead(store: ClockStore, epoch: int, at: float) -> None:
    seen = ahead_sightings(store)
    first, last = seen.get(epoch, [at, at])
    seen[epoch] = [min(first, at), max(last, at)]
    newest = sorted(seen.items())[-16:]
    store.set_meta(AHEAD_KEY, json.dumps({str(e): v for e, v in newest}))


def refused_ends(store: ClockStore) -> dict[str, tuple[int, int]]:
    """blob id -> (registered, end) epochs its store answer named, refused by the clock."""
    try:
        raw = json.loads(store.get_meta(REFUSED_KEY) or "{}")
        return {str(b): (int(v[0]), int(v[1])) for b, v in raw.items()}
    except (ValueError, TypeError, AttributeError, IndexError):
        return {}


def _keep_refused(store: ClockStore, blob: str, registered: int, end: int) -> None:
    kept = refused_ends(store)
    kept.pop(blob, None)
    kept[blob] = (registered, end)
    newest = list(kept.items())[-_KEEP_REFUSED:]
    store.set_meta(REFUSED_KEY, json.dumps({b: list(v) for b, v in newest}))


def plausible_end(guard: EpochGuard | None, blob: Any) -> int | None:
    """A store answer's end epoch, shifted down when its registered epoch is one the
    clock refuses (``guard``): the storage epochs it names then count from the
    clock's own estimate, so renewal comes in time instead of never."""
    end, registered = blob.end_epoch, blob.registered_epoch
    if end is None or registered is None or guard is None \
            or guard.implausible(int(registered), time.time()) is None:
        return end if end is None else int(end)
    if guard.refused is not None and getattr(blob, "blob_id", None):
        guard.refused(str(blob.blob_id), int(registered), int(end))
    now_epoch = guard.current()
    if now_epoch is None:
        return int(end)
    return min(int(end), now_epoch + max(0, int(end) - int(registered)))
