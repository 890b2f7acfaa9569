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


def _wiped(tmp_path: Path, port: int) -> RelayerServer:
    """The relayer at the same address restarted on an empty dir: blobs gone, epochs
    counting from 1 again (a testnet wipe looks the same)."""
    return RelayerServer(tmp_path / "walrus-after-wipe", admin=False, fsync=False, port=port)


def test_a_wiped_network_is_followed_and_every_memory_stored_again(tmp_path: Path) -> None:
    """The issue's run: relayer_mock restarted on an empty dir: sync kept succeeding and
    a fresh restore of the newest head got 1 of 9. Now the first sync after the wipe
    confirms it (the blobs answer 404, the epochs went from 40 back to 1), the clock
    follows, every memory whose blob the network lost is stored again once and a fresh
    restore gets 9 of 9."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact before the wipe {i}" for i in range(8)])
            a.sync()
    with _wiped(tmp_path, port) as srv:
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember("fact after the wipe")
            report = a.sync()
            assert report.errors == [] and report.renewed == 8  # the lost ones, once
            head = report.manifests["default"]
            network = srv.relayer.store.current_epoch()
            assert a.epoch_clock.current() == network
            assert all(r.end_epoch is not None and network < r.end_epoch <= network + 5
                       for r in a.list(limit=100))
            again = a.sync()  # once: nothing is stored again at the next sync
            assert again.errors == [] and again.renewed == 0 and not again.manifests
        with machine(tmp_path / "fresh", url, state_dir=tmp_path / "sf") as f:
            restored = f.restore("default", head)
            assert restored.complete and restored.restored == 9


def test_extend_replaces_a_location_the_network_lost(tmp_path: Path) -> None:
    """The issue's run: after the wipe `extend` stored the bytes again but kept the dead
    location, since the new end epoch (6) was below the recorded one (45); a fresh
    restore still got 1 of 9. Now a location that answers 404 is replaced whatever its
    recorded end, and the manifest extend publishes lists the new ones."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa", epoch_seconds=3600.0,
                     manifest_every=10_000) as a:
            a.remember_many([f"fact before the wipe {i}" for i in range(8)])
            a.sync()
    with _wiped(tmp_path, port) as srv:
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa", epoch_seconds=3600.0,
                     manifest_every=10_000) as a:
            a.remember("fact after the wipe")
            old = _locations(a)
            report = a.extend()
            assert not report.failed and len(report.extended) == 9
            new = _locations(a)
            assert all(new[mid][2] is not None and new[mid][2] <= 6 for mid in new)
            assert all(httpx.get(f"{url}/v1/blobs/{new[mid][0]}").status_code == 200
                       for mid in old)
            report = a.sync()  # confirms the reset: nothing left to store again
            assert report.errors == [] and report.renewed == 0
            head = report.manifests.get("default") or a.stats().manifest_blob_id
        with machine(tmp_path / "fresh", url, state_dir=tmp_path / "sf") as f:
            restored = f.restore("default", head)
            assert restored.complete and restored.restored == 9
