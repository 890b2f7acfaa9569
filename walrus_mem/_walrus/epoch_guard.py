"""The epoch-plausibility guard: one lying store answer must not move the epoch clock.

A store answer names the epoch it was registered in and its blob's end epoch.
The catalog records both (``Catalog.note_epoch``, ``Catalog.record_location``);
the epoch clock (expiry.py, built by Memory from Settings) knows which epoch is
plausible now (``EpochClock.implausible``). Memory hands the catalog an
:class:`EpochGuard` over its clock (:func:`clock_guard`); with it a refused
sighting is logged and never moves the clock, and the end epoch of an answer
whose epoch was refused is shifted down to count from the clock's own estimate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .expiry import EpochClock

__all__ = ["EpochGuard", "clock_guard", "plausible_end"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpochGuard:
    """What the catalog asks the epoch clock about a store answer's epochs."""

    implausible: Callable[[int, float], str | None]
    """EpochClock.implausible: why a store answer's epoch cannot be true, or None.
    A refused sighting is logged and never moves the clock."""
    current: Callable[[], int | None]
    """EpochClock.current: where an answer whose epoch was refused counts its storage
    epochs from (its own end epoch is shifted as far)."""

    def refuses(self, epoch: int, at: float) -> bool:
        """Whether a sighting of ``epoch`` at ``at`` is implausible (then logged)."""
        reason = self.implausible(epoch, at)
        if reason is not None:
            log.warning("epoch clock: ignored a sighting of epoch %d: %s", epoch, reason)
            return True
        return False


def clock_guard(clock: Callable[[], EpochClock]) -> EpochGuard:
    """The guard of the epoch clock ``clock()`` returns, asked anew at every check."""
    return EpochGuard(lambda epoch, at: clock().implausible(epoch, at),
                      lambda: clock().current())


def plausible_end(guard: EpochGuard | None, blob: Any) -> int | None:
    """A store answer's end epoch, shifted down when its registered epoch is one the
    clock refuses (``guard``): the storage epochs it names then count from the
    clock's own estimate, so renewal comes in time instead of never."""
    end, registered = blob.end_epoch, blob.registered_epoch
    if end is None or registered is None or guard is None \
            or guard.implausible(int(registered), time.time()) is None:
        return end if end is None else int(end)
    now_epoch = guard.current()
    if now_epoch is None:
        return int(end)
    return min(int(end), now_epoch + max(0, int(end) - int(registered)))
