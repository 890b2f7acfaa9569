"""Issue 25 item 4: a *different* network (another deployment, another system object)
behind the configured endpoints, whose epochs did not go backwards. Nothing in the
daemon's HTTP answers names the network (docs/walrus.md#network-resets-and-network-changes),
so the evidence is what the network no longer serves: blobs this data dir stored,
certified and still inside their end epoch, answering 404 on every aggregator. Each test
runs against relayer_mock over loopback HTTP with its admin routes off (the client sees
only what real Walrus shows)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from relayer_mock.server import RelayerServer
from tests.helpers_log import LyingAggregator, live, machine
from walrus_mem import Memory
from walrus_mem._memory.network_reset import RESET_KEY


def _locations(mem: Memory) -> dict[str, tuple[str | None, str | None, int | None]]:
    return {r.id: (r.blob_id, r.quilt_patch_id, r.end_epoch)
            for r in mem.list(limit=1000, include_expired=True)}


def _other_network(tmp_path: Path, port: int, epoch: int) -> RelayerServer:
    """Another network at the same address: nothing of the old one, its epochs ahead."""
    return RelayerServer(tmp_path / "walrus-other", admin=False, fsync=False, port=port,
                         initial_epoch=epoch)


def _fresh_count(tmp_path: Path, url: str, head: str) -> int:
    with machine(tmp_path / "fresh" / "data", url, state_dir=tmp_path / "fresh" / "home") as f:
        report = f.restore("default", head)
        assert report.complete and not report.missing, report
        return len(live(f))


def test_a_different_network_ahead_is_healed_by_one_sync(tmp_path: Path) -> None:
    """The endpoints now lead to another network whose epochs are ahead (90, the old one
    was at 40): no epoch went backwards, so the reset check took the head's 404 for a
    lagging aggregator ("not yet") for good, the clock refused the new network's epochs
    as implausible and no memory was stored again. Now the network is asked for the
    blobs that must still be live: all answer 404 on every aggregator, the network lost
    them; the clock follows the new network, one sync stores each lost memory once, the
    catalog records the change and a fresh restore of the new head gets everything."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact on the first network {i}" for i in range(6)])
            a.remember("a single fact on the first network")
            a.sync()
    with _other_network(tmp_path, port, 90) as srv:
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember("fact on the second network")
            report = a.sync()
            assert report.errors == [] and report.renewed == 7, report
            head = report.manifests["default"]
            network = srv.relayer.store.current_epoch()
            assert a.epoch_clock.current() == network
            assert all(r.end_epoch is not None and network < r.end_epoch <= network + 5
                       for r in a.list(limit=100))
            record = json.loads(a._catalog.get_meta(RESET_KEY) or "{}")
            assert record.get("kind") == "lost" and record.get("to") == network
            again = a.sync()  # once
            assert again.errors == [] and again.renewed == 0 and not again.manifests
        assert _fresh_count(tmp_path, url, head) == 8


def test_an_idle_machine_on_a_different_network_at_the_same_epochs(tmp_path: Path) -> None:
    """Another network whose epochs are where the old one's were (41 after 40): the
    machine stores nothing; its sync sees its head answer 404, the network's epoch is
    not below, and the memories' blobs answer 404 too: the network lost them. One sync
    stores them again."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact {i}" for i in range(4)])
            a.sync()
    with _other_network(tmp_path, port, 41):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = a.sync()
            assert report.errors == [] and report.renewed == 4, report
            head = report.manifests["default"]
            assert a.sync().renewed == 0
        assert _fresh_count(tmp_path, url, head) == 4


def test_extend_on_a_different_network_replaces_the_lost_locations(tmp_path: Path) -> None:
    """`extend` after the switch: every location answers 404, so each memory is stored
    again and its location replaced, whatever its recorded end; the next sync stores
    nothing again, and its clock follows the new network (it stayed at 40 before: the
    new network's answers, 50 epochs ahead, were refused as implausible for good)."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     manifest_every=10_000) as a:
            a.remember_many([f"fact {i}" for i in range(4)])
            a.sync()
    with _other_network(tmp_path, port, 90):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     manifest_every=10_000) as a:
            report = a.extend()
            assert not report.failed and len(report.extended) == 4
            new = _locations(a)
            assert all(httpx.get(f"{url}/v1/blobs/{loc[0]}").status_code == 200
                       for loc in new.values())
            report = a.sync()
            assert report.errors == [] and report.renewed == 0, report
            assert a.epoch_clock.current() == 90  # the clock follows the new network
            head = report.manifests.get("default") or a.stats().manifest_blob_id
        assert head is not None and _fresh_count(tmp_path, url, head) == 4


def test_one_lagging_blob_is_not_a_different_network(tmp_path: Path) -> None:
    """Only the head answers 404 (a lagging aggregator); the memories' blobs are served:
    nothing is stored again and no change is recorded."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv, LyingAggregator(srv.url) as agg:
        with machine(tmp_path / "a", srv.url, aggregator=agg.url,
                     state_dir=tmp_path / "sa") as a:
            a.remember_many([f"a fact {i}" for i in range(3)])
            head = a.sync().manifests["default"]
            agg.hide[head.split(".")[0]] = 0
            report = a.sync()
            assert report.errors == [] and report.renewed == 0 and not report.manifests
            assert a._catalog.get_meta(RESET_KEY) is None
