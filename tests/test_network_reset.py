"""The epoch clock against a network and a wall clock that misbehave (issue 23 items 5
and 8): a storage wipe / epoch reset of the network, and a wall clock that ran ahead
while the first store answers were noted. Each runs over relayer_mock over loopback
HTTP with its admin routes off (as on real Walrus: the client learns the epoch from
store answers only)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import LyingAggregator, live, machine
from tests.helpers_memory import MASTER_HEX, MOCK_ADMIN_TOKEN, make_settings
from walrus_mem import Memory
from walrus_mem._log import manifest as mf
from walrus_mem._log.gone import store_root
from walrus_mem._log.heads import HeadRef
from walrus_mem._memory.network_reset import RESET_KEY
from walrus_mem._memory.repair_run import repair_data_dir
from walrus_mem._walrus.expiry import BACKWARDS_KEY, learn_epoch_seconds
from walrus_mem.config import Settings
from walrus_mem.envelope import open_envelope
from walrus_mem.testing import HashEmbedder

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


# -- a wipe noticed by every machine, whatever it does (issue 23 item 5; stateful W1-W3) ----


def _settings(data_dir: Path, url: str, state_dir: Path) -> Settings:
    """What helpers_log.machine builds on, for repair_data_dir."""
    return make_settings(data_dir, publisher_url=url, aggregator_urls=url, read_deadline=3.0,
                         publish_deadline=5.0, master_key=MASTER_HEX, state_dir=state_dir,
                         mock_admin_token=MOCK_ADMIN_TOKEN)


def _fresh(tmp_path: Path, url: str, head: str) -> dict[str, str]:
    """What a new machine (new data dir, new HOME) restoring ``head`` alone gets."""
    where = tmp_path / f"fresh-{head[:8]}"
    with machine(where / "data", url, state_dir=where / "home") as f:
        report = f.restore("default", head)
        assert report.complete and not report.missing, report
        return live(f)


def _damage_an_index_page(catalog: Path) -> None:
    """Garbage over one page of an index of the memories table: SQLite's integrity check
    fails, the rows stay readable (repair moves the file aside and salvages them)."""
    with contextlib.closing(sqlite3.connect(catalog)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        row = conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND "
                           "tbl_name = 'memories' AND sql IS NOT NULL ORDER BY name").fetchone()
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    with open(catalog, "r+b") as f:
        f.seek((int(row[0]) - 1) * size + 8)
        f.write(b"\xa5" * (size - 8))


def test_an_idle_machine_notices_a_wipe_and_stores_its_memories_again(tmp_path: Path) -> None:
    """Stateful finding W1: B wrote a fact and synced, then the network was wiped. A's
    sync noticed (a store answer at epoch 1); B's syncs stored nothing, so no store
    answer showed it the reset: they said nothing, and once B merged A's new head it
    published a manifest listing its fact at the lost location (a fresh restore of it
    missed the fact, A never got it). Now B's sync sees its own newest head answer 404
    before its end epoch, asks the network's epoch (1, below the 40 it had seen: a
    reset), stores its memories again and publishes."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"A's fact before the wipe {i}" for i in range(4)])
            first = a.sync().manifests["default"]
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            b.restore("default", first)
            b.remember("B's fact before the wipe")
            b.sync()
    with _wiped(tmp_path, port):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            head_a = a.sync().manifests["default"]  # A notices: it re-stores and publishes
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            report = b.sync()
            assert report.errors == [] and report.renewed == 5, report
            head_b = report.manifests["default"]
            assert b.sync().renewed == 0  # once
            b.pull(head_a)
            assert len(live(b)) == 5
            final = b.sync().manifests.get("default") or head_b
        assert len(_fresh(tmp_path, url, head_b)) == 5
        assert len(_fresh(tmp_path, url, final)) == 5
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.pull(final)
            assert len(live(a)) == 5


def test_a_machine_that_never_stored_notices_a_wipe(tmp_path: Path) -> None:
    """B only restored A's head (its epoch clock rests on the manifest's, no store answer of
    its own), and A's catalog is gone: B is the only holder left. Its sync sees the head
    it merged answer 404 before its end epoch, the network names epoch 1 where the head
    was stored at 40: B stores every memory again and publishes."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"A's fact before the wipe {i}" for i in range(4)])
            first = a.sync().manifests["default"]
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            b.restore("default", first)
    with _wiped(tmp_path, port):
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            report = b.sync()
            assert report.errors == [] and report.renewed == 4, report
            assert report.skipped_heads == []
            head = report.manifests["default"]
        assert len(_fresh(tmp_path, url, head)) == 4


def test_a_catalog_repaired_after_a_wipe_follows_it(tmp_path: Path) -> None:
    """Stateful finding W2: after a wipe A's catalog was lost (garbage) and repaired: its
    remembered head is gone with the wipe, so the rebuild gets nothing (as it must), but
    every sync then reported that head as skipped for good ("end epoch (at most 45) has
    not passed": after a reset to epoch 1 it would not for 44 epochs), and the idle B
    never published what it held. Now A's sync confirms the reset (the head answers 404,
    the network names epoch 1, the head was stored at 40), takes the head as gone; B
    notices by itself and publishes; A gets everything from B's head."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"A's fact before the wipe {i}" for i in range(4)])
            first = a.sync().manifests["default"]
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            b.restore("default", first)
    with _wiped(tmp_path, port):
        catalog = tmp_path / "a" / "catalog.sqlite3"
        catalog.write_bytes(b"not a database, the disk lost it " * 300)
        for suffix in ("-wal", "-shm"):
            Path(str(catalog) + suffix).unlink(missing_ok=True)
        rebuild, _ = repair_data_dir(_settings(tmp_path / "a", url, tmp_path / "sa"),
                                     embedder=HashEmbedder(64))
        assert rebuild is not None and rebuild.moved_to is not None
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = a.sync("default")  # the namespace only heads.sqlite3 names now
            assert report.errors == [], report.errors
            assert [s for s in report.skipped_heads if first in s and "wipe" in s] \
                == report.skipped_heads != []  # said once: what only it listed is lost
            assert a.sync("default").skipped_heads == []
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            report = b.sync()
            assert report.errors == [] and report.renewed == 4, report
            head_b = report.manifests["default"]
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.pull(head_b)
            assert len(live(a)) == 4
            report = a.sync()
            assert report.errors == [] and report.skipped_heads == [], report
            final = report.manifests.get("default") or a.stats().manifest_blob_id
        assert final is not None and len(_fresh(tmp_path, url, final)) == 4


def test_a_catalog_salvaged_after_a_wipe_publishes_again(tmp_path: Path) -> None:
    """Stateful finding W3: after a wipe A's catalog had one damaged index page; repair
    moved it aside, its remembered head (gone with the wipe) could not be restored, the
    rows were salvaged. Every sync then refused the manifest with StaleDataDir ("this
    data dir already published seq 1 ... `walrus-mem pull` its head"): the head is gone,
    the advice could not be followed, A never published again. Now the head counts as
    gone once the reset is confirmed, the next manifest names it as parent (seq 2: the
    writer's seq still only grows) and lists every salvaged memory."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"A's fact before the wipe {i}" for i in range(4)])
            a.sync()
    with _wiped(tmp_path, port):
        _damage_an_index_page(tmp_path / "a" / "catalog.sqlite3")
        rebuild, _ = repair_data_dir(_settings(tmp_path / "a", url, tmp_path / "sa"),
                                     embedder=HashEmbedder(64))
        assert rebuild is not None and len(rebuild.salvaged) == 4
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = a.sync()
            assert report.errors == [], report.errors
            head = report.manifests["default"]
            assert HeadRef.parse(head).seq == 2
            assert a.sync().errors == []
        assert len(_fresh(tmp_path, url, head)) == 4


def test_a_backup_restored_on_the_same_home_after_a_wipe_publishes_again(
        tmp_path: Path) -> None:
    """Stateful finding W3 (backup): a backup restored on the same HOME after a wipe; the
    mirror names the newer head this data dir published after the backup, gone with the
    wipe: a key rotation's manifest (the first store answers after the wipe are its
    re-sealed memories) was refused, StaleDataDir ("`walrus-mem pull` its head"), and so
    was every sync's, which finishes the rotation first. Now that head counts as gone
    once the reset is confirmed: the rotation publishes seq 3 with what the backup held
    (what only the lost head held is lost with the network)."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact in the backup {i}" for i in range(3)])
            a.sync()
        shutil.copytree(tmp_path / "a", tmp_path / "backup")
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember("fact after the backup")
            a.sync()
    shutil.rmtree(tmp_path / "a")
    shutil.copytree(tmp_path / "backup", tmp_path / "a")
    with _wiped(tmp_path, port):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            rotated = a.rotate_key()
            assert rotated.complete, rotated.errors
            assert rotated.manifest_blob_id is not None
            assert HeadRef.parse(rotated.manifest_blob_id).seq == 3
            a.remember("fact after the wipe")
            report = a.sync()
            assert report.errors == [], report.errors
            head = report.manifests["default"]
        assert len(_fresh(tmp_path, url, head)) == 4


def test_a_lagging_head_of_an_idle_machine_is_not_a_reset(tmp_path: Path) -> None:
    """The check an idle machine makes (its newest head still served?) must not take a
    lagging aggregator for a wipe: the head answers 404, the network's epoch is the one
    seen before, so nothing is stored again, the head is neither gone nor merged anew,
    and once served the machine carries on as before."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv, LyingAggregator(srv.url) as agg:
        with machine(tmp_path / "a", srv.url, aggregator=agg.url,
                     state_dir=tmp_path / "sa") as a:
            a.remember_many([f"a fact {i}" for i in range(3)])
            head = a.sync().manifests["default"]
            before = _locations(a)
            agg.hide[head.split(".")[0]] = 0
            for _ in range(2):
                report = a.sync()
                assert report.errors == [] and report.renewed == 0 and not report.manifests
            assert _locations(a) == before
            assert a._catalog.get_meta(RESET_KEY) is None
            assert not a._log.seen.is_gone("default", head.split(".")[0])
            assert a.epoch_clock.current() == 40
            del agg.hide[head.split(".")[0]]
            a.remember("one more")
            assert HeadRef.parse(a.sync().manifests["default"]).seq == 2


def test_an_old_manifests_clock_is_history_not_a_reset(tmp_path: Path) -> None:
    """A head published long ago carries its writer's sighting of an old epoch: merging it
    notes that epoch at its old time. Below only epochs seen later, it is history and
    is not held apart as a network gone backwards (with a lagging blob it would have
    been taken for a reset); below one seen before it, it is held apart."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        with machine(tmp_path / "a", srv.url) as a:
            now = time.time()
            a._catalog.note_epoch(40, at=now - 100)
            a._catalog.note_epoch(10, at=now - 1000)  # an old manifest's clock
            assert not a._catalog.get_meta(BACKWARDS_KEY)
            assert 10 in a.epoch_clock.sightings()
            a._catalog.note_epoch(1, at=now)  # after 40 was seen: held apart
            assert a._catalog.get_meta(BACKWARDS_KEY)
            assert 1 not in a.epoch_clock.sightings()


def test_a_root_never_names_an_epoch_above_the_one_it_was_stored_in(tmp_path: Path) -> None:
    """A key rotation right after a wipe publishes a manifest before any sync noticed it:
    the root's clock still named epoch 40, the store answer epoch 1. Readers take a root's
    clock as a lower bound of the epoch it was stored in (SeenHead.stored_epoch): with 40
    a reader would later take this live head, lagging, for one lost in a reset. Now the
    log follows the reset before it records a manifest (the root then names the new
    epochs), and a root whose clock is still above its store answer's epoch is stored
    again without it: a reader records no bound above the real epoch."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact {i}" for i in range(3)])
            a.sync()
    with _wiped(tmp_path, port):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            head = a.rotate_key().manifest_blob_id
            assert head is not None
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            assert b.restore("default", head).complete
            seen = b._log.seen.get("default", HeadRef.parse(head).blob_id)
            assert seen is not None
            assert seen.stored_epoch is None or seen.stored_epoch <= 1


def test_a_manifest_published_outside_sync_after_a_wipe_lists_no_lost_location(
        tmp_path: Path) -> None:
    """A forget right after a wipe publishes a manifest at once (the clock is known), before
    any sync noticed the reset: it listed the remaining memories at their lost locations,
    and a fresh restore of it got none of them. Now the root's store answer (epoch 1, the
    clock at 40) makes the log check the network first: the reset is followed, the lost
    memories are stored again, and only then is a manifest recorded."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     epoch_seconds=3600.0) as a:
            ids = [r.id for r in a.remember_many([f"fact {i}" for i in range(4)]).records]
            a.sync()
    with _wiped(tmp_path, port):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa",
                     epoch_seconds=3600.0) as a:
            head = a.forget(ids[0]).manifest_blob_id
            assert head is not None
            assert a._catalog.get_meta(RESET_KEY) is not None
        assert sorted(_fresh(tmp_path, url, head).values()) == ["fact 1", "fact 2", "fact 3"]


def test_a_machine_that_saw_no_old_epoch_notices_its_lost_blobs(tmp_path: Path) -> None:
    """B only restored A's head (no sighting of the old network of its own). After the wipe
    A stored its memories again, in a new quilt (new blob ids), and published; B pulled
    that head first: the same versions, so B kept its own (lost) locations, its newest
    head is served, and its clock only ever saw epoch 1. B's next manifest listed the
    lost locations. Now the heads B has seen say the network had reached epoch 40 (a
    head stored then), so a current epoch of 1 is a reset: B checks its blobs and stores
    the lost ones again before it publishes."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"quilted fact {i}" for i in range(3)])
            a.remember("single fact")
            first = a.sync().manifests["default"]
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            b.restore("default", first)
            before = _locations(b)
    with _wiped(tmp_path, port):
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            report = a.sync()
            assert report.renewed == 4
            head_a = report.manifests["default"]
            assert {loc[0] for loc in _locations(a).values()}.isdisjoint(
                {loc[0] for loc in before.values()})  # one new quilt: new blob ids
        with machine(tmp_path / "b", url, state_dir=tmp_path / "sb") as b:
            b.pull(head_a)
            b.remember("B's fact after the wipe")
            report = b.sync()
            assert report.errors == [], report.errors
            head_b = report.manifests["default"]
        assert len(_fresh(tmp_path, url, head_b)) == 5


def test_store_root_drops_a_clock_above_the_epoch_it_was_stored_in(tmp_path: Path) -> None:
    """The writer's side of SeenHead.stored_epoch: a root whose clock names epoch 40,
    stored by a network at epoch 1, is stored again without the clock (a root naming an
    epoch within the skew of its store answer's keeps it)."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False) as srv, \
            machine(tmp_path / "a", srv.url) as a:
        keys = a.keys_for("default")
        for claimed, kept in ((40, False), (3, True)):
            root = mf.root_record(manifest_id="manifest-x", seq=1, writer="w", parents=[],
                                  origins=[], created_at=time.time(), model_id=None,
                                  dim=None, count=0, entries=[], pages=[],
                                  clock={"epoch": claimed, "seen_at": time.time()})
            sealed, stored = store_root(a.walrus, keys, root, 1 << 20, None)
            assert stored.registered_epoch == 1
            opened = mf.parse_root(open_envelope(keys, sealed, expected_kind="manifest"))
            assert (opened.clock is not None) == kept


def test_no_manifest_while_what_a_reset_lost_is_not_stored_again(tmp_path: Path) -> None:
    """Stateful finding (sync through a 404 window right after a wipe): the reset was
    followed but storing the lost memories again failed (the read-back answered 404), and
    the manifest published anyway left them out as expired: a fresh restore of it got 0
    of 4. Now no manifest is published while they are not stored again
    (NetworkResetPending in the sync's errors); the next sync stores them and publishes."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        port, url = srv.port, srv.url
        with machine(tmp_path / "a", url, state_dir=tmp_path / "sa") as a:
            a.remember_many([f"fact {i}" for i in range(4)])
            a.sync()
            blobs = {loc[0] for loc in _locations(a).values()}
    with _wiped(tmp_path, port), LyingAggregator(url) as agg:
        with machine(tmp_path / "a", url, aggregator=agg.url, state_dir=tmp_path / "sa") as a:
            # the same bytes get the same blob id; a quilt reads back by patch
            agg.hide.update(dict.fromkeys([*blobs, "by-quilt-patch-id"], 0))
            report = a.sync()
            assert not report.manifests
            assert any("NetworkResetPending" in e for e in report.errors), report.errors
            agg.hide.clear()
            report = a.sync()
            assert report.errors == [] and report.renewed == 4, report
            head = report.manifests["default"]
        assert len(_fresh(tmp_path, url, head)) == 4
