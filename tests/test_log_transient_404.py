"""A 404 for a head's manifest is "not yet / not here" until the head's own end epoch has
passed (issue 23 item 1): a lagging aggregator must never get a head recorded as merged
without its content. Each scenario runs over relayer_mock over loopback HTTP with its
admin routes off (as on real Walrus) and an aggregator proxy that answers 404 for
chosen blob ids while the test says so."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import walrus_mem._log.merging as log_merging
from relayer_mock.server import RelayerServer
from tests.helpers_log import Interrupt, LyingAggregator, kill_after, live, machine
from walrus_mem._log.heads import HeadRef, SeenHead, SeenHeads
from walrus_mem.errors import InvalidHead


@pytest.fixture
def net(tmp_path: Path) -> Iterator[tuple[RelayerServer, LyingAggregator]]:
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False) as srv, \
            LyingAggregator(srv.url) as agg:
        yield srv, agg


def _blob(head: str) -> str:
    return head.split(".")[0]


def test_a_backup_restored_on_the_same_home_waits_for_its_lagging_newer_head(
        tmp_path: Path, net: tuple[RelayerServer, LyingAggregator]) -> None:
    """The issue's run: backup restored, the aggregator answers 404 for the newer head
    H2: sync published seq 3 naming H2 as parent without its 10 memories; the machine
    kept 11 of 21 and `pull H2` was refused. Now nothing is published that names H2
    before its content is in, and the next sync after the lag takes it in."""
    srv, agg = net
    data, state = tmp_path / "a", tmp_path / "state"

    def a():  # one machine, one HOME (state dir), reads through the proxy
        return machine(data, srv.url, aggregator=agg.url, state_dir=state)

    with a() as m:
        m.remember_many([f"first batch fact {i}" for i in range(11)])
        m.sync()
    shutil.copytree(data, tmp_path / "backup")
    with a() as m:
        m.remember_many([f"second batch fact {i}" for i in range(10)])
        h2 = m.sync().manifests["default"]
    shutil.rmtree(data)
    shutil.copytree(tmp_path / "backup", data)
    agg.hide[_blob(h2)] = 0  # lagging: 404 for H2 until further notice
    with a() as m:
        m.remember("written after the backup was restored")
        report = m.sync()
        assert "default" not in report.manifests  # nothing published without H2
        assert any(str(h2) in s and "BlobNotFound" in s for s in report.skipped_heads)
        assert any("StaleDataDir" in e for e in report.errors)
        assert agg.not_found
        assert HeadRef.parse(h2) not in m._log.merged("default")
        del agg.hide[_blob(h2)]  # the aggregator caught up
        report = m.sync()
        assert report.errors == [] and len(live(m)) == 22
        head = report.manifests["default"]
        assert HeadRef.parse(h2) in [p for p in m._log.seen.get(
            "default", _blob(head)).parents]  # type: ignore[union-attr]
    with machine(tmp_path / "fresh", srv.url, state_dir=tmp_path / "fresh-state") as f:
        restored = f.restore("default", head)
        assert restored.complete and restored.restored == 22


def test_pull_of_the_real_head_after_a_transient_404_brings_its_memories(
        tmp_path: Path, net: tuple[RelayerServer, LyingAggregator]) -> None:
    """B learns A's head from the heads file; its manifest then answers 404 for a while.
    B's sync skips it (reported) and publishes its own manifest without naming it; once
    the aggregator serves it, `pull` of that head merges its memories (before: refused as
    StaleManifest, only restore(head, allow_stale=True) recovered)."""
    srv, agg = net
    heads = tmp_path / "shared" / "heads.txt"
    with machine(tmp_path / "a", srv.url, heads_file=heads, state_dir=tmp_path / "sa") as a:
        a.remember_many([f"machine A first fact {i}" for i in range(5)])
        h0 = a.sync().manifests["default"]
    with machine(tmp_path / "b", srv.url, aggregator=agg.url, heads_file=heads,
                 state_dir=tmp_path / "sb") as b:
        b.restore("default", h0)  # one history: B follows A
    with machine(tmp_path / "a", srv.url, heads_file=heads, state_dir=tmp_path / "sa") as a:
        a.remember_many([f"machine A fact {i}" for i in range(10)])
        ha = a.sync().manifests["default"]
    with machine(tmp_path / "b", srv.url, aggregator=agg.url, heads_file=heads,
                 state_dir=tmp_path / "sb") as b:
        b.remember("machine B fact")
        agg.hide[_blob(ha)] = 1  # served once (B learns the head), then 404
        report = b.sync()
        assert report.errors == []
        assert any(ha in s and "BlobNotFound" in s for s in report.skipped_heads)
        hb = report.manifests["default"]
        parents = b._log.seen.get("default", _blob(hb)).parents  # type: ignore[union-attr]
        assert HeadRef.parse(ha) not in parents
        assert len(live(b)) == 6
        del agg.hide[_blob(ha)]
        pulled = b.pull(ha)
        assert pulled.added == 10 and pulled.complete
        hb2 = b.sync().manifests["default"]
    with machine(tmp_path / "c", srv.url, state_dir=tmp_path / "sc") as c:
        assert c.restore("default", hb2).restored == 16


def test_a_resumed_restore_through_a_404ing_aggregator_stays_incomplete(
        tmp_path: Path, net: tuple[RelayerServer, LyingAggregator],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's run: a restore killed after 4 of 20 facts, resumed while the aggregator
    answers 404 for the head, reported complete with 0 missing and kept 4 of 20. Now the
    resume reports the head unread, stays incomplete and keeps the restore mark (sync
    still refuses to publish), and the next resume gets all 20."""
    srv, agg = net
    monkeypatch.setattr(log_merging, "RESTORE_CHUNK", 4)
    with machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa") as a:
        a.remember_many([f"restored fact {i}" for i in range(20)])
        head = a.sync().manifests["default"]
    with machine(tmp_path / "b", srv.url, aggregator=agg.url, state_dir=tmp_path / "sb") as b:
        with pytest.raises(Interrupt):
            b.restore("default", head, progress=kill_after(4))
        partial = len(live(b))
        assert partial < 20
        agg.hide[_blob(head)] = 0
        report = b.restore("default")
        assert not report.complete
        assert any(head in s for s in report.skipped_heads)
        assert len(live(b)) == partial
        assert b._log.tables.restoring("default") is not None  # the mark is kept
        assert any("interrupted" in e for e in b.sync().errors)
        del agg.hide[_blob(head)]
        report = b.restore("default")
        assert report.complete and len(live(b)) == 20


def test_a_head_past_its_end_epoch_is_still_recorded_gone(tmp_path: Path) -> None:
    """What a 404 may still prove: a seen head whose end epoch the network has passed is
    recorded as merged (named as a parent, reported skipped) rather than block every sync
    for good, as before. Its end epoch is known here from its root (``ends_by``, sealed
    in by A); "passed" is what B's own store answers say."""
    heads = tmp_path / "shared" / "heads.txt"
    # The relayer's clock moves only when told (advance_epoch): with a wall-clock epoch of
    # 1 s a loaded machine let A's head expire before B's first read.
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       epoch_duration=None) as srv, LyingAggregator(srv.url) as agg:
        with machine(tmp_path / "a", srv.url, heads_file=heads, state_dir=tmp_path / "sa",
                     epochs=1, epoch_seconds=1.0) as a:
            a.remember("a fact whose manifest expires")
            ha = a.sync().manifests["default"]
        with machine(tmp_path / "b", srv.url, aggregator=agg.url, heads_file=heads,
                     state_dir=tmp_path / "sb", epochs=30, epoch_seconds=1.0) as b:
            b.remember("machine B fact")
            agg.hide[_blob(ha)] = 1  # B reads the root once, then it is gone
            report = b.sync()
            assert any(ha in s and "not merged" in s for s in report.skipped_heads)
            bound = b._log.seen.end_bound("default", _blob(ha))[0]
            assert bound is not None
            by = bound + 1 - srv.relayer.store.current_epoch()
            time.sleep(by * 1.0 + 0.2)  # B's epoch guard: epochs last at least epoch_seconds
            srv.relayer.store.advance_epoch(by)
            b.remember("written once the head expired")  # a store answer names the epoch
            report = b.sync()
            assert any(ha in s and "recorded as a parent" in s for s in report.skipped_heads)
            head = report.manifests["default"]
            parents = b._log.seen.get("default", _blob(head)).parents  # type: ignore[union-attr]
            assert HeadRef.parse(ha) in parents
            assert b._log.seen.is_gone("default", _blob(ha))


def test_a_head_taken_as_gone_is_merged_by_a_pull_once_it_is_served(
        tmp_path: Path, net: tuple[RelayerServer, LyingAggregator]) -> None:
    """Should the proof have been wrong (a bound too low: someone extended the blob, a
    publisher lied about the epoch), the head is not lost for good: a pull of it merges
    its content, though the state already names it as a parent."""
    srv, agg = net
    heads = tmp_path / "shared" / "heads.txt"
    with machine(tmp_path / "a", srv.url, heads_file=heads, state_dir=tmp_path / "sa") as a:
        a.remember_many([f"machine A fact {i}" for i in range(3)])
        ha = a.sync().manifests["default"]
    with machine(tmp_path / "b", srv.url, aggregator=agg.url, heads_file=heads,
                 state_dir=tmp_path / "sb") as b:
        b.remember("machine B fact")
        ref = HeadRef.parse(ha)
        b._log.seen.add("default", SeenHead(ref, "", (), (ref.blob_id,), end_epoch=0))
        agg.hide[ref.blob_id] = 0
        report = b.sync()
        assert any(ha in s and "recorded as a parent" in s for s in report.skipped_heads)
        assert b._log.seen.is_gone("default", ref.blob_id) and len(live(b)) == 1
        del agg.hide[ref.blob_id]
        pulled = b.pull(ha)
        assert pulled.added == 3 and not b._log.seen.is_gone("default", ref.blob_id)


def test_a_mistyped_digest_blames_the_reference_not_the_aggregator(
        tmp_path: Path, net: tuple[RelayerServer, LyingAggregator]) -> None:
    """Issue 23's side note: every aggregator serves the manifest at that blob id, signed
    by this namespace's key and of the seq the reference names, but the reference's digest
    differs: the reference is wrong (InvalidHead naming the head that blob holds), not the
    aggregator (HeadMismatch)."""
    srv, _ = net
    with machine(tmp_path / "a", srv.url, state_dir=tmp_path / "sa") as a:
        a.remember("a fact")
        head = a.sync().manifests["default"]
    bad = head[:-1] + ("0" if head[-1] != "0" else "1")
    wrong_seq = head.replace(".1.", ".2.")
    with machine(tmp_path / "b", srv.url, state_dir=tmp_path / "sb") as b:
        with pytest.raises(InvalidHead, match="mistyped") as caught:
            b.restore("default", bad)
        assert head in str(caught.value)
        with pytest.raises(InvalidHead, match="seq"):
            b.restore("default", wrong_seq)
        assert b.restore("default", head).restored == 1


def test_an_old_heads_store_opens_and_learns_end_epochs(tmp_path: Path) -> None:
    """heads.sqlite3 from before end epochs were recorded (no end_epoch / gone_at
    columns) opens as is; new rows carry the end epoch."""
    import sqlite3

    path = tmp_path / "heads.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE heads (namespace TEXT NOT NULL, blob_id TEXT NOT NULL, "
        "seq INTEGER NOT NULL, digest TEXT NOT NULL, writer TEXT NOT NULL, parents TEXT NOT "
        "NULL, origins TEXT NOT NULL, seen_at REAL NOT NULL, PRIMARY KEY (namespace, blob_id));"
        "CREATE TABLE edges (namespace TEXT NOT NULL, child TEXT NOT NULL, "
        "parent TEXT NOT NULL, PRIMARY KEY (namespace, child, parent));"
        f"INSERT INTO heads VALUES ('ns', 'old', 1, '{'ab' * 32}', 'w', '[]', '[]', 5.0);")
    conn.commit()
    conn.close()
    store = SeenHeads(path)
    try:
        assert store.get("ns", "old") is not None
        assert store.end_bound("ns", "old") == (None, 5.0)
        ref = HeadRef(1, "new", "cd" * 32)
        store.add("ns", SeenHead(ref, "w", (), ("new",), end_epoch=9))
        store.add("ns", SeenHead(ref, "w", (), ("new",), end_epoch=12))  # a looser bound
        assert store.end_bound("ns", "new")[0] == 9
    finally:
        store.close()
