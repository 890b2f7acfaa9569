"""Issue 28 item 4: compact deletes a data dir's superseded manifests from its embedded
relayer (every manifest ever published stayed there: 1,180 bytes per memory at 10k),
keeping what the log, later manifests and restores may still read; a relayer other data
dirs share is never touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayer_mock.embedded import EmbeddedRelayer
from walrus_mem import Memory, Settings
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

MASTER = "17" * 32
NS = "default"


def _settings(tmp: Path) -> Settings:
    return Settings(config_file=None, data_dir=tmp / "data", use_keyring=False,
                    publisher_url=None, aggregator_urls=[], state_dir=tmp / "state")


def _served(relayer: EmbeddedRelayer) -> set[str]:
    """The blobs a relayer still serves."""
    with relayer.client() as admin:
        return {b["blobId"] for b in admin.get("/_mock/blobs").json()["blobs"] if b["available"]}


def _roots(mem: Memory, ns: str = NS) -> list[str]:
    return [str(r[0]) for r in mem._parts.catalog.query(
        "SELECT blob_id FROM manifests WHERE namespace = ? ORDER BY seq", (ns,))]


def _write(mem: Memory, batches: int = 4, tag: str = "") -> None:
    for batch in range(batches):
        mem.remember_many([f"fact {tag}{batch}-{i} about the blue notebook" for i in range(30)])
        assert not mem.sync().errors


def _still_works(mem: Memory, count: int) -> None:
    head = mem._parts.log.newest(NS)[0]
    assert len(mem._parts.log.read(NS, head)[1]) == count
    mem.remember("one more fact after the old manifests went")
    report = mem.sync()
    assert not report.errors
    assert mem._parts.log.newest(NS)[0].seq == head.seq + 1
    # a head or manifest compact deleted is not a network that lost them (the mark the
    # per-sync check reads, network_reset.py, named one): nothing is stored again
    assert report.renewed == 0 and mem._parts.catalog.get_meta("network_reset") is None


def test_compact_deletes_the_manifests_the_newest_supersedes(tmp_path: Path) -> None:
    with Memory(_settings(tmp_path), embedder=HashEmbedder(64), master_key=MASTER) as mem:
        _write(mem)
        mem.remember("another namespace's fact", namespace="other")
        assert not mem.sync(namespace="other").errors
        relayer = mem._parts.publisher.backend().embedded
        roots = _roots(mem)
        assert len(roots) == 4 and set(roots) <= _served(relayer)  # publishing keeps them
        mem.compact()
        served = _served(relayer)
        assert roots[-1] in served and not set(roots[:-1]) & served
        assert set(_roots(mem, "other")) <= served  # another namespace's: its own compact
        _still_works(mem, 120)
        _write(mem, 2, "later ")
        mem.compact()  # only the manifests published since are looked at again
        assert _served(relayer) & set(_roots(mem)) == {_roots(mem)[-1]}
    with Memory(_settings(tmp_path), embedder=HashEmbedder(64), master_key=MASTER) as mem:
        assert not mem.sync().errors  # a new process merges nothing it cannot read
        assert len(mem.recall("blue notebook", k=300, min_score=0)) == 181


def test_a_relayer_other_data_dirs_share_keeps_every_manifest(tmp_path: Path) -> None:
    relayer = EmbeddedRelayer(tmp_path / "walrus")
    try:
        client = WalrusClient(relayer.base_url, [relayer.base_url], transport=relayer.transport,
                              epochs=5)
        with Memory(_settings(tmp_path), embedder=HashEmbedder(64), master_key=MASTER,
                    walrus=client) as mem:
            _write(mem, 3)
            mem.compact()
            assert set(_roots(mem)) <= _served(relayer)  # another machine may read them
    finally:
        relayer.close()


def test_compact_deletes_page_quilts_no_kept_manifest_lists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past INLINE_MAX entries a manifest's entries go to pages, stored as quilts; a page
    no kept root lists goes with its manifest_pages row (never reused), the newest
    root's pages stay, and the next manifests and a fresh restore read everything."""
    import walrus_mem._log.manifest as mf

    monkeypatch.setattr(mf, "INLINE_MAX", 20)
    monkeypatch.setattr(mf, "CHANGED_INLINE_MAX", 10)
    with Memory(_settings(tmp_path), embedder=HashEmbedder(64), master_key=MASTER) as mem:
        _write(mem, 5)
        relayer = mem._parts.publisher.backend().embedded
        pages_before = {str(r[0]) for r in mem._parts.catalog.query(
            "SELECT blob_id FROM manifest_pages")}
        assert len(pages_before) >= 2
        mem.compact()
        served = _served(relayer)
        pages_after = {str(r[0]) for r in mem._parts.catalog.query(
            "SELECT blob_id FROM manifest_pages")}
        assert pages_after < pages_before and pages_after <= served
        assert not (pages_before - pages_after) & served
        _still_works(mem, 150)
        _write(mem, 2, "later ")
        mem.compact()
        _still_works(mem, 211)
    with Memory(_settings(tmp_path), embedder=HashEmbedder(64), master_key=MASTER) as mem:
        # a new process reads the newest head whole: root and every page it lists
        assert len(mem._parts.log.read(NS, mem._parts.log.newest(NS)[0])[1]) == 212
        assert not mem.sync().errors
