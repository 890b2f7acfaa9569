"""The epoch clock learned from store responses; expiry on a relayer without admin routes."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import EpochUnknown, Memory
from walrus_mem._catalog.catalog import Catalog
from walrus_mem._walrus.expiry import (
    META_KEY,
    NETWORK_EPOCH_SECONDS,
    EpochClock,
    learn_epoch_seconds,
    network_of,
)
from walrus_mem.testing import HashEmbedder


@pytest.fixture
def catalog(tmp_path: Path):
    cat = Catalog(tmp_path / "catalog.sqlite3")
    try:
        yield cat
    finally:
        cat.close()


def test_clock_knows_nothing_before_a_store(catalog: Catalog) -> None:
    clock = EpochClock(catalog, epoch_seconds=10)
    assert clock.current() is None
    assert not clock.expired(3)
    assert clock.reading().source == "configured"


def test_configured_length_extrapolates_from_the_first_sighting(catalog: Catalog) -> None:
    clock = EpochClock(catalog, epoch_seconds=10)
    clock.observe(5, at=1000.0)
    clock.observe(5, at=1007.0)  # a later sighting of the same epoch does not move the anchor
    assert clock.current(now=1009.9) == 5
    assert clock.current(now=1010.0) == 6
    assert clock.current(now=1035.0) == 8
    reading = clock.reading(now=1035.0)
    assert reading.starts_at(8) == 1030.0 and reading.newest_seen == 5
    assert clock.expired(8, current=8) and not clock.expired(9, current=8)
    assert clock.ends_within(9, 1, current=8) and not clock.ends_within(10, 1, current=8)


def test_a_fresh_store_answer_re_anchors_a_clock_that_ran_ahead(catalog: Catalog) -> None:
    clock = EpochClock(catalog, epoch_seconds=10)  # the real epochs are longer than configured
    clock.observe(5, at=0.0)
    assert clock.current(now=35.0) == 8
    clock.observe(6, at=35.0)  # the network says 6, not 8
    assert clock.current(now=35.0) == 6
    assert clock.current(now=44.0) == 6


def test_length_is_learned_as_an_upper_bound(catalog: Catalog) -> None:
    clock = EpochClock(catalog)
    clock.observe(3, at=100.0)
    assert clock.current(now=10_000.0) == 3  # one epoch seen: no length, no extrapolation
    assert clock.reading().source == "unknown"
    clock.observe(4, at=110.0)  # adjacent epochs bound nothing: 4 may have begun long ago
    assert clock.reading().epoch_seconds is None and clock.current(now=10_000.0) == 4
    clock.observe(6, at=300.0)  # epochs 4 and 5 lay wholly between 100 and 300: <= 100 s
    assert clock.reading().epoch_seconds == pytest.approx(100.0)
    assert clock.reading().source == "learned"
    assert clock.current(now=399.0) == 6 and clock.current(now=400.0) == 7
    # An epoch seen over 150 s lasts at least that long, whatever the bounds say.
    assert learn_epoch_seconds({3: [0.0, 150.0], 5: [90.0, 240.0]}) == 150.0


def test_a_learned_length_never_runs_the_clock_ahead(catalog: Catalog) -> None:
    """The hazard of a span estimate: epoch 1 first seen near its end, epoch 2 right at its
    start, real epochs a day long. The clock must not race to hundreds of epochs."""
    day = 86_400.0
    clock = EpochClock(catalog)
    clock.observe(1, at=day - 400)  # epoch 1 = [0, day)
    clock.observe(2, at=day)
    clock.observe(2, at=day + 3600)
    assert clock.current(now=day + 2 * day) == 2  # truth: 3; lagging is the safe side
    clock.observe(4, at=3 * day + 10)  # now a bound exists: (3d + 10 - (d + 3600)) / 1
    seconds = clock.reading().epoch_seconds
    assert seconds is not None and seconds >= day
    for hours in range(0, 24 * 20, 7):  # over 20 days the clock is never ahead of the truth
        now = 3 * day + 10 + hours * 3600
        assert clock.current(now=now) <= int(now // day) + 1


def test_unreadable_clock_state_counts_as_nothing_seen(catalog: Catalog) -> None:
    catalog.set_meta(META_KEY, "{not json")
    clock = EpochClock(catalog, epoch_seconds=5)
    assert clock.current(now=0.0) is None
    clock.observe(2, at=0.0)  # and it recovers on the next store answer
    assert clock.current(now=11.0) == 4


def test_split_names_the_expired_entries(catalog: Catalog) -> None:
    clock = EpochClock(catalog, epoch_seconds=10)
    clock.observe(7, at=time.time())
    live, gone = clock.split([("m1", "b1", None, 7), ("m2", "b2", "p2", 8),
                              ("m3", "b3", None, None)])
    assert [r[0] for r in live] == ["m2", "m3"]
    assert [(g.memory_id, g.blob_id, g.end_epoch) for g in gone] == [("m1", "b1", 7)]


def _epoch(server: RelayerServer) -> int:
    return int(server.relayer.store.current_epoch())


def test_expiring_counts_without_the_mock_admin_routes(tmp_path: Path) -> None:
    """Real Walrus has no epoch route: the clock must move with wall time, not only with stores."""
    with RelayerServer(tmp_path / "walrus", admin=False, epoch_duration=1.0) as srv:
        assert httpx.get(f"{srv.url}/_mock/epoch").status_code == 404
        settings = make_settings(tmp_path / "d", publisher_url=srv.url, aggregator_urls=srv.url,
                                 epochs=1, epoch_seconds=1.0, manifest_every=10_000)
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            short = mem.remember_many([f"short-lived fact {i}" for i in range(40)]).records
            keeper = mem.remember("the long-lived fact")
            assert mem.extend([keeper.id], epochs=30).extended[keeper.id] >= _epoch(srv) + 25
            last_end = max(int(r.end_epoch or 0) for r in mem.list(limit=100)
                           if r.id != keeper.id)
            deadline = time.monotonic() + 30
            while _epoch(srv) < last_end + 1:  # the clock lags the network by at most one epoch
                assert time.monotonic() < deadline, "relayer clock did not move"
                time.sleep(0.1)
            expiring = mem.expiring(0)
            assert {r.id for r in expiring} == {r.id for r in short}
            assert mem.stats().current_epoch is not None
            assert mem.stats().current_epoch >= last_end
            assert keeper.id in {r.id for r in mem.expiring(40)}


def test_sync_renews_expired_blobs_so_no_manifest_lists_them(tmp_path: Path) -> None:
    """The issue's run: 40 of 41 blobs expired, sync published a manifest listing them and a
    restore from it got 1 of 41. Now sync re-publishes them first (verified sealed bytes)."""
    with RelayerServer(tmp_path / "walrus", admin=False, epoch_duration=1.0) as srv:
        def settings(data_dir: Path, epochs: int):
            return make_settings(data_dir, publisher_url=srv.url, aggregator_urls=srv.url,
                                 epochs=epochs, epoch_seconds=1.0, manifest_every=10_000)

        with Memory(settings(tmp_path / "a", 1), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as mem:
            short = mem.remember_many([f"short-lived fact {i}" for i in range(40)]).records
            keeper = mem.remember("the long-lived fact")
            mem.extend([keeper.id], epochs=30)
            first_head = mem.sync().manifests.get("default") or mem.stats().manifest_blob_id
            last_end = max(int(r.end_epoch or 0) for r in mem.list(limit=100)
                           if r.id != keeper.id)
        deadline = time.monotonic() + 30
        while _epoch(srv) < last_end + 1:
            assert time.monotonic() < deadline, "relayer clock did not move"
            time.sleep(0.1)
        gone = httpx.get(f"{srv.url}/v1/blobs/{short[0].blob_id}")
        assert gone.status_code == 404  # expired on the network
        with Memory(settings(tmp_path / "a", 20), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as mem:  # 20 epochs of 1 s: time for the restore
            report = mem.sync()
            assert report.renewed == 40 and not report.errors
            head = report.manifests["default"]
            assert head != first_head
            now = _epoch(srv)
            assert all(int(r.end_epoch or 0) > now for r in mem.list(limit=100))
        with Memory(settings(tmp_path / "fresh", 20), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as fresh:
            restored = fresh.restore("default", head)
            assert restored.total == 41 and restored.restored == 41 and not restored.failed


def test_a_manifest_can_carry_the_clock_to_a_fresh_machine(tmp_path: Path) -> None:
    writer = Catalog(tmp_path / "w.sqlite3")
    reader = Catalog(tmp_path / "r.sqlite3")
    try:
        clock = EpochClock(writer, epoch_seconds=10)
        assert clock.export() is None
        clock.observe(4, at=time.time() - 25)
        carried = clock.export()
        assert carried is not None and carried["epoch"] == 4
        fresh = EpochClock(reader, epoch_seconds=10)
        for junk in (None, "x", {"epoch": "4"}, {"epoch": True, "seen_at": 1.0},
                     {"epoch": 4, "seen_at": float("nan")}, {"epoch": 9, "seen_at": 1e12}):
            fresh.seed(junk)
        assert fresh.current() is None
        fresh.seed(carried)
        assert fresh.current() == 6 and fresh.expired(6) and not fresh.expired(7)
    finally:
        writer.close()
        reader.close()


def test_drop_expired_keeps_what_a_manifest_may_list(catalog: Catalog) -> None:
    clock = EpochClock(catalog, epoch_seconds=10)
    clock.observe(7, at=time.time())
    rows = [{"id": "m1", "blob_id": "b1", "quilt_patch_id": None, "end_epoch": 7},
            {"id": "m2", "blob_id": "b2", "quilt_patch_id": "p2", "end_epoch": 8},
            {"id": "m3", "blob_id": "b3", "quilt_patch_id": None, "end_epoch": None}]
    kept, gone = clock.drop_expired(rows)
    assert [r["id"] for r in kept] == ["m2", "m3"]
    assert gone[0].memory_id == "m1" and "end epoch 7" in gone[0].reason


def test_restore_names_expired_blobs_instead_of_failing(tmp_path: Path) -> None:
    """Admin routes off and a clock only the test moves: the restoring machine learns the
    epoch from its own store answer, and the restore report names the 40 expired facts."""
    with RelayerServer(tmp_path / "walrus", admin=False) as srv:
        def settings(data_dir: Path, epochs: int):
            return make_settings(data_dir, publisher_url=srv.url, aggregator_urls=srv.url,
                                 epochs=epochs, renew_margin_epochs=0, manifest_every=10_000)

        with Memory(settings(tmp_path / "a", 1), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as mem:
            short = mem.remember_many([f"short-lived fact {i}" for i in range(40)]).records
        with Memory(settings(tmp_path / "a", 30), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as mem:
            keeper = mem.remember("the long-lived fact")
            report = mem.sync()
            assert report.renewed == 0  # nothing has expired yet
            head = report.manifests["default"]
        srv.relayer.store.advance_epoch(3)
        assert httpx.get(f"{srv.url}/v1/blobs/{short[0].blob_id}").status_code == 404
        with Memory(settings(tmp_path / "b", 30), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as fresh:
            fresh.remember("a fact of another namespace", namespace="other")  # learns the epoch
            restored = fresh.restore("default", head)
            assert restored.restored == 1 and fresh.get(keeper.id).text == keeper.text
            assert sorted(m for m, _ in restored.expired) == sorted(r.id for r in short)
            assert restored.missing == [] and not restored.failed
        with Memory(settings(tmp_path / "c", 30), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as blank:  # no store of its own
            restored = blank.restore("default", head)
            # The root carried the writer's sighting, but without an epoch length the clock
            # cannot tell that 3 epochs passed: the 40 reads answered 404, and one probe store
            # read the epoch so they are named as expired, not missing (they were missing).
            assert sorted(m for m, _ in restored.expired) == sorted(r.id for r in short)
            assert restored.missing == [] and restored.restored == 1
            assert blank.epoch_clock.reading().newest_seen == _epoch(srv)


def test_a_manifest_never_lists_a_blob_past_its_end_epoch(tmp_path: Path) -> None:
    """When renewal cannot help (the local copies are damaged), the expired blobs are left
    out of the manifest instead of being listed as restorable."""
    import sqlite3

    from tests.helpers_memory import mock_admin

    data = tmp_path / "d"
    # the catalog's copies rot (with the embedded relayer it keeps none unless told to)
    with Memory(make_settings(data, epochs=1, catalog_keeps_sealed=True),
                embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        old = mem.remember_many([f"soon expired fact {i}" for i in range(3)]).records
        mem.sync()
        with sqlite3.connect(mem.catalog_path) as conn:
            for rec in old:
                sealed = bytearray(conn.execute("SELECT sealed FROM memories WHERE id = ?",
                                                (rec.id,)).fetchone()[0])
                sealed[60] ^= 0x01
                conn.execute("UPDATE memories SET sealed = ? WHERE id = ?",
                             (bytes(sealed), rec.id))
        mock_admin(mem).post("/_mock/epoch/advance", params={"by": 2}).raise_for_status()
    with Memory(make_settings(data, epochs=5, catalog_keeps_sealed=True),
                embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        new = mem.remember("a fresh fact")
        report = mem.sync()
        assert report.renewed == 0 and len(report.errors) == 3
        assert all("damaged" in e for e in report.errors)
        current = mem.current_epoch()
        assert current is not None
        _, entries = mem._log.read("default", report.manifests["default"])
        live = [e for e in entries if not e.deleted]
        assert [e.memory_id for e in live] == [new.id]
        assert all(e.end_epoch is None or e.end_epoch > current for e in live)


# -- the default clock (epoch_seconds unset): known networks, learned bounds, probes ------


@pytest.mark.parametrize(("urls", "network"), [
    (["https://publisher.walrus-testnet.walrus.space"], "testnet"),
    (["https://walrus-testnet-publisher.nodes.guru", "https://walrus-agg.testnet.pops.one"],
     "testnet"),
    (["https://aggregator.walrus-mainnet.walrus.space", None], "mainnet"),
    (["https://aggregator.walrus-mainnet.walrus.space",
      "https://publisher.walrus-testnet.walrus.space"], None),  # both named: neither
    (["http://127.0.0.1:31415", "https://walrus.example.org"], None),
])
def test_the_endpoints_name_the_network(urls: list[str | None], network: str | None) -> None:
    assert network_of(urls) == network


def test_a_known_network_gives_the_clock_its_epoch_length(tmp_path: Path) -> None:
    """Unset epoch_seconds on testnet endpoints: the clock moved only with stores before."""
    settings = make_settings(tmp_path / "d", epoch_seconds=None,
                             publisher_url="https://publisher.walrus-testnet.walrus.space",
                             aggregator_urls="https://aggregator.walrus-testnet.walrus.space")
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        mem.epoch_clock.observe(40, at=time.time() - 3 * 86_400 - 60)
        reading = mem.epoch_clock.reading()
        assert (reading.epoch_seconds, reading.source) == (86_400.0, "network")
        assert reading.current == 43 and reading.known
    assert NETWORK_EPOCH_SECONDS["mainnet"] == 14 * 86_400.0


def test_learned_bounds_say_when_the_clock_is_unknown(catalog: Catalog) -> None:
    clock = EpochClock(catalog)
    clock.observe(5, at=0.0)
    assert not clock.reading(now=1.0).known  # one sighting bounds nothing
    assert clock.reading(now=1.0).latest is None
    clock.observe(5, at=100.0)  # epoch 5 lasts longer than 100 s
    assert clock.reading(now=150.0).known and clock.reading(now=150.0).latest == 6
    assert not clock.reading(now=250.0).known  # could be epoch 7 by now
    assert clock.reading(now=250.0).latest == 7 and clock.reading(now=250.0).current == 5
    # 5 seen over [0, 100], 8 first seen at 1000: 4 epochs outlast 1000 s and 2 whole
    # ones lie in 900 s, so the length is in (250, 450]
    clock.observe(8, at=1000.0)
    reading = clock.reading(now=1100.0)
    assert reading.source == "learned" and reading.epoch_seconds == pytest.approx(450.0)
    assert reading.current == 8 and reading.latest == 9 and reading.known
    assert "between 8 and 9" in reading.describe(now=1100.0)


def _short_and_keeper(srv: RelayerServer, data: Path, *, sync: bool = False
                      ) -> tuple[set[str], str, int]:
    """40 memories stored for 3 epochs and one kept for 30, then the relayer's clock past
    the 40's end. Three epochs: a renewal margin of one epoch cannot hide a stale clock."""
    settings = make_settings(data, publisher_url=srv.url, aggregator_urls=srv.url, epochs=3,
                             manifest_every=10_000)  # epoch_seconds unset: the default
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
        short = {r.id for r in mem.remember_many(
            [f"short-lived fact {i}" for i in range(40)]).records}
        keeper = mem.remember("the long-lived fact")
        mem.extend([keeper.id], epochs=30)
        if sync:
            mem.sync()
            assert mem.stats().manifest_blob_id is not None  # (extend published one)
        last_end = max(int(r.end_epoch or 0) for r in mem.list(limit=100)
                       if r.id != keeper.id)
    deadline = time.monotonic() + 60
    while _epoch(srv) < last_end + 1:  # expired on the network, and an epoch more
        assert time.monotonic() < deadline, "relayer clock did not move"
        time.sleep(0.1)
    assert httpx.get(f"{srv.url}/v1/blobs/{keeper.blob_id}").status_code == 200
    return short, keeper.id, last_end


def test_expiring_says_the_epoch_is_unknown_instead_of_answering_0(tmp_path: Path) -> None:
    """The red team's run: default settings, a publisher without admin routes, 40 of 41
    blobs expired; `expiring(0)` returned 0 (the client's epoch only moved with stores)."""
    from walrus_mem._cli.doctor import _expiry_check

    with RelayerServer(tmp_path / "walrus", admin=False, epoch_duration=1.0) as srv:
        short, keeper, _ = _short_and_keeper(srv, tmp_path / "a")
        settings = make_settings(tmp_path / "a", publisher_url=srv.url,
                                 aggregator_urls=srv.url, epochs=1, manifest_every=10_000)
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            with pytest.raises(EpochUnknown, match="epoch_seconds"):
                mem.expiring(0)
            check = _expiry_check(mem, "default")
            assert check.status == "warn" and "unknown" in check.detail
            assert "--probe" in check.fix
            assert {r.id for r in mem.expiring(0, probe=True)} == short  # one probe store
            assert keeper in {r.id for r in mem.expiring(40)}  # the probe made it known
            assert _expiry_check(mem, "default").status == "fail"  # 40 past their end


def test_sync_probes_an_unknown_epoch_and_never_lists_an_expired_blob(tmp_path: Path) -> None:
    """Same run, straight to sync: it published a manifest listing the 40 expired blobs,
    and a restore from it got 1 of 41. Now it reads the epoch with a probe store first."""
    with RelayerServer(tmp_path / "walrus", admin=False, epoch_duration=1.0) as srv:
        short, keeper, _ = _short_and_keeper(srv, tmp_path / "a")

        def settings(data_dir: Path):
            return make_settings(data_dir, publisher_url=srv.url, aggregator_urls=srv.url,
                                 epochs=30, manifest_every=10_000)

        with Memory(settings(tmp_path / "a"), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as mem:
            report = mem.sync()
            assert report.renewed == 40 and not report.errors
            head = report.manifests["default"]
            now = _epoch(srv)
            assert all(int(r.end_epoch or 0) > now for r in mem.list(limit=100))
        with Memory(settings(tmp_path / "fresh"), embedder=HashEmbedder(64),
                    master_key=MASTER_HEX) as fresh:
            restored = fresh.restore("default", head)
            assert restored.restored == 41 and not restored.failed and not restored.expired
            assert {r.id for r in fresh.list(limit=100)} == short | {keeper}


def test_a_forget_on_an_unknown_epoch_leaves_the_manifest_to_sync(tmp_path: Path) -> None:
    """forget publishes a manifest at once; on a stale clock that manifest listed the 40
    expired blobs. Now it waits for the next sync, which probes the epoch and renews."""
    with RelayerServer(tmp_path / "walrus", admin=False, epoch_duration=1.0) as srv:
        short, keeper, _ = _short_and_keeper(srv, tmp_path / "a", sync=True)
        settings = make_settings(tmp_path / "a", publisher_url=srv.url,
                                 aggregator_urls=srv.url, epochs=30, manifest_every=10_000)
        with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as mem:
            gone = sorted(short)[0]
            report = mem.forget(gone)
            if report.manifest_blob_id is not None:  # the old behaviour: check what it lists
                _, entries = mem._log.read("default", report.manifest_blob_id)
                now = _epoch(srv)
                listed = [e for e in entries if not e.deleted]
                assert all(e.end_epoch is None or e.end_epoch > now for e in listed)
            synced = mem.sync()
            assert synced.renewed == 39 and not synced.errors
            head = synced.manifests["default"]
        with Memory(make_settings(tmp_path / "fresh", publisher_url=srv.url,
                                  aggregator_urls=srv.url, epochs=30),
                    embedder=HashEmbedder(64), master_key=MASTER_HEX) as fresh:
            restored = fresh.restore("default", head)
            assert restored.restored == 40 and not restored.failed
            assert {r.id for r in fresh.list(limit=100)} == (short - {gone}) | {keeper}
