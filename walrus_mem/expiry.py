"""The Walrus epoch clock, learned from store responses, and what it says about expiry.

Real Walrus has no HTTP route that tells the current epoch (the mock's
``/_mock/epoch`` is mock only), yet a blob is readable only while the current
epoch is below its ``end_epoch``. Every *newly created* store answer names the
epoch it was registered in, which is the current epoch at that moment. The
clock keeps, per epoch seen, the first and last wall time it was seen
(catalog ``meta`` key ``epoch_clock``, shared by every process on the data
dir) and extrapolates from the newest one::

    current ≈ newest_seen + floor((now - first_seen(newest)) / epoch_seconds)

``epoch_seconds`` is ``Settings.epoch_seconds`` when configured (mainnet: 14
days, testnet: 1 day), else learned from the epochs seen so far, else
unknown: the clock then never moves past the newest epoch seen. A learned
length is an **upper bound**, so the clock may lag but never runs ahead (a
clock ahead of the network would leave live blobs out of manifests and skip
them in restores): between the last sighting of epoch ``i`` and the first of
epoch ``j >= i + 2`` at least ``j - i - 1`` whole epochs passed, so
``epoch_seconds <= (first(j) - last(i)) / (j - i - 1)``; the smallest such bound
is used, never less than the longest time one epoch was seen. Two adjacent
epochs alone bound nothing. Since an epoch was first seen at or after its
start, even the configured extrapolation lags the network by up to one epoch;
every fresh store answer re-anchors it.

**Usage**::

    clock = EpochClock(catalog, epoch_seconds=86400)
    clock.observe(stored.registered_epoch)       # Catalog.note_epoch does this
    clock.current()                              # estimated current epoch or None
    clock.expired(row["end_epoch"])              # past its end epoch?
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from .catalog import Catalog

__all__ = [
    "META_KEY",
    "ClockReading",
    "EpochClock",
    "ExpiredEntry",
    "record_seen",
]

META_KEY: Final = "epoch_clock"
_KEEP_EPOCHS: Final = 64  # sightings kept (oldest dropped): enough to learn the length

Source = Literal["configured", "learned", "unknown"]
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

    current: int | None  # estimated current epoch (None: never seen one)
    newest_seen: int | None  # highest epoch a store answer named
    seen_at: float | None  # wall time that epoch was first seen
    epoch_seconds: float | None
    source: Source  # where epoch_seconds comes from

    def starts_at(self, epoch: int) -> float | None:
        """Estimated wall time at which ``epoch`` begins (None when unknown)."""
        if self.newest_seen is None or self.seen_at is None or self.epoch_seconds is None:
            return None
        return self.seen_at + (epoch - self.newest_seen) * self.epoch_seconds


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


def record_seen(conn: sqlite3.Connection, epoch: int, at: float) -> None:
    """Record that a store answer named ``epoch`` as current at ``at`` (inside a write)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    seen = _load(None if row is None else str(row[0]))
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
    bound = max(min(bounds), longest)
    return bound if bound > 0 else None


class EpochClock:
    """The current Walrus epoch as this data dir can know it (see the module doc)."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        epoch_seconds: float | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._catalog = catalog
        self._configured = epoch_seconds
        self._now = now

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

        The sighting is the writer's, signed with the manifest: it only moves
        this clock forward, and a fresh store answer re-anchors it anyway.
        """
        if not isinstance(exported, dict):
            return
        epoch, seen_at = exported.get("epoch"), exported.get("seen_at")
        if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 \
                and isinstance(seen_at, int | float) and math.isfinite(seen_at) \
                and seen_at <= self._now() + 300:
            self.observe(epoch, at=float(seen_at))

    def sightings(self) -> dict[int, list[float]]:
        return _load(self._catalog.get_meta(META_KEY))

    def reading(self, now: float | None = None) -> ClockReading:
        seen = self.sightings()
        floor = self._catalog.current_epoch()  # the highest epoch ever noted, sightings or not
        if self._configured is not None:
            seconds: float | None = float(self._configured)
            source: Source = "configured"
        else:
            seconds = learn_epoch_seconds(seen)
            source = "learned" if seconds is not None else "unknown"
        if not seen:
            return ClockReading(floor, floor, None, seconds, source)
        newest = max(seen)
        first = seen[newest][0]
        current = newest
        if seconds is not None:
            elapsed = (self._now() if now is None else now) - first
            current += max(0, math.floor(elapsed / seconds))
        if floor is not None:
            current = max(current, floor)
        return ClockReading(current, newest, first, seconds, source)

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
