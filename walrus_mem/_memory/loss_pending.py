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
404 then, beside its own; the same head still answering 404 then is a loss even with
the blobs beside it served (a machine that followed first stored them again). A check
that finds that head served (or, for a loss seen without a head, one of those blobs)
drops the sighting; another head served, e.g. the new network's after a pull, does not.
A change at the same epochs therefore takes two syncs to heal; one whose epochs went
back, or whose system object is known to differ, still heals in one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Final

from ..errors import NetworkResetPending

if TYPE_CHECKING:
    import sqlite3

    from .parts import Parts

__all__ = ["PENDING_KEY", "clear_all", "clear_if_served", "confirmed", "describe", "due",
           "head", "head_gone_long", "hold_manifest", "pending_since", "witnesses"]

log = logging.getLogger(__name__)

PENDING_KEY: Final = "loss_pending"


def _key(ns: str) -> str:
    return f"{PENDING_KEY}:{ns}"


def _pending(parts: Parts, ns: str) -> dict[str, Any] | None:
    raw = parts.catalog.get_meta(_key(ns))
    if not raw:
        return None
    try:
        record = json.loads(raw)
        float(record["at"])
    except (ValueError, TypeError, KeyError):
        return None
    return record if isinstance(record, dict) else None


def pending_since(parts: Parts, ns: str) -> float | None:
    """When a loss of ``ns`` seen only as 404s was first seen, or None."""
    pending = _pending(parts, ns)
    return None if pending is None else float(pending["at"])


def head(parts: Parts, ns: str) -> str | None:
    """The head (blob id) that answered 404 when a pending loss of ``ns`` was seen."""
    pending = _pending(parts, ns)
    found = None if pending is None else pending.get("head")
    return found if isinstance(found, str) else None


def witnesses(parts: Parts, ns: str) -> list[str]:
    """The blobs that answered 404 when a pending loss of ``ns`` was first seen: a later
    check reads them again (a repaired catalog, or a merge, may name no others)."""
    return _witnesses(_pending(parts, ns))


def _witnesses(pending: dict[str, Any] | None) -> list[str]:
    found = [] if pending is None else pending.get("witnesses")
    return [str(b) for b in found] if isinstance(found, list) else []


def _after(parts: Parts) -> float:
    return float(parts.settings.network_loss_confirm_after)


def _until(first: float, after: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(first + after))


def confirmed(parts: Parts, ns: str, head: str | None, gone: list[str], *,
              vouched: bool = False) -> bool:
    """A check of ``ns`` just saw a loss: ``head`` (the head read, if one was) and the
    blobs ``gone`` answered 404 in every round. True when a sighting at least
    ``network_loss_confirm_after`` old confirms it (the caller follows it; 0: at once),
    or ``vouched``: another machine's manifest already names that head gone (it followed
    the change: a second witness). Else the sighting is recorded (or kept) and False. A
    sighting dated in the future (the wall clock went back) starts again from now."""
    now, after = time.time(), _after(parts)
    first = pending_since(parts, ns)
    if vouched or after <= 0 or (first is not None and first <= now - after):
        return True
    if first is None or first > now:
        parts.catalog.set_meta(_key(ns), json.dumps(
            {"at": now, "head": head, "witnesses": [*([head] if head else []), *gone][:8]}))
        first = now
    log.warning("blobs of %r that must still be live answer 404 on every aggregator (%s): "
                "%s", ns, ", ".join([*([head] if head else []), *gone][:3]),
                _what(first, after))
    return False


def due(parts: Parts, ns: str) -> bool:
    """Whether a pending loss of ``ns`` was first seen long enough ago that a check now
    confirms it (or finds it served): a manifest's own check (before a rotation's or a
    forget's) reads it again then, instead of waiting for a sync."""
    first = pending_since(parts, ns)
    return first is not None and first <= time.time() - _after(parts)


def head_gone_long(parts: Parts, ns: str, head: str) -> bool:
    """``head`` answered 404 in every round now, as when a loss was first seen at least
    ``network_loss_confirm_after`` ago (the blobs beside it may be served by then: a
    machine that followed the change first stored the same bytes again). A head is not
    deleted before its end epoch on a shared network: gone that long, it is a loss."""
    pending = _pending(parts, ns)
    after = _after(parts)
    return (pending is not None and after > 0 and pending.get("head") == head
            and float(pending["at"]) <= time.time() - after)


def _what(first: float, after: float) -> str:
    return ("a lost network, or an aggregator that lies or is stuck; no manifest until a "
            f"check from {_until(first, after)} on (a sync, or a rotation's or a forget's "
            "manifest) sees it again (then the memories are stored again) or finds them "
            "served")


def describe(parts: Parts, ns: str) -> str | None:
    """What a sync reports while a loss of ``ns`` is pending (None: none is)."""
    first = pending_since(parts, ns)
    if first is None:
        return None
    return (f"blobs of {ns!r} answered 404 on every aggregator at "
            f"{time.strftime('%H:%M:%S', time.localtime(first))}: {_what(first, _after(parts))}")


def clear_if_served(parts: Parts, ns: str, served: Collection[str]) -> None:
    """A check of ``ns`` found the blobs ``served`` served: the pending loss is dropped
    when they hold its head (or, for a loss seen with no head, one of the blobs that
    answered 404). Another head served (a new network's, after a pull) says nothing."""
    pending = _pending(parts, ns)
    if pending is None:
        return
    head = pending.get("head")
    if head in served or (head is None and any(b in served for b in _witnesses(pending))):
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
