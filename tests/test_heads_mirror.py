"""The per-user seen-heads mirror (walrus_mem._log.heads_mirror): a whole data dir restored
from a backup (heads.sqlite3 rolled back with it) must not publish a manifest that
forks its own history and drops what it had published (docs/sync.md)."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import MOCK_ADMIN_TOKEN, live, machine
from walrus_mem import Memory, Settings
from walrus_mem._cli.doctor import _check_seen_heads_mirror
from walrus_mem._log.heads import HeadRef
from walrus_mem._log.heads_mirror import MIRROR_FILE, default_state_dir
from walrus_mem._log.namespace_log import NamespaceLog
from walrus_mem.errors import StaleDataDir


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def restore_in_place(backup: Path, data_dir: Path) -> None:
    shutil.rmtree(data_dir)
    shutil.copytree(backup, data_dir)


def test_tests_use_a_state_dir_of_their_own(tmp_path: Path) -> None:
    assert Settings(config_file=None).state_dir == tmp_path / "walrus-state"
    assert default_state_dir() == tmp_path / "xdg-state" / "walrus-mem"


def test_whole_data_dir_restored_from_a_backup_merges_before_publishing(
        tmp_path: Path, server) -> None:
    a_dir = tmp_path / "a"
    with machine(a_dir, server.url) as a:
        a.remember_many([f"acknowledged fact {i}" for i in range(100)], namespace="bk")
        a.sync()
    shutil.copytree(a_dir, tmp_path / "backup")
    with machine(a_dir, server.url) as a:
        a.remember_many([f"later fact {i}" for i in range(100)], namespace="bk")
        h2 = HeadRef.parse(a.sync().manifests["bk"])
    restore_in_place(tmp_path / "backup", a_dir)  # heads.sqlite3 rolled back with it
    with machine(a_dir, server.url) as a:
        assert a.stats("bk").memories == 100
        assert a._log.rolled_back == {"bk": [h2]}
        found = {c.name: c for c in _check_seen_heads_mirror(a)}
        assert found["heads bk"].status == "warn" and "sync" in found["heads bk"].fix
        a.remember_many([f"after the backup {i}" for i in range(10)], namespace="bk")
        report = a.sync()
        assert not report.errors and report.pulled["bk"].added == 100
        h3 = HeadRef.parse(report.manifests["bk"])
        assert h3.seq == h2.seq + 1  # no second manifest with h2's seq
        assert a._log.seen.get("bk", h3.blob_id).parents == (h2,)
    with machine(tmp_path / "fresh", server.url) as fresh:
        result = fresh.restore("bk", str(h3))
        assert result.restored == 210 and result.complete


def test_a_backup_older_than_the_heads_store_is_recognised_by_its_path(
        tmp_path: Path, server) -> None:
    a_dir = tmp_path / "a"
    with machine(a_dir, server.url) as a:
        a.remember_many([f"unsynced {i}" for i in range(5)], namespace="old")
    assert not (a_dir / "heads.sqlite3").exists()
    shutil.copytree(a_dir, tmp_path / "backup")
    with machine(a_dir, server.url) as a:
        a.remember_many([f"synced later {i}" for i in range(7)], namespace="old")
        h1 = HeadRef.parse(a.sync().manifests["old"])
    restore_in_place(tmp_path / "backup", a_dir)
    with machine(a_dir, server.url) as a:
        writer = a._log.seen.writer_id()
        report = a.sync()
        assert not report.errors and report.pulled["old"].added == 7
        h2 = HeadRef.parse(report.manifests["old"])
        assert h2.seq == h1.seq + 1 and len(live(a, "old")) == 12
        assert a._log.seen.get("old", h1.blob_id).writer == writer  # one writer, one history


def test_mirror_is_owner_only(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        a.remember("a fact", namespace="perm")
        a.sync()
    state = tmp_path / "walrus-state"
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / MIRROR_FILE).st_mode) == 0o600


def test_unwritable_state_dir_warns_and_continues(tmp_path: Path, server,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING, logger="walrus_mem._log.heads_mirror"), \
            machine(tmp_path / "a", server.url, state_dir=blocker / "state") as a:
        a.remember("still works", namespace="nw")
        report = a.sync()
        assert not report.errors and "nw" in report.manifests
        assert a._log.seen.mirror is not None and a._log.seen.mirror.disabled
        found = {c.name: c for c in _check_seen_heads_mirror(a)}
        assert found["heads mirror"].status == "warn"
    with machine(tmp_path / "b", server.url, state_dir=blocker / "state") as b:
        # doctor's probe names it before anything was written
        assert {c.name for c in _check_seen_heads_mirror(b)} == {"heads mirror"}
    warnings = [r.getMessage() for r in caplog.records if "mirror" in r.getMessage()]
    assert len(warnings) == 1 and "own heads store only" in warnings[0]  # once per process


def test_a_rolled_back_data_dir_never_reuses_its_own_seq(tmp_path: Path, server,
                                                         monkeypatch) -> None:
    """The last line of defence: if the forgotten head is somehow not merged first, the
    manifest that would reuse this writer's seq is refused, nothing published."""
    a_dir = tmp_path / "a"
    with machine(a_dir, server.url) as a:
        a.remember("base", namespace="eq")
        a.sync()
    shutil.copytree(a_dir, tmp_path / "backup")
    with machine(a_dir, server.url) as a:
        a.remember("newer", namespace="eq")
        h2 = HeadRef.parse(a.sync().manifests["eq"])
    restore_in_place(tmp_path / "backup", a_dir)
    monkeypatch.setattr(NamespaceLog, "unmerged", lambda self, ns, keys: [])
    with machine(a_dir, server.url) as a:
        a.remember("after the backup", namespace="eq")
        with pytest.raises(StaleDataDir) as err:
            a._publish_manifest("eq")
        assert err.value.expected_seq == h2.seq
        assert [h.ref for h in a._log.seen.newest("eq")] == [h2]


def test_sync_through_a_heads_file_names_an_equivocation(tmp_path: Path, server) -> None:
    """The backup restored on another machine (no mirror there) forks; a machine that
    merged the fork and then finds the other head in the heads file names the pair."""
    shared = tmp_path / "shared-heads.txt"
    a_dir = tmp_path / "a"
    with machine(a_dir, server.url, heads_file=shared) as a:
        a.remember("base", namespace="hf")
        a.sync()
    shutil.copytree(a_dir, tmp_path / "copy")
    with machine(a_dir, server.url, heads_file=shared) as a:
        a.remember("newer on A", namespace="hf")
        h_new = a.sync().manifests["hf"]
    with machine(tmp_path / "copy", server.url, state_dir=tmp_path / "other-machine") as b:
        b.remember("written on the restored copy", namespace="hf")
        h_fork = b.sync().manifests["hf"]
    assert HeadRef.parse(h_fork).seq == HeadRef.parse(h_new).seq
    with machine(tmp_path / "c", server.url, heads_file=shared) as c:
        c.restore("hf", h_fork)
        report = c.sync()
        assert not report.errors
        pulled = report.pulled["hf"]
        assert len(pulled.equivocations) == 1 and h_new in pulled.equivocations[0]
        assert set(live(c, "hf").values()) == {
            "base", "newer on A", "written on the restored copy"}


def test_the_cli_names_an_equivocation(tmp_path: Path, server, monkeypatch) -> None:
    from tests.helpers_cli import TEST_MASTER_HEX, invoke

    a_dir = tmp_path / "a"
    with machine(a_dir, server.url) as a:
        a.remember("base", namespace="cq")
        a.sync()
    shutil.copytree(a_dir, tmp_path / "copy")
    with machine(a_dir, server.url) as a:
        a.remember("newer on A", namespace="cq")
        h_new = a.sync().manifests["cq"]
    with machine(tmp_path / "copy", server.url, state_dir=tmp_path / "other-machine") as b:
        b.remember("written on the restored copy", namespace="cq")
        h_fork = b.sync().manifests["cq"]
    for name, value in (("MASTER_KEY", TEST_MASTER_HEX), ("EMBEDDING_MODEL", "test-hash"),
                        ("PUBLISHER_URL", server.url), ("AGGREGATOR_URLS", server.url),
                        ("USE_KEYRING", "false")):
        monkeypatch.setenv(f"WALRUS_MEM_{name}", value)
    out = invoke(["--data-dir", str(tmp_path / "c"), "-n", "cq", "pull", h_new, h_fork]).stdout
    assert "equivocation: writer" in out and "seq 2" in out


def test_a_forgotten_head_whose_manifest_is_gone_does_not_block_sync(tmp_path: Path) -> None:
    """A backup older than its newer manifest's lifetime: that manifest expired. The data
    dir cannot merge it, but must neither stay unable to sync for good nor reuse its seq:
    it names it as a parent and says what it skipped. (Only past its end epoch: a 404
    before it is an aggregator lagging, tests/test_log_transient_404.py.)"""
    a_dir = tmp_path / "a"
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       epoch_duration=1.0) as srv:
        def a() -> Memory:  # 1-epoch manifests on a 1 s network: h2 expires in seconds
            return machine(a_dir, srv.url, epochs=1, epoch_seconds=1.0)

        with a() as m:
            m.remember("base", namespace="gn")
            m.sync()
        shutil.copytree(a_dir, tmp_path / "backup")
        with a() as m:
            m.remember("newer", namespace="gn")
            h2 = HeadRef.parse(m.sync().manifests["gn"])
            end = m._log.seen.end_bound("gn", h2.blob_id)[0]
        assert end is not None
        deadline = time.monotonic() + 30
        while srv.relayer.store.current_epoch() <= end:
            assert time.monotonic() < deadline, "relayer clock did not move"
            time.sleep(0.2)
        restore_in_place(tmp_path / "backup", a_dir)
        with a() as m:
            m.remember("after the backup", namespace="gn")
            report = m.sync()
            assert not report.errors
            assert [s for s in report.pulled["gn"].skipped if str(h2) in s and "gone" in s]
            h3 = HeadRef.parse(report.manifests["gn"])
            assert h3.seq == h2.seq + 1 and m._log.seen.get("gn", h3.blob_id).parents == (h2,)
            assert set(live(m, "gn").values()) == {"base", "after the backup"}
            assert m._log.seen.equivocations("gn") == []


def test_two_open_copies_of_one_data_dir_never_publish_the_same_seq(tmp_path: Path,
                                                                    server) -> None:
    """A data dir copied while both copies stay in use (one writer id): each publish
    first takes in what the other published, through the mirror."""
    with machine(tmp_path / "a", server.url) as a:
        a.remember("base", namespace="cp")
        a.sync()
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    with machine(tmp_path / "a", server.url) as a, \
            machine(tmp_path / "copy", server.url) as c:
        a.remember("on the original", namespace="cp")
        h_a = HeadRef.parse(a.sync().manifests["cp"])
        c.remember("on the copy", namespace="cp")
        report = c.sync()
        h_c = HeadRef.parse(report.manifests["cp"])
        assert h_c.seq == h_a.seq + 1 and report.pulled["cp"].added == 1
        assert set(live(c, "cp").values()) == {"base", "on the original", "on the copy"}


def test_a_forget_made_after_the_backup_survives_its_restore(tmp_path: Path, server) -> None:
    a_dir = tmp_path / "a"
    with machine(a_dir, server.url) as a:
        x = a.remember("my old locker code is 5150", namespace="fg")
        a.remember("a memory that stays", namespace="fg")
        a.sync()
    shutil.copytree(a_dir, tmp_path / "backup")
    with machine(a_dir, server.url) as a:
        assert a.forget(x.id, namespace="fg").manifest_blob_id is not None  # published
    restore_in_place(tmp_path / "backup", a_dir)
    with machine(a_dir, server.url) as a:
        assert x.id in live(a, "fg")  # the backup still holds it, until the next sync
        report = a.sync()
        assert not report.errors and report.pulled["fg"].forgotten == 1
        assert x.id not in live(a, "fg")
        head = a.stats("fg").manifest_blob_id  # the forget's own head: nothing new to publish
        assert head is not None and "fg" not in report.manifests
        _, entries = a._log.read("fg", head)
        assert {e.memory_id for e in entries if e.deleted} == {x.id}
        a.remember("written after the restore", namespace="fg")
        _, entries = a._log.read("fg", a.sync().manifests["fg"])
        assert x.id not in {e.memory_id for e in entries if not e.deleted}


def test_a_followed_network_change_outlives_a_rollback_of_the_data_dir(tmp_path: Path) -> None:
    """N10b: a change of network followed here is recorded in heads.sqlite3 and the
    mirror, so a data dir rolled back (with its heads store) to a backup from before the
    change still finds it, and by the same writer id only."""
    from walrus_mem._log.heads import SeenHeads
    from walrus_mem._log.heads_mirror import HeadsMirror

    state, data = tmp_path / "state", tmp_path / "data"
    data.mkdir()
    heads = SeenHeads(data / "heads.sqlite3", HeadsMirror(state, data))
    heads.writer_id()
    heads.close()  # checkpointed: the backup is the one file
    shutil.copy(data / "heads.sqlite3", tmp_path / "backup.sqlite3")
    heads = SeenHeads(data / "heads.sqlite3", HeadsMirror(state, data))
    assert heads.last_change() is None
    heads.record_change({"id": "c1", "at": 100.0, "to": 41, "kind": "lost", "seen_by": 90.0})
    heads.record_change({"id": "c2", "at": 200.0, "to": 42, "kind": "lost", "seen_by": 190.0})
    assert heads.last_change() == {"id": "c2", "at": 200.0, "to": 42, "kind": "lost",
                                   "seen_by": 190.0}
    heads.close()
    for suffix in ("", "-wal", "-shm"):
        (data / f"heads.sqlite3{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.sqlite3", data / "heads.sqlite3")  # rolled back
    rolled = SeenHeads(data / "heads.sqlite3", HeadsMirror(state, data))
    change = rolled.last_change()
    assert change is not None and change["id"] == "c2"
    rolled.close()
    other = SeenHeads(tmp_path / "other.sqlite3", HeadsMirror(state, tmp_path))
    other.writer_id()  # another data dir: another writer id, none of the first's changes
    assert other.last_change() is None
    other.close()
