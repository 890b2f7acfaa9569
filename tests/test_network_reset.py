"""The epoch clock against a network and a wall clock that misbehave (issue 23 items 5
and 8): a storage wipe / epoch reset of the network, and a wall clock that ran ahead
while the first store answers were noted. Each runs over relayer_mock over loopback
HTTP with its admin routes off (as on real Walrus: the client learns the epoch from
store answers only)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import live, machine
from walrus_mem import Memory
from walrus_mem.expiry import learn_epoch_seconds

DAY = 86_400.0


def _wait_epochs(srv: RelayerServer, count: int) -> None:
    start = srv.relayer.store.current_epoch()
    deadline = time.monotonic() + 30
    while srv.relayer.store.current_epoch() < start + count:
        assert time.monotonic() < deadline, "relayer clock did not move"
        time.sleep(0.1)


def _locations(mem: Memory) -> dict[str, tuple[str | None, str | None, int | None]]:
    """memory id -> where its blob lives and until when."""
    return {r.id: (r.blob_id, r.quilt_patch_id, r.end_epoch)
            for r in mem.list(limit=1000, include_expired=True)}


def test_a_wall_clock_ahead_during_the_first_stores_does_not_break_the_epoch_length(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's run: the clock 10 days ahead while the first store answers were noted,
    then corrected: the learned bound came out negative, the epoch length fell to 0.09 s
    on a 2 s network and every idle sync re-stored every memory (SyncReport.renewed
    saying 0 or 11). Now the sightings the corrected clock contradicts are dropped, no
    idle sync re-stores anything, and `renewed` counts what was re-stored."""
    real: Callable[[], float] = time.time
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       epoch_duration=2.0) as srv:
        with machine(tmp_path / "a", srv.url, epochs=30, manifest_every=10_000) as a:
            monkeypatch.setattr(time, "time", lambda: real() + 10 * DAY)
            a.remember_many([f"fact stored while the clock ran ahead {i}" for i in range(6)])
            _wait_epochs(srv, 2)
            a.remember_many([f"more facts while ahead {i}" for i in range(5)])
            monkeypatch.setattr(time, "time", real)  # NTP corrects the clock
            _wait_epochs(srv, 1)
            a.remember("the first fact after the correction")
            seconds = a.epoch_clock.reading().epoch_seconds
            assert seconds is None or seconds >= 1.0
            bound = learn_epoch_seconds(a.epoch_clock.sightings())
            assert bound is None or bound > 0
            before = _locations(a)
            time.sleep(3)  # idle: a 0.1 s epoch length would now put everything past its end
            for _ in range(3):  # idle syncs: nothing is due for 30 epochs
                report = a.sync()
                assert report.errors == [] and report.renewed == 0
                assert _locations(a) == before
            current = a.epoch_clock.current()
            assert current is not None and current <= srv.relayer.store.current_epoch()
            assert len(live(a)) == 12


def test_renewed_counts_the_memories_stored_again(tmp_path: Path) -> None:
    """SyncReport.renewed is the number of memories sync stored again (the same sealed
    bytes in the same quilt keep their blob id: their end epoch moves)."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       epoch_duration=1.0) as srv:
        with machine(tmp_path / "a", srv.url, epochs=1, epoch_seconds=1.0,
                     renew_margin_epochs=1, manifest_every=10_000) as a:
            a.remember_many([f"short-lived fact {i}" for i in range(4)])
            before = _locations(a)
            _wait_epochs(srv, 3)  # all four past their end
            assert httpx.get(f"{srv.url}/v1/blobs/{next(iter(before.values()))[0]}"
                             ).status_code == 404
            report = a.sync()
            after = _locations(a)
            changed = sum(1 for mid in before if after[mid] != before[mid])
            assert changed == 4 and report.renewed == changed
