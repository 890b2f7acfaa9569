"""A loss seen only as 404s is followed only when a later check, minutes on, sees it again.

With no epoch gone back and no system object changed, the one sign of a lost network is
what it no longer serves: the head and the blobs beside it answering 404 in each of three
rounds over 5 s (network_reset.py ``_lost_here``). One aggregator that answers 404 for
them (a stuck cache, a blocklist, a lie) reads exactly the same, and following it stores
every memory again: paid twice for nothing (stateful finding N16). So the first sighting
is only recorded, per namespace (catalog meta ``loss_pending:<ns>``: when, and the blobs
that answered 404), and the manifest waits (:func:`hold_manifest`: it would list
locations a lost network no longer has, N15). A check at least
``network_loss_confirm_after`` later (600 s: longer than an aggregator's cached 404s
after a store, short enough that a machine syncing every few minutes heals a real change
within two syncs) that sees the loss again follows it; it reads the blobs that answered
404 then, beside its own. A check that finds the head, or those blobs, served drops the
sighting. A change at the same epochs therefore takes two syncs to heal; one whose
epochs went back, or whose system object is known to differ, still heals in one.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Final

from ..errors import NetworkResetPending

if TYPE_CHECKING:
    import sqlite3

    from .parts import Parts

__all__ = ["PENDING_KEY", "clear", "clear_all", "confirmed", "describe", "hold_manifest",
           "pending_since", "witnesses"]

log = logging.getLogger(__name__)

PENDING_KEY: Final = "loss_pending"


def _key(ns: str) -> str:
    return f"{PENDING_KEY}:{ns}"


def _pending(parts: Parts, ns: str) -> tuple[float, list[str]] | None:
    raw = parts.catalog.get_meta(_key(ns))
    if not raw:
        return None
    try:
        record = json.loads(raw)
        return float(record["at"]), [str(b) for b in record.get("witnesses", [])]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def pending_since(parts: Parts, ns: str) -> float | None:
    """When a loss of ``ns`` seen only as 404s was first seen, or None."""
    pending = _pending(parts, ns)
    return None if pending is None else pending[0]


def witnesses(parts: Parts, ns: str) -> list[str]:
    """The blobs that answered 404 when a pending loss of ``ns`` was first seen: a later
    check reads them again (a repaired catalog, or a merge, may name no others)."""
    pending = _pending(parts, ns)
    return [] if pending is None else pending[1]


def _after(parts: Parts) -> float:
    return float(parts.settings.network_loss_confirm_after)


def _until(first: float, after: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(first + after))


def confirmed(parts: Parts, ns: str, witnesses: list[str]) -> bool:
    """A check of ``ns`` just saw a loss (``witnesses``: the blobs that answered 404):
    True when a sighting at least ``network_loss_confirm_after`` old confirms it (the
    caller follows it; 0: at once), else the sighting is recorded (or kept) and False.
    A sighting dated in the future (the wall clock went back) starts again from now."""
    now, after = time.time(), _after(parts)
    first = pending_since(parts, ns)
    if after <= 0 or (first is not None and first <= now - after):
        return True
    if first is None or first > now:
        parts.catalog.set_meta(_key(ns), json.dumps({"at": now, "witnesses": witnesses[:8]}))
        first = now
    log.warning("blobs of %r that must still be live answer 404 on every aggregator (%s): "
                "%s", ns, ", ".join(witnesses[:3]), _what(first, after))
    return False


def _what(first: float, after: float) -> str:
    return ("a lost network, or an aggregator that lies or is stuck; no manifest until a "
            f"sync from {_until(first, after)} on sees it again (then the memories are "
            "stored again) or finds them served")


def describe(parts: Parts, ns: str) -> str | None:
    """What a sync reports while a loss of ``ns`` is pending (None: none is)."""
    first = pending_since(parts, ns)
    if first is None:
        return None
    return (f"blobs of {ns!r} answered 404 on every aggregator at "
            f"{time.strftime('%H:%M:%S', time.localtime(first))}: {_what(first, _after(parts))}")


def clear(parts: Parts, ns: str) -> None:
    """A check of ``ns`` found what it relies on served: no loss is pending."""
    if parts.catalog.get_meta(_key(ns)):
        log.info("blobs of %r answering 404 before are served again: not a lost network", ns)
        parts.catalog.set_meta(_key(ns), "")


def clear_all(c: sqlite3.Connection) -> None:
    """A change of network followed (in its transaction): nothing is pending any more."""
    c.execute("DELETE FROM meta WHERE key LIKE ?", (f"{PENDING_KEY}:%",))


def hold_manifest(parts: Parts, ns: str) -> None:
    """Before a manifest of ``ns``: raise NetworkResetPending while a loss is pending."""
    said = describe(parts, ns)
    if said is not None:
        raise NetworkResetPending(said)
