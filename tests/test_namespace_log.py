"""The namespace log over loopback HTTP: head references, rollback, stale backups,
interrupted and wrong-key restores, page-cache damage, pull / merge (docs/sync.md)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import walrus_mem._log.manifest as mf
import walrus_mem._log.merging as log_merging
from relayer_mock.server import RelayerServer
from tests.helpers_log import (
    Interrupt,
    LyingAggregator,
    dir_snapshot,
    kill_after,
    live,
    machine,
)
from tests.helpers_memory import MOCK_ADMIN_TOKEN, OTHER_MASTER_HEX, make_settings
from walrus_mem._log.heads import HeadRef, HeadsFile
from walrus_mem.errors import (
    BlobNotFound,
    ForkedHead,
    InvalidHead,
    RestoreIncomplete,
    StaleManifest,
    WrongNamespace,
)
from walrus_mem.testing import HashEmbedder


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def head_of(mem, ns: str = "default") -> HeadRef:
    text = mem.stats(ns).manifest_blob_id
    assert text is not None
    return HeadRef.parse(text)


# -- head references ---------------------------------------------------------------------


def test_sync_reports_a_head_reference_that_binds_the_manifest(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        a.remember_many([f"fact {i}" for i in range(5)], namespace="ns1")
        head = a.sync().manifests["ns1"]
        ref = HeadRef.parse(head)
        assert a.stats("ns1").manifest_blob_id == head and ref.seq == 1
        raw = httpx.get(f"{server.url}/v1/blobs/{ref.blob_id}").content
        assert mf.sealed_digest(raw) == ref.digest
        a.remember("fact 5", namespace="ns1")
        second = HeadRef.parse(a.sync().manifests["ns1"])
        assert second.seq == 2
        _, entries = a._log.read("ns1", second)
        seen = a._log.seen.get("ns1", second.blob_id)
        assert seen is not None and seen.parents == (ref,)
        assert len([e for e in entries if not e.deleted]) == 6


def test_bare_blob_ids_only_when_seen_and_malformed_heads(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        a.remember("bare id fact", namespace="bare")
        head = HeadRef.parse(a.sync().manifests["bare"])
    with machine(tmp_path / "b", server.url) as b:
        with pytest.raises(InvalidHead, match="full head reference"):
            b.restore("bare", head.blob_id)
        for bad in ("x.y.z", f"{head.blob_id}.0.{head.digest}", f"{head.blob_id}.1.abc",
                    "a.b", "not a blob id!"):
            with pytest.raises(InvalidHead):
                b.restore("bare", bad)
        assert b.stats("bare").memories == 0
        assert b.restore("bare", str(head)).restored == 1
        assert b.restore("bare", head.blob_id).skipped == 1  # seen here now: accepted


def test_aggregator_serving_an_older_manifest_is_a_typed_error(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        first = a.remember_many([f"rollback fact {i}" for i in range(4)], namespace="rb")
        h1 = HeadRef.parse(a.sync().manifests["rb"])
        a.forget(first[0].id, namespace="rb")
        a.update(first[1].id, "rollback fact one, updated", namespace="rb")
        newer = a.remember("rollback fact added later", namespace="rb")
        h2 = HeadRef.parse(a.sync().manifests["rb"])
        assert h2.seq > h1.seq
        expected = live(a, "rb")
    with LyingAggregator(server.url) as proxy:
        proxy.swap[h2.blob_id] = h1.blob_id
        # A fresh machine, handed the newest head, reads through the lying aggregator.
        with machine(tmp_path / "fresh", server.url, aggregator=proxy.url,
                     read_deadline=0.5) as fresh:
            before = dir_snapshot(tmp_path / "fresh")
            with pytest.raises(StaleManifest) as info:
                fresh.restore("rb", str(h2))
            assert (info.value.served_seq, info.value.expected_seq) == (h1.seq, h2.seq)
            with pytest.raises(StaleManifest):
                fresh.pull(str(h2), namespace="rb")
            assert dir_snapshot(tmp_path / "fresh") == before
            assert fresh.stats("rb").memories == 0
        assert proxy.served
        # A machine that holds h1 already: pull of h2 fails the same way, nothing changes.
        with machine(tmp_path / "old", server.url) as old:
            old.restore("rb", str(h1))
            held = live(old, "rb")
        with machine(tmp_path / "old", server.url, aggregator=proxy.url,
                     read_deadline=0.5) as old:
            with pytest.raises(StaleManifest):
                old.pull([str(h2)], namespace="rb")
            assert live(old, "rb") == held and head_of(old, "rb") == h1
        proxy.swap.clear()
        with machine(tmp_path / "old", server.url, aggregator=proxy.url) as old:
            report = old.pull([str(h2)], namespace="rb")
            assert (report.added, report.updated, report.forgotten) == (1, 1, 1)
            assert live(old, "rb") == expected and newer.id in expected


def test_older_head_is_refused_unless_allowed(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        a.remember("old head fact", namespace="st")
        h1 = a.sync().manifests["st"]
        a.remember("newer head fact", namespace="st")
        h2 = a.sync().manifests["st"]
        with pytest.raises(StaleManifest, match="older"):
            a.pull(h1, namespace="st")
        assert a.pull(h1, namespace="st", allow_stale=True).up_to_date
        assert a.pull(h2, namespace="st").up_to_date
    with machine(tmp_path / "b", server.url) as b:
        b.restore("st", h2)
        with pytest.raises(StaleManifest):
            b.restore("st", h1)


def test_unrelated_history_is_refused_unless_allowed(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "c", server.url) as c:
        a.remember("started on a", namespace="un")
        c.remember("started on c", namespace="un")
        ha, hc = a.sync().manifests["un"], c.sync().manifests["un"]
        with pytest.raises(ForkedHead):
            c.pull(ha, namespace="un")
        assert set(live(c, "un").values()) == {"started on c"}
        assert c.pull(ha, namespace="un", allow_unrelated=True).added == 1
        merged = HeadRef.parse(c.sync().manifests["un"])
        assert merged.seq == 2
        assert a.pull(str(merged), namespace="un").added == 1  # now related: no flag needed
        assert live(a, "un") == live(c, "un")
        assert {HeadRef.parse(ha), HeadRef.parse(hc)} == set(
            c._log.seen.get("un", merged.blob_id).parents)


# -- never publish what forgets ----------------------------------------------------------


def test_stale_backup_merges_the_newer_head_before_publishing(tmp_path: Path, server) -> None:
    heads = tmp_path / "shared" / "heads.txt"
    a_dir = tmp_path / "a"
    with machine(a_dir, server.url, heads_file=heads) as a:
        a.remember_many([f"acknowledged fact {i}" for i in range(100)], namespace="bk")
        a.sync()
    backup = tmp_path / "backup"
    shutil.copytree(a_dir, backup)
    with machine(a_dir, server.url, heads_file=heads) as a:
        a.remember_many([f"later fact {i}" for i in range(100)], namespace="bk")
        h2 = HeadRef.parse(a.sync().manifests["bk"])
    assert [r for _, r in HeadsFile(heads).read("bk")] == [h2]
    shutil.rmtree(a_dir)
    shutil.copytree(backup, a_dir)  # the data dir is restored from the old backup
    with machine(a_dir, server.url, heads_file=heads) as a:
        assert a.stats("bk").memories == 100
        a.remember_many([f"after the backup {i}" for i in range(10)], namespace="bk")
        report = a.sync()
        assert report.pulled["bk"].added == 100 and not report.errors
        h3 = HeadRef.parse(report.manifests["bk"])
        assert h3.seq == h2.seq + 1
        assert a._log.seen.get("bk", h3.blob_id).parents == (h2,)
    with machine(tmp_path / "fresh", server.url) as fresh:
        result = fresh.restore("bk", str(h3))
        assert result.restored == 210 and result.complete


def test_stale_backup_without_heads_exchange_forks_and_merges_back(tmp_path: Path,
                                                                  server) -> None:
    a_dir = tmp_path / "a"
    with machine(a_dir, server.url) as a:
        a.remember_many([f"fork base {i}" for i in range(20)], namespace="fk")
        a.sync()
    shutil.copytree(a_dir, tmp_path / "backup")
    with machine(a_dir, server.url) as a:
        a.remember_many([f"fork newer {i}" for i in range(30)], namespace="fk")
        h_new = a.sync().manifests["fk"]
    # The backup restored on another machine (another user state dir: the seen-heads
    # mirror there knows nothing of h_new): nobody told it about h_new, a fork.
    with machine(tmp_path / "backup", server.url, state_dir=tmp_path / "elsewhere") as b:
        b.remember("fork from the backup", namespace="fk")
        h_fork = b.sync().manifests["fk"]
        assert HeadRef.parse(h_fork).seq == HeadRef.parse(h_new).seq
    with machine(tmp_path / "third", server.url) as third:
        report = third.pull([h_new, h_fork], namespace="fk")
        assert report.added == 51 and len(live(third, "fk")) == 51
        # one writer id, two manifests with one seq: named, and both merged
        assert len(report.equivocations) == 1
        assert h_new in report.equivocations[0] and h_fork in report.equivocations[0]
        merged = HeadRef.parse(third.sync().manifests["fk"])
        assert set(third._log.seen.get("fk", merged.blob_id).parents) == {
            HeadRef.parse(h_new), HeadRef.parse(h_fork)}
    with machine(tmp_path / "fourth", server.url) as fourth:  # one restore, then the other
        assert fourth.restore("fk", h_new).equivocations == []
        again = fourth.restore("fk", h_fork)
        assert len(again.equivocations) == 1 and len(live(fourth, "fk")) == 51


def test_interrupted_restore_is_marked_refuses_to_publish_and_resumes(tmp_path: Path, server,
                                                                      monkeypatch) -> None:
    monkeypatch.setattr(log_merging, "RESTORE_CHUNK", 40)
    with machine(tmp_path / "a", server.url) as a:
        a.remember_many([f"restore me {i}" for i in range(200)], namespace="ir")
        a.sync()  # (the 200th write already published the periodic manifest)
        head = str(head_of(a, "ir"))
    with machine(tmp_path / "b", server.url) as b:
        with pytest.raises(Interrupt):
            b.restore("ir", head, progress=kill_after(80))
        partial = b.stats("ir").memories
        assert 0 < partial < 200
    from walrus_mem._cli.doctor import check_local_store

    checks = {c.name: c for c in check_local_store(
        make_settings(tmp_path / "b", publisher_url=server.url, aggregator_urls=server.url),
        embedder=HashEmbedder(64))}
    assert checks["restore ir"].status == "fail" and "restore" in checks["restore ir"].fix
    with machine(tmp_path / "b", server.url) as b:  # the process restarts
        report = b.sync()
        assert not report.manifests and any("RestoreIncomplete" in e for e in report.errors)
        with pytest.raises(RestoreIncomplete):
            b._publish_manifest("ir")
        b.remember("written while incomplete", namespace="ir")
        assert "ir" not in b.sync().manifests
        calls: list[tuple[int, int]] = []
        result = b.restore("ir", progress=lambda d, t: calls.append((d, t)))
        assert result.resumed and result.complete and result.restored == 200 - partial
        assert calls[0] == (partial, 200) and calls[-1] == (200, 200)
        assert b.stats("ir").memories == 201
        new_head = HeadRef.parse(b.sync().manifests["ir"])
        assert b._log.seen.get("ir", new_head.blob_id).parents == (HeadRef.parse(head),)
    with machine(tmp_path / "c", server.url) as c:
        assert c.restore("ir", str(new_head)).restored == 201


def test_restore_with_the_wrong_key_leaves_the_data_dir_as_it_was(tmp_path: Path,
                                                                  server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        a.remember("keyed fact", namespace="wk")
        head = a.sync().manifests["wk"]
    with machine(tmp_path / "b", server.url, key=OTHER_MASTER_HEX) as wrong:
        wrong.remember("something else entirely", namespace="mine")
        before = dir_snapshot(tmp_path / "b")
        with pytest.raises(WrongNamespace):
            wrong.restore("wk", head)
        assert dir_snapshot(tmp_path / "b") == before
        assert "wk" not in wrong.namespaces()
    with machine(tmp_path / "b", server.url) as right:  # the right key is not refused now
        assert right.restore("wk", head).restored == 1


def test_catalog_loss_restores_from_the_heads_this_data_dir_remembers(tmp_path: Path,
                                                                      server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        a.remember_many([f"survives catalog loss {i}" for i in range(12)], namespace="cl")
        head = a.sync().manifests["cl"]
    for name in ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
        (tmp_path / "a" / name).unlink(missing_ok=True)
    with machine(tmp_path / "a", server.url) as a:
        report = a.restore("cl")  # no head given: heads.sqlite3 remembers it
        assert report.manifest_blob_id == head and report.restored == 12


def test_corrupt_page_cache_is_checked_before_reuse(tmp_path: Path, server, monkeypatch) -> None:
    monkeypatch.setattr(mf, "PAGE_TARGET", 25)
    monkeypatch.setattr(mf, "INLINE_MAX", 100)
    monkeypatch.setattr(mf, "CHANGED_INLINE_MAX", 0)
    with machine(tmp_path / "a", server.url) as a:
        a.remember_many([f"paged fact {i}" for i in range(300)], namespace="pc")
        a.sync()
        pages = a._catalog.query(
            "SELECT digest, blob_id, patch_id FROM manifest_pages WHERE namespace = 'pc' "
            "ORDER BY digest")
        assert len(pages) >= 4
        # A wrong row: the first page's cache entry points at the second page.
        with a._catalog.write() as c:
            c.execute("UPDATE manifest_pages SET blob_id = ?, patch_id = ? WHERE digest = ?",
                      (pages[1]["blob_id"], pages[1]["patch_id"], pages[0]["digest"]))
    with machine(tmp_path / "a", server.url) as a:  # a new process: nothing verified yet
        a.remember("one more fact", namespace="pc")
        head = a.sync().manifests["pc"]
    with machine(tmp_path / "b", server.url) as b:
        report = b.restore("pc", head)
        assert report.restored == 301 and not report.failed


def test_missing_blobs_are_reported_not_fatal(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        gone = a.remember("this blob will vanish", namespace="mb")
        a.remember("this one stays", namespace="mb")
        head = a.sync().manifests["mb"]
    deleted = httpx.delete(f"{server.url}/_mock/blobs/{gone.blob_id}",
                           headers=server.admin_headers)
    assert deleted.status_code in (200, 204)
    with machine(tmp_path / "b", server.url) as b:
        report = b.restore("mb", head)
        assert report.missing == [(gone.id, gone.blob_id)] and not report.failed
        assert report.restored == 1 and report.complete


# -- pull / merge --------------------------------------------------------------------------


def test_two_machines_converge_with_one_conflict_rule(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        base = a.remember_many([f"shared fact {i}" for i in range(6)], namespace="cv")
        b.restore("cv", a.sync().manifests["cv"])
        # Concurrent edits: both update fact 0, A forgets fact 1 while B updates it,
        # each adds memories; B updates fact 2 twice.
        a.update(base[0].id, "fact zero as A wrote it", namespace="cv")
        b.update(base[0].id, "fact zero as B wrote it", namespace="cv")
        a.forget(base[1].id, namespace="cv")
        b.update(base[1].id, "fact one, edited on B", namespace="cv")
        b.update(base[2].id, "fact two, B first edit", namespace="cv")
        b.update(base[2].id, "fact two, B second edit", namespace="cv")
        a.update(base[2].id, "fact two, A single edit", namespace="cv")
        a.remember("only on A", namespace="cv")
        b.remember("only on B", namespace="cv")
        ha, hb = a.sync().manifests["cv"], b.sync().manifests["cv"]
        ra = a.pull(hb, namespace="cv")
        rb = b.pull(ha, namespace="cv")
        assert live(a, "cv") == live(b, "cv")
        assert base[1].id not in live(a, "cv")  # the forget won over B's edit
        assert live(a, "cv")[base[2].id] == "fact two, B second edit"  # higher version
        winner = live(a, "cv")[base[0].id]
        assert winner in ("fact zero as A wrote it", "fact zero as B wrote it")
        # fact 0 (same version) and fact 2 (B's v3 and A's v2 are concurrent) conflict
        assert ra.conflicts == 2 and rb.conflicts == 2 and rb.forgotten == 1
        for m in (a, b):
            assert ("CONFLICT", "fact two, A single edit") in [
                (h.event, h.text) for h in m.history(base[2].id, namespace="cv")]
        loser = ({"fact zero as A wrote it", "fact zero as B wrote it"} - {winner}).pop()
        for m in (a, b):
            events = [(h.event, h.text) for h in m.history(base[0].id, namespace="cv")]
            assert ("CONFLICT", loser) in events
        # Both publish merged manifests; they list the same live set, and the
        # forgotten memory only as a tombstone.
        ha2, hb2 = a.sync().manifests["cv"], b.sync().manifests["cv"]
        for head, m in ((ha2, a), (hb2, b)):
            _, entries = m._log.read("cv", head)
            assert {e.memory_id for e in entries if not e.deleted} == set(live(a, "cv"))
            assert base[1].id in {e.memory_id for e in entries if e.deleted}
        a.pull(hb2, namespace="cv")
        b.pull(ha2, namespace="cv")
        assert live(a, "cv") == live(b, "cv")
        final = live(a, "cv")
    with machine(tmp_path / "c", server.url) as c:  # a third machine, from both heads
        c.pull([ha2, hb2], namespace="cv")
        assert live(c, "cv") == final


def test_same_text_on_two_machines_keeps_both_memories(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        a.remember("seed", namespace="dd")
        b.restore("dd", a.sync().manifests["dd"])
        x = a.remember("the same fact typed twice", namespace="dd")
        y = b.remember("the same fact typed twice", namespace="dd")
        assert x.id != y.id
        ra = a.pull(b.sync().manifests["dd"], namespace="dd")
        rb = b.pull(a.sync().manifests["dd"], namespace="dd")
        # twins: neither is forgotten for the other (docs/sync.md), recall shows one
        assert (ra.deduplicated, rb.deduplicated) == (1, 1)
        assert (ra.forgotten, rb.forgotten, ra.added, rb.added) == (0, 0, 1, 1)
        assert live(a, "dd") == live(b, "dd") and {x.id, y.id} <= set(live(a, "dd"))
        hits = a.recall("the same fact typed twice", namespace="dd", k=5)
        assert [h.record.text for h in hits].count("the same fact typed twice") == 1
        # a re-statement moves the plain holder to a new id (restate.py); the twin stays
        again = a.remember("the same fact typed twice", namespace="dd")
        assert again.deduplicated and again.id not in {x.id, y.id}
        twin = {x.id, y.id} & set(live(a, "dd"))
        assert len(twin) == 1 and len(live(a, "dd")) == 3
        # the plain holder forgotten: the twin takes its place for remember's dedupe
        a.forget(again.id, namespace="dd")
        last = a.remember("the same fact typed twice", namespace="dd")
        assert last.deduplicated and twin.isdisjoint(live(a, "dd")) and last.id in live(a, "dd")


def test_heads_file_exchanges_heads_through_sync(tmp_path: Path, server) -> None:
    heads = tmp_path / "synced-folder" / "walrus-mem-heads.txt"
    with machine(tmp_path / "a", server.url, heads_file=heads) as a, \
            machine(tmp_path / "b", server.url, heads_file=heads) as b:
        a.remember("written on a", namespace="hf")
        a.sync()
        assert b.pull(namespace="hf").added == 1  # heads from the file
        b.remember("written on b", namespace="hf")
        hb = HeadRef.parse(b.sync().manifests["hf"])
        assert [r for _, r in HeadsFile(heads).read("hf")] == [hb]  # a's head superseded
        report = a.sync()
        assert report.pulled["hf"].added == 1 and "hf" not in report.manifests
        assert live(a, "hf") == live(b, "hf")


def test_two_first_manifests_shared_through_the_heads_file_converge(tmp_path: Path,
                                                                    server) -> None:
    """Two writers that each published a first manifest before seeing the other's (they
    synced at the same moment, or a line was lost) merge through the heads file; an
    explicit pull of such a head still needs allow_unrelated."""
    heads = tmp_path / "synced-folder" / "walrus-mem-heads.txt"
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "c", server.url) as c:
        a.remember("first written on a", namespace="tr")
        c.remember("first written on c", namespace="tr")
        ha, hc = a.sync().manifests["tr"], c.sync().manifests["tr"]
        with pytest.raises(ForkedHead):
            c.pull(ha, namespace="tr")
    heads.parent.mkdir(parents=True)
    heads.write_text(f"tr {ha}\ntr {hc}\n", encoding="utf-8")
    with machine(tmp_path / "a", server.url, heads_file=heads) as a, \
            machine(tmp_path / "c", server.url, heads_file=heads) as c:
        report = a.sync()
        assert report.errors == [] and report.pulled["tr"].added == 1
        assert c.sync().errors == []
        assert set(live(a, "tr").values()) == {"first written on a", "first written on c"}
        assert live(a, "tr") == live(c, "tr")


# -- a real kill, and the embedded relayer ------------------------------------------------

_KILLER = """
import os, signal, sys
sys.path.insert(0, {root!r})
import walrus_mem._log.merging as log_merging
log_merging.RESTORE_CHUNK = 20
from tests.helpers_log import machine
mem = machine(__import__("pathlib").Path({data!r}), {url!r})
def progress(done, total):
    if done >= 60:
        os.kill(os.getpid(), signal.SIGKILL)   # no cleanup, no finally blocks
mem.restore("sk", {head!r}, progress=progress)
"""


def test_restore_killed_with_sigkill_resumes(tmp_path: Path, server) -> None:
    import subprocess
    import sys

    with machine(tmp_path / "a", server.url) as a:
        a.remember_many([f"killed restore fact {i}" for i in range(150)], namespace="sk")
        head = a.sync().manifests["sk"]
    root = str(Path(__file__).resolve().parent.parent)
    script = _KILLER.format(root=root, data=str(tmp_path / "b"), url=server.url, head=head)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    with machine(tmp_path / "b", server.url) as b:
        done = b.stats("sk").memories
        assert 0 < done < 150
        assert "sk" not in b.sync().manifests  # marked: no manifest from a partial state
        calls: list[tuple[int, int]] = []
        report = b.restore("sk", progress=lambda d, t: calls.append((d, t)))
        assert report.resumed and report.complete and calls[0] == (done, 150)
        assert b.stats("sk").memories == 150


def test_pull_and_rollback_detection_on_the_embedded_relayer(tmp_path: Path) -> None:
    from relayer_mock.embedded import EmbeddedRelayer
    from tests.helpers_memory import MASTER_HEX, make_settings
    from walrus_mem import Memory
    from walrus_mem.testing import HashEmbedder
    from walrus_mem.walrus import WalrusClient

    relayer = EmbeddedRelayer(tmp_path / "shared-walrus")
    base = relayer.base_url

    def open_on(name: str) -> Memory:
        client = WalrusClient(base, [base], transport=relayer.transport, read_deadline=1.0)
        return Memory(make_settings(tmp_path / name), embedder=HashEmbedder(64),
                      master_key=MASTER_HEX, walrus=client)

    try:
        with open_on("a") as a, open_on("b") as b:
            x = a.remember("embedded shared fact", namespace="em")
            h1 = a.sync().manifests["em"]
            b.restore("em", h1)
            a.forget(x.id, namespace="em")
            b.remember("embedded fact from b", namespace="em")
            h2 = a.stats("em").manifest_blob_id
            assert h2 is not None and HeadRef.parse(h2).seq == 2
            hb = b.sync().manifests["em"]
            assert b.pull(h2, namespace="em").forgotten == 1
            assert a.pull(hb, namespace="em").added == 1
            assert live(a, "em") == live(b, "em") and x.id not in live(a, "em")
            with pytest.raises(StaleManifest):
                a.pull(h1, namespace="em")
    finally:
        relayer.close()


def test_losing_heads_sqlite_keeps_the_chain(tmp_path: Path, server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        a.remember("before the heads store was lost", namespace="hl")
        h1 = HeadRef.parse(a.sync().manifests["hl"])
    with machine(tmp_path / "b", server.url) as b:
        b.restore("hl", str(h1))
    for p in (tmp_path / "a").glob("heads.sqlite3*"):
        p.unlink()
    with machine(tmp_path / "a", server.url) as a:
        a.remember("after it was lost", namespace="hl")
        h2 = HeadRef.parse(a.sync().manifests["hl"])
        assert a._log.seen.get("hl", h2.blob_id).parents == (h1,)  # from the catalog
    with machine(tmp_path / "b", server.url) as b:  # same history: no ForkedHead
        assert b.pull(str(h2), namespace="hl").added == 1


def test_pulled_forget_deletes_this_machines_blobs_of_the_memory(tmp_path: Path,
                                                                  server) -> None:
    """B updated X before A's forget arrived: pulling the forget deletes B's version
    blob of X (docs/forget.md), and nothing of the memories still live."""
    url, ns = server.url, "fp"
    with machine(tmp_path / "a", url) as a:
        x = a.remember("bank pin hint original", namespace=ns)
        y = a.remember("a memory that stays", namespace=ns)
        a.sync(ns)
        base = head_of(a, ns)
    with machine(tmp_path / "b", url) as b:
        b.restore(ns, str(base))
        b.update(x.id, "bank pin hint changed on B", namespace=ns)
        b.sync(ns)
        b_blob = b.get(x.id, namespace=ns).blob_id
        assert b_blob is not None
        b.walrus.read_blob(b_blob, deadline=2.0)
    with machine(tmp_path / "a", url) as a:
        a.forget(x.id, namespace=ns)
        a.sync(ns)
        forgotten_head = head_of(a, ns)
    with machine(tmp_path / "b", url) as b:
        report = b.pull(str(forgotten_head), namespace=ns)
        assert report.forgotten == 1 and x.id not in live(b, ns)
        assert b_blob in report.deleted_blobs
        assert httpx.get(f"{url}/v1/blobs/{b_blob}").status_code == 404
        with pytest.raises(BlobNotFound):
            b.walrus.read_blob(b_blob, deadline=2.0)
        y_blob = b.get(y.id, namespace=ns).blob_id
        assert y_blob is not None and y_blob not in report.deleted_blobs
        assert b.walrus.read_blob(y_blob, deadline=2.0)
        assert live(b, ns) == {y.id: "a memory that stays"}


def test_the_same_update_on_two_machines_is_not_a_conflict(tmp_path: Path, server) -> None:
    """Identical edits (text and metadata, same version) sealed on two machines differ
    only in their nonces: merged without CONFLICT rows, converging on one version."""
    with machine(tmp_path / "a", server.url) as a, machine(tmp_path / "b", server.url) as b:
        x, y = a.remember_many(["same update original", "edited apart"], namespace="su")
        b.restore("su", a.sync().manifests["su"])
        for m in (a, b):
            m.update(x.id, "same update NEW", metadata={"k": 1}, namespace="su")
        a.update(y.id, "edited apart on A", namespace="su")  # a real conflict beside it
        b.update(y.id, "edited apart on B", namespace="su")
        ha, hb = a.sync().manifests["su"], b.sync().manifests["su"]
        ra, rb = a.pull(hb, namespace="su"), b.pull(ha, namespace="su")
        assert ra.conflicts == 1 and rb.conflicts == 1  # only y
        assert live(a, "su") == live(b, "su")
        assert live(a, "su")[x.id] == "same update NEW"
        for m in (a, b):
            events = [h.event for h in m.history(x.id, namespace="su")]
            assert "CONFLICT" not in events
            assert m.get(x.id, namespace="su").metadata == {"k": 1}
        # one version on both: the next exchange changes nothing
        ha2, hb2 = a.sync().manifests["su"], b.sync().manifests["su"]
        assert a.get(x.id, namespace="su").blob_id == b.get(x.id, namespace="su").blob_id
        again = a.pull(hb2, namespace="su")
        assert again.updated == 0 and again.conflicts == 0
        assert b.pull(ha2, namespace="su").conflicts == 0


def test_pulled_forget_keeps_a_quilt_that_holds_live_memories(tmp_path: Path,
                                                              server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        x, y = a.remember_many(["quilt member forgotten", "quilt member kept"],
                               namespace="fq").records
        quilt = x.blob_id
        assert quilt is not None and y.blob_id == quilt
        base = a.sync().manifests["fq"]
    with machine(tmp_path / "b", server.url) as b:
        b.restore("fq", base)
    with machine(tmp_path / "a", server.url) as a:
        a.forget(x.id, namespace="fq")  # A keeps the quilt too: y lives in it
        a.sync("fq")
        head = str(head_of(a, "fq"))
    with machine(tmp_path / "b", server.url) as b:
        report = b.pull(head, namespace="fq")
        assert report.forgotten == 1 and report.deleted_blobs == []
        assert quilt in report.kept_blobs  # y, live here and in the heads, is in it
        assert live(b, "fq") == {y.id: "quilt member kept"}
        assert httpx.get(f"{server.url}/v1/blobs/{quilt}").status_code == 200
