"""Format-1 manifests (from before head references) restore only with allow_legacy /
`--legacy`, as a root of no history; wrong keys and namespaces are still refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import walrus_mem._log.merging as log_merging
from relayer_mock.server import RelayerServer
from tests.helpers_cli import TEST_MASTER_HEX, envelope_of, invoke
from tests.helpers_legacy import publish_format1_manifest
from tests.helpers_log import Interrupt, dir_snapshot, kill_after, live, machine
from tests.helpers_memory import MOCK_ADMIN_TOKEN, OTHER_MASTER_HEX
from walrus_mem._log.heads import HeadRef
from walrus_mem.errors import (
    InvalidHead,
    LegacyManifest,
    RestoreIncomplete,
    VerificationFailed,
    WrongNamespace,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus"), admin_token=MOCK_ADMIN_TOKEN) as srv:
        yield srv


def old_machine(path: Path, url: str, ns: str, n: int, *,
                page_size: int | None = None) -> tuple[str, dict[str, str]]:
    """A machine of before format 2: facts published, one updated, one forgotten, then a
    format-1 manifest of what is live. Its blob id and the live memories."""
    with machine(path, url) as old:
        ids = [r.id for r in old.remember_many([f"old fact number {i} about {ns}"
                                                for i in range(n)], namespace=ns)]
        old.update(ids[0], f"old fact number 0 about {ns}, corrected", namespace=ns)
        old.forget(ids[1], namespace=ns)
        assert old.sync().still_queued == 0
        return publish_format1_manifest(old, ns, page_size=page_size), live(old, ns)


@pytest.mark.parametrize("page_size", [None, 3], ids=["inline", "paged"])
def test_format1_restores_with_the_flag_and_the_next_sync_starts_a_history(
        tmp_path: Path, server, page_size: int | None) -> None:
    blob_id, expected = old_machine(tmp_path / "old", server.url, "legacy", 9,
                                    page_size=page_size)
    assert len(expected) == 8
    with machine(tmp_path / "b", server.url) as b:
        before = dir_snapshot(tmp_path / "b")
        with pytest.raises(LegacyManifest, match=r"rollback.*cannot be detected.*allow_legacy"):
            b.restore("legacy", blob_id)
        with pytest.raises(LegacyManifest, match="--legacy"):
            b.pull(blob_id, namespace="legacy")
        assert dir_snapshot(tmp_path / "b") == before
        report = b.restore("legacy", blob_id, allow_legacy=True)
        assert (report.restored, report.total, report.failed, report.complete) == (
            8, 8, [], True)
        assert report.manifest_blob_id == blob_id
        assert live(b, "legacy") == expected
        corrected = next(t for t in expected.values() if t.endswith("corrected"))
        hit = b.recall(corrected, namespace="legacy", k=1, min_score=0)[0]
        assert hit.record.text == corrected and hit.record.version == 2
        assert b.stats("legacy").manifest_blob_id is None  # format 1 is no head
        again = b.restore("legacy", blob_id, allow_legacy=True)  # idempotent
        assert (again.restored, again.skipped) == (0, 8)
        b.remember("written after the legacy restore", namespace="legacy")
        head = HeadRef.parse(b.sync().manifests["legacy"])
        seen = b._log.seen.get("legacy", head.blob_id)
        assert head.seq == 1 and seen is not None
        assert seen.parents == () and seen.origins == (head.blob_id,)
        expected_after = live(b, "legacy")
    with machine(tmp_path / "c", server.url) as c:
        with pytest.raises(InvalidHead, match="full head reference"):  # format 2 needs its head
            c.restore("legacy", head.blob_id, allow_legacy=True)
        report = c.restore("legacy", str(head))
        assert (report.restored, report.complete) == (9, True)
        assert live(c, "legacy") == expected_after


def test_pull_merges_a_format1_manifest_into_existing_state(tmp_path: Path, server) -> None:
    blob_id, expected = old_machine(tmp_path / "old", server.url, "mix", 4)
    with machine(tmp_path / "b", server.url) as b:
        b.remember("already here on b", namespace="mix")
        head = HeadRef.parse(b.sync().manifests["mix"])
        report = b.pull([blob_id], namespace="mix", allow_legacy=True)
        assert (report.added, report.legacy, report.heads) == (3, blob_id, [])
        assert set(expected.items()) < set(live(b, "mix").items())
        assert b.stats("mix").manifest_blob_id == str(head)  # its history is unchanged
        new = HeadRef.parse(b.sync().manifests["mix"])
        assert b._log.seen.get("mix", new.blob_id).parents == (head,)


def test_wrong_key_or_namespace_is_refused_and_changes_nothing(tmp_path: Path,
                                                               server) -> None:
    blob_id, _ = old_machine(tmp_path / "old", server.url, "wk1", 3, page_size=2)
    with machine(tmp_path / "b", server.url, key=OTHER_MASTER_HEX) as wrong:
        wrong.remember("something else entirely", namespace="mine")
        before = dir_snapshot(tmp_path / "b")
        with pytest.raises(WrongNamespace):
            wrong.restore("wk1", blob_id, allow_legacy=True)
        assert dir_snapshot(tmp_path / "b") == before
        assert "wk1" not in wrong.namespaces()
    with machine(tmp_path / "c", server.url) as other_ns:
        before = dir_snapshot(tmp_path / "c")
        with pytest.raises(WrongNamespace):  # sealed for wk1, restored as wk2
            other_ns.restore("wk2", blob_id, allow_legacy=True)
        assert dir_snapshot(tmp_path / "c") == before
        assert other_ns.restore("wk1", blob_id, allow_legacy=True).restored == 2


def test_a_page_that_is_not_the_one_its_root_names_is_refused(tmp_path: Path,
                                                              server) -> None:
    """A tampered format-1 root: its pages point at each other's bytes."""
    with machine(tmp_path / "old", server.url) as old:
        old.remember_many([f"paged fact {i}" for i in range(4)], namespace="tp")
        old.sync()
        blob_id = publish_format1_manifest(old, "tp", page_size=2, swap_pages=True)
    with machine(tmp_path / "b", server.url, read_deadline=1.0) as b:
        before = dir_snapshot(tmp_path / "b")
        with pytest.raises(VerificationFailed, match="BlobMismatch"):
            b.restore("tp", blob_id, allow_legacy=True)
        assert dir_snapshot(tmp_path / "b") == before


def test_interrupted_legacy_restore_refuses_to_publish_and_resumes(tmp_path: Path, server,
                                                                   monkeypatch) -> None:
    monkeypatch.setattr(log_merging, "RESTORE_CHUNK", 10)
    blob_id, expected = old_machine(tmp_path / "old", server.url, "ir", 42)
    with machine(tmp_path / "b", server.url) as b:
        with pytest.raises(Interrupt):
            b.restore("ir", blob_id, progress=kill_after(10), allow_legacy=True)
        assert 0 < b.stats("ir").memories < 41
        sync = b.sync()
        assert "ir" not in sync.manifests and any("RestoreIncomplete" in e for e in sync.errors)
        with machine(tmp_path / "old", server.url) as old:
            format2_head = old.stats("ir").manifest_blob_id
        assert format2_head is not None
        with pytest.raises(RestoreIncomplete, match="format-1"):  # finish the legacy one first
            b.pull(format2_head, namespace="ir")
        report = b.restore("ir")  # resumes: the flag was given when it started
        assert (report.complete, report.resumed, report.manifest_blob_id) == (
            True, True, blob_id)
        assert live(b, "ir") == expected
        assert HeadRef.parse(b.sync().manifests["ir"]).seq == 1


def test_cli_restore_legacy(tmp_path: Path, server, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", server.url)
    monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", server.url)
    with machine(tmp_path / "old", server.url, key=TEST_MASTER_HEX) as old:
        old.remember_many(["Ana lives in Lisbon", "Tea at 4pm"], namespace="cli")
        old.sync()
        blob_id = publish_format1_manifest(old, "cli")
    fresh = ["--data-dir", str(tmp_path / "fresh"), "-n", "cli"]
    refused = invoke([*fresh, "restore", blob_id], expect=1)
    assert "[LegacyManifest]" in refused.stderr and "--legacy" in refused.stderr
    text = invoke([*fresh, "restore", "--legacy", blob_id]).stdout
    assert "2 restored" in text and blob_id in text
    hits = envelope_of(invoke(["--json", *fresh, "recall", "Ana lives in Lisbon",
                              "--min-score", "0"]))["data"]["hits"]
    assert hits[0]["record"]["text"] == "Ana lives in Lisbon"
    pulled = invoke([*fresh, "pull", "--legacy", blob_id]).stdout
    assert f"format-1 manifest {blob_id}" in pulled
    head = envelope_of(invoke(["--json", *fresh, "sync"]))["data"]["manifests"]["cli"]
    assert HeadRef.parse(head).seq == 1
