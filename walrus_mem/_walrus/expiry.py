"""The Walrus epoch clock, learned from store responses, and what it says about expiry.

Real Walrus has no HTTP route that tells the current epoch (the mock's
``/_mock/epoch`` is mock only), yet a blob is readable only while the current
epoch is below its ``end_epoch``. Every *newly created* store answer names the
epoch it was registered in, which is the current epoch at that moment. The
clock keeps, per epoch seen, the first and last wall time it was seen
(catalog ``meta`` key ``epoch_clock``, shared by every process on the data
dir) and extrapolates from the newest one in two directions:

* ``current`` (may lag, never ahead): ``newest + floor((now - first(newest)) / L_up)``,
  with ``L_up`` an epoch length that is not shorter than the real one;
* ``latest`` (may run ahead, never behind):
  ``newest + 1 + floor((now - last(newest)) / L_lo)``, with ``L_lo`` not longer
  than the real one; None when no such length is known.

The epoch length is ``Settings.epoch_seconds`` when configured, else the
length of the Walrus network the endpoints name (a host containing
``mainnet``: 14 days, ``testnet``: 1 day; Walrus docs, "Available networks"
https://mystenlabs.github.io/walrus/usage/networks.html, network parameters table), and then
``L_up = L_lo`` = that length. Otherwise both are learned from the sightings:

* ``L_up``: between the last sighting of epoch ``i`` and the first of epoch
  ``j >= i + 2`` at least ``j - i - 1`` whole epochs passed, so
  ``L <= (first(j) - last(i)) / (j - i - 1)``; the smallest such bound, never
  less than the longest time one epoch was seen. Two adjacent epochs alone
  bound nothing.
* ``L_lo``: epoch ``i`` began at or before ``first(i)`` and epoch ``j >= i``
  ended after ``last(j)``, so ``j - i + 1`` epochs last longer than
  ``last(j) - first(i)``; the largest such bound. One sighting bounds nothing.

Sightings are wall times, so a wall clock that jumps corrupts them. Epochs only
go forward, so a sighting contradicts a later one when it names a lower (or the
same) epoch at a later time: a wall clock that ran ahead while it was noted. A new
sighting drops those (and any noted more than :data:`FUTURE_SLACK` after the
present), and the clock reads only sightings that form one forward chain below
the newest (:func:`consistent`): before, a clock 10 days ahead during the first
stores made the learned bound negative and the epoch length 0.09 s on a 2 s
network. A store answer naming an epoch more than :data:`JUMP_SLACK` *below* the
newest one seen is no sighting of this clock's network: the network was wiped or
its epochs reset (or a publisher lies). It is held apart (meta
``epoch_clock_backwards``) until ``sync`` confirms the network lost our blobs and
lets the clock follow (network_reset.py).

The clock is **known** when ``current`` and ``latest`` are at most one epoch
apart (always, with a known length, once a store answer was seen). Otherwise
``expiring`` raises :class:`~walrus_mem.errors.EpochUnknown` instead of
answering from a stale epoch, ``doctor`` says so, and ``sync`` stores a small
probe blob to read the epoch before it decides what to renew (see
:mod:`walrus_mem._memory.renewal`).

**Usage**::

    clock = EpochClock(catalog, epoch_seconds=86400)
    clock.observe(stored.registered_epoch)       # Catalog.note_epoch does this
    clock.current()                              # estimated current epoch or None
    clock.reading().known                        # current bounded to within one epoch?
    clock.expired(row["end_epoch"])              # past its end epoch?
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

__all__ = [
    "META_KEY",
    "NETWORK_EPOCH_SECONDS",
    "ClockReading",
    "ClockStore",
    "EpochClock",
    "ExpiredEntry",
    "network_of",
    "record_seen",
]

log = logging.getLogger(__name__)

META_KEY: Final = "epoch_clock"
CLAIM_KEY: Final = "epoch_clock_claim"  # another writer's sighting, until one of our own
MIN_EPOCH_SECONDS: Final = 1.0
"""The shortest epoch believed on a network of unknown length (Walrus's last a day or
more; the mock's tests run 1 s ones): how far one sighting may move the clock."""
JUMP_SLACK: Final = 2  # epochs of skew between publishers and wall clocks tolerated
FUTURE_SLACK: Final = 300.0
"""Seconds a sighting may lie after the present (clock skew between processes and
machines); beyond, it was noted by a wall clock running ahead."""
BACKWARDS_KEY: Final = "epoch_clock_backwards"
"""Store answers naming epochs below the clock's (a wiped or reset network), held apart."""
_KEEP_EPOCHS: Final = 64  # sightings kept (oldest dropped): enough to learn the length

# Walrus docs, "Available networks" (network parameters): epoch duration 2 weeks on
# Mainnet, 1 day on Testnet.
NETWORK_EPOCH_SECONDS: Final = {"mainnet": 14 * 86_400.0, "testnet": 86_400.0}

Source = Literal["configured", "network", "learned", "unknown"]
R = TypeVar("R", bound=Any)  # a catalog row or mapping


class ExpiredEntry(BaseModel):
    """A blob (or quilt patch) past its end epoch: named in reports instead of read."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    blob_id: str
    patch_id: str | None = None
    end_epoch: int | None = None
    reason: str = "past its end epoch"


@dataclass(frozen=True)
class ClockReading:
    """What the clock knows: for ``doctor`` and reports."""

    current: int | None  # estimated current epoch, lagging (None: never seen one)
    newest_seen: int | None  # highest epoch a store answer named
    seen_at: float | None  # wall time that epoch was first seen
    epoch_seconds: float | None
    source: Source  # where epoch_seconds comes from
    latest: int | None = None  # the highest the current epoch can be (None: unbounded)
    last_seen: float | None = None  # wall time the newest epoch was last seen

    @property
    def known(self) -> bool:
        """The current epoch is ``current`` or ``current + 1``: good enough to say what expired."""
        return self.current is not None and self.latest is not None \
            and self.latest - self.current <= 1

    def starts_at(self, epoch: int) -> float | None:
        """Estimated wall time at which ``epoch`` begins (None when unknown)."""
        if self.newest_seen is None or self.seen_at is None or self.epoch_seconds is None:
            return None
        return self.seen_at + (epoch - self.newest_seen) * self.epoch_seconds

    def describe(self, now: float | None = None) -> str:
        """One line for errors and doctor: the estimate and what it rests on."""
        if self.current is None:
            return "no store answer seen yet: the current epoch is unknown"
        length = ("unknown" if self.epoch_seconds is None
                  else f"{self.epoch_seconds:g} s ({self.source})")
        span = (f"~{self.current}" if self.latest is not None and self.latest <= self.current
                else f"between {self.current} and {self.latest}" if self.latest is not None
                else f"{self.current} or later (no upper bound)")
        seen = ""
        if self.last_seen is not None:
            ago = max(0.0, (time.time() if now is None else now) - self.last_seen)
            seen = f"; epoch {self.newest_seen} last seen {_ago(ago)} ago"
        return f"current epoch {span}{seen}; epoch length {length}"


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86_400:.0f} days"


def network_of(urls: Iterable[str | None]) -> str | None:
    """``mainnet`` / ``testnet`` when the endpoints' hosts name exactly one of them.

    Public endpoints do (``publisher.walrus-testnet.walrus.space``,
    ``walrus-testnet-publisher.nodes.guru``, ``aggregator.walrus-mainnet.walrus.space``);
    a host naming neither, or endpoints naming both, give None.
    """
    found: set[str] = set()
    for url in urls:
        if not url:
            continue
        host = (urlsplit(url).hostname or "").lower()
        found.update(name for name in NETWORK_EPOCH_SECONDS if name in host)
    return found.pop() if len(found) == 1 else None


def _load(raw: str | None) -> dict[int, list[float]]:
    """epoch -> [first_seen, last_seen]; anything unreadable counts as nothing seen."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        return {int(e): [float(first), float(last)] for e, first, last in data.get("seen", [])}
    except (ValueError, TypeError, AttributeError):
        return {}


def _dump(seen: dict[int, list[float]]) -> str:
    kept = sorted(seen.items())[-_KEEP_EPOCHS:]
    return json.dumps({"seen": [[e, f, last] for e, (f, last) in kept]})


def _without_future(seen: dict[int, list[float]], cutoff: float) -> dict[int, list[float]]:
    """The sightings less what a wall clock running ahead noted: first seen after
    ``cutoff``, dropped; last seen after it, cut back to the first sighting."""
    return {e: [first, last if last <= cutoff else first]
            for e, (first, last) in seen.items() if first <= cutoff}


def consistent(seen: dict[int, list[float]], now: float) -> dict[int, list[float]]:
    """The sightings the clock reads: none from the future (beyond :data:`FUTURE_SLACK`),
    and below the newest only those seen before every higher epoch kept was first
    seen (epochs only go forward; the others were noted by a wall clock running
    ahead, or out of order by moments)."""
    seen = _without_future(seen, now + FUTURE_SLACK)
    kept: dict[int, list[float]] = {}
    earliest = math.inf
    for epoch in sorted(seen, reverse=True):
        first, last = seen[epoch]
        if last <= earliest:
            kept[epoch] = [first, last]
            earliest = first
    return kept


def _held(conn: sqlite3.Connection) -> dict[str, Any]:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (BACKWARDS_KEY,)).fetchone()
    try:
        held = json.loads(str(row[0])) if row is not None else {}
        return held if isinstance(held, dict) else {}
    except ValueError:
        return {}


def record_seen(conn: sqlite3.Connection, epoch: int, at: float) -> None:
    """Record that a store answer named ``epoch`` as current at ``at`` (inside a write).

    Sightings a wall clock running ahead noted are dropped; an epoch more than
    :data:`JUMP_SLACK` below one first seen before ``at`` is held apart (see the module
    doc). One below only epochs seen later is history (an old manifest's clock), not
    a network gone backwards."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    seen = _without_future(_load(None if row is None else str(row[0])),
                           max(at, time.time()) + FUTURE_SLACK)
    earlier = [e for e, (first, _) in seen.items() if first <= at]
    if earlier and epoch < max(earlier) - JUMP_SLACK:
        held = _held(conn)
        marks = _load(json.dumps({"seen": held.get("seen", [])}))
        first_last = marks.get(epoch)
        marks[epoch] = [at, at] if first_last is None else [min(first_last[0], at),
                                                            max(first_last[1], at)]
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (BACKWARDS_KEY, json.dumps({"newest": max(earlier),
                                        "seen": json.loads(_dump(marks))["seen"]})))
        log.warning("a store answer named epoch %d, below epoch %d this data dir has seen: "
                    "the network was wiped or its epochs reset (or the publisher lies); "
                    "held apart until sync confirms it (docs/reliability.md#expiry)",
                    epoch, max(earlier))
        return
    first_last = seen.get(epoch)
    if first_last is None:
        seen[epoch] = [at, at]
    else:
        seen[epoch] = [min(first_last[0], at), max(first_last[1], at)]
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (META_KEY, _dump(seen)),
    )


def learn_epoch_seconds(seen: dict[int, list[float]]) -> float | None:
    """An upper bound of the epoch length implied by the sightings (see the module doc),
    or None while no two sighted epochs are at least two apart."""
    epochs = sorted(seen)
    bounds = [
        (seen[j][0] - seen[i][1]) / (j - i - 1)
        for a, i in enumerate(epochs) for j in epochs[a + 1:] if j - i >= 2
    ]
    if not bounds:
        return None
    longest = max(last - first for first, last in seen.values())
    positive = [b for b in bounds if b > 0]  # a span out of order bounds nothing
    bound = max(min(positive), longest) if positive else longest
    return bound if bound > 0 else None


def lower_epoch_seconds(seen: dict[int, list[float]]) -> float | None:
    """A lower bound of the epoch length implied by the sightings (see the module doc),
    or None while they span no time."""
    epochs = sorted(seen)
    bound = max(((seen[j][1] - seen[i][0]) / (j - i + 1)
                 for a, i in enumerate(epochs) for j in epochs[a:]), default=0.0)
    return bound if bound > 0 else None


class ClockStore(Protocol):
    """Where the clock keeps its sightings: the members of the catalog it calls.

    A Protocol, so this module needs no import of the catalog (which imports it)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def note_epoch(self, epoch: int | None, *, at: float | None = None,
                   trusted: bool = False) -> None: ...

    def current_epoch(self) -> int | None: ...


class EpochClock:
    """The current Walrus epoch as this data dir can know it (see the module doc)."""

    def __init__(
        self,
        catalog: ClockStore,
        *,
        epoch_seconds: float | None = None,
        network_seconds: float | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._catalog = catalog
        self._configured = epoch_seconds
        self._network = network_seconds  # the length of the network the endpoints name
        self._now = now

    @property
    def store(self) -> ClockStore:
        """Where the sightings are kept (the catalog)."""
        return self._catalog

    def observe(self, epoch: int | None, *, at: float | None = None) -> None:
        """A store answer (or the mock's admin route) named ``epoch`` as current."""
        if epoch is None:
            return
        self._catalog.note_epoch(int(epoch), at=self._now() if at is None else at)

    def export(self) -> dict[str, Any] | None:
        """The newest sighting (and a known epoch length) for a manifest to carry.

        A fresh machine restoring from that manifest seeds its clock with
        :meth:`seed`, so it can tell expired blobs from missing ones before
        it has stored anything itself.
        """
        reading = self.reading()
        if reading.newest_seen is None or reading.seen_at is None:
            return None
        out: dict[str, Any] = {"epoch": reading.newest_seen, "seen_at": reading.seen_at}
        if reading.epoch_seconds is not None:
            out["epoch_seconds"] = reading.epoch_seconds
        return out

    def seed(self, exported: object) -> None:
        """Take a sighting carried by a manifest (see :meth:`export`); junk is ignored.

        The sighting is the writer's claim (signed, but its publisher may have
        lied to it). A clock with sightings of its own takes it only when they
        make it plausible (:meth:`implausible`; else ignored with a warning). A
        clock with none holds it apart (meta ``epoch_clock_claim``) and reads
        from it only until its first own store answer, which replaces it: a
        far-future claim cannot stick.
        """
        if not isinstance(exported, dict):
            return
        epoch, seen_at = exported.get("epoch"), exported.get("seen_at")
        if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 \
                and isinstance(seen_at, int | float) and math.isfinite(seen_at) \
                and seen_at <= self._now() + 300:
            if not self.sightings():
                held = self._claim()
                if held is None or epoch > held[0]:
                    self._catalog.set_meta(CLAIM_KEY, json.dumps([epoch, float(seen_at)]))
                return
            reason = self.implausible(epoch, float(seen_at))
            if reason is not None:
                log.warning("epoch clock: ignored a manifest's sighting of epoch %d: %s",
                            epoch, reason)
                return
            self.observe(epoch, at=float(seen_at))

    def implausible(self, epoch: int, at: float | None = None) -> str | None:
        """Why a sighting of ``epoch`` at ``at`` cannot be true, or None.

        Epochs cannot pass faster than the epoch length allows: since epoch
        ``newest`` was last seen, at most ``1 + (at - last) / L`` more began, ``L``
        the configured or network length, else the learned lower bound (never
        below :data:`MIN_EPOCH_SECONDS`). A publisher (or another writer's
        manifest) naming an epoch beyond that, plus :data:`JUMP_SLACK`, is lying
        or of another network; believing it would make every blob look expired.
        Nothing to compare with (no sighting yet): plausible.
        """
        seen = self.sightings()
        if not seen:
            return None
        newest = max(seen)
        if epoch <= newest + 1 + JUMP_SLACK:
            return None
        when = self._now() if at is None else at
        length = self._configured or self._network or max(
            lower_epoch_seconds(seen) or 0.0, MIN_EPOCH_SECONDS)
        last = seen[newest][1]
        limit = newest + 1 + max(0, math.floor((when - last) / length)) + JUMP_SLACK
        if epoch <= limit:
            return None
        return (f"epoch {newest} was seen {_ago(max(0.0, when - last))} earlier and epochs "
                f"last at least {length:g} s, so the current epoch is at most {limit}: "
                "a publisher (or a manifest's clock) of another network, or lying")

    def sightings(self, now: float | None = None) -> dict[int, list[float]]:
        """epoch -> [first, last] wall time seen, as the clock reads them (:func:`consistent`)."""
        return consistent(_load(self._catalog.get_meta(META_KEY)),
                          self._now() if now is None else now)

    def _claim(self) -> tuple[int, float] | None:
        """A manifest's sighting held while this clock has none of its own."""
        try:
            epoch, seen_at = json.loads(self._catalog.get_meta(CLAIM_KEY) or "null")
            return int(epoch), float(seen_at)
        except (ValueError, TypeError):
            return None

    def reading(self, now: float | None = None) -> ClockReading:
        seen = self.sightings(now)
        claim = None if seen else self._claim()
        if claim is not None:
            seen = {claim[0]: [claim[1], claim[1]]}
        floor = self._catalog.current_epoch()  # the highest epoch ever noted, sightings or not
        lower: float | None
        if self._configured is not None or self._network is not None:
            seconds: float | None = float(self._configured or self._network or 0)
            source: Source = "configured" if self._configured is not None else "network"
            lower = seconds
        else:
            seconds = learn_epoch_seconds(seen)
            source = "learned" if seconds is not None else "unknown"
            lower = lower_epoch_seconds(seen)
        if not seen:
            return ClockReading(floor, floor, None, seconds, source)
        at = self._now() if now is None else now
        newest = max(seen)
        first, last = seen[newest]
        current = newest
        if seconds is not None:
            current += max(0, math.floor((at - first) / seconds))
        latest = None if lower is None else newest + 1 + max(0, math.floor((at - last) / lower))
        if floor is not None:
            current = max(current, floor)
        if latest is not None:
            latest = max(latest, current)
        return ClockReading(current, newest, first, seconds, source, latest, last)

    def current(self, now: float | None = None) -> int | None:
        """The estimated current epoch (None before any store answer was seen)."""
        return self.reading(now).current

    def expired(self, end_epoch: int | None, *, current: int | None = None) -> bool:
        """Past its end epoch (exclusive) by the clock; unknown end or epoch: False."""
        now_epoch = self.current() if current is None else current
        return end_epoch is not None and now_epoch is not None and end_epoch <= now_epoch

    def ends_within(
        self, end_epoch: int | None, margin: int, *, current: int | None = None
    ) -> bool:
        """Ends within ``margin`` epochs from now (expired ones included)."""
        now_epoch = self.current() if current is None else current
        return end_epoch is not None and now_epoch is not None \
            and end_epoch <= now_epoch + margin

    def drop_expired(self, rows: Iterable[R]) -> tuple[list[R], list[ExpiredEntry]]:
        """Manifest rows (mappings with id, blob_id, quilt_patch_id, end_epoch) split into
        the ones a manifest may list and the ones past their end epoch."""
        current = self.current()
        kept: list[R] = []
        gone: list[ExpiredEntry] = []
        for row in rows:
            end = row["end_epoch"]
            if self.expired(end, current=current):
                gone.append(ExpiredEntry(
                    memory_id=str(row["id"]), blob_id=str(row["blob_id"]),
                    patch_id=row["quilt_patch_id"], end_epoch=end,
                    reason=f"end epoch {end} <= current epoch {current}"))
            else:
                kept.append(row)
        return kept, gone

    def split(
        self, entries: Iterable[tuple[str, str, str | None, int | None]]
    ) -> tuple[list[tuple[str, str, str | None, int | None]], list[ExpiredEntry]]:
        """(memory_id, blob_id, patch_id, end_epoch) rows -> (live rows, expired ones)."""
        current = self.current()
        live: list[tuple[str, str, str | None, int | None]] = []
        gone: list[ExpiredEntry] = []
        for mid, blob_id, patch_id, end in entries:
            if self.expired(end, current=current):
                gone.append(ExpiredEntry(memory_id=mid, blob_id=blob_id, patch_id=patch_id,
                                         end_epoch=end,
                                         reason=f"end epoch {end} <= current epoch {current}"))
            else:
                live.append((mid, blob_id, patch_id, end))
        return live, gone
