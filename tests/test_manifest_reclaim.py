"""Issue 28 item 4: compact deletes a data dir's superseded manifests from its embedded
relayer (every manifest ever published stayed there: 1,180 bytes per memory at 10k),
keeping what the log, later manifests and restores may still read."""

from __future__ import annotations

from pathlib import Path

from walrus_mem import Memory, Settings
from walrus_mem.testing import HashEmbedder

MASTER = "17" * 32
NS = "default"


def _settings(tmp: Path) -> Settings:
    return Settings(config_file=None, data_dir=tmp / "data", use_keyring=False,
                    publisher_url=None, aggregator_urls=[], state_dir=tmp / "state")


def _blobs(mem: Memory) -> set[str]:
    """The blobs the embedded relayer still serves."""
    with mem._parts.publisher.backend().embedded.client() as admin:
        return {b["blobId"] for b in admin.get("/_mock/blobs").json()["blobs"] if b["available"]}


def _roots(mem: Memory) -> list[str]:
    return [str(r[0]) for r in mem._parts.catalog.query(
        "SELECT blob_id FROM manifests WHERE namespace = ? ORDER BY seq", (NS,))]


def test_compact_deletes_superseded_manifests_from_the_embedded_relayer(tmp_path: Path) -> None:
    with Memory(_settings(tmp_path), embedder=HashEmbedder(64), master_key=MASTER) as mem:
        for batch in range(4):
            mem.remember_many([f"fact {batch}-{i} about the blue notebook" for i in range(30)])
            assert not mem.sync().errors
        mem.remember("another namespace's fact", namespace="other")
        assert not mem.sync(namespace="other").errors
        roots = _roots(mem)
        assert len(roots) == 4 and set(roots) <= _blobs(mem)
        others = [str(r[0]) for r in mem._parts.catalog.query(
            "SELECT blob_id FROM manifests WHERE namespace = 'other'")]
        head = mem._parts.log.newest(NS)[0]
        mem.compact()
        left = _blobs(mem)
        assert roots[-1] in left and not set(roots[:-1]) & left  # the superseded ones went
        assert set(others) <= left  # another namespace's are its own compact's business
        # everything still reads: the head, every memory, the next manifest builds on it
        assert len(mem._parts.log.read(NS, head)[1]) == 120
        assert len(mem.list(limit=200)) == 120
        mem.remember("one more fact after compact")
        assert not mem.sync().errors
        assert mem._parts.log.newest(NS)[0].seq == head.seq + 1
    with Memory(_settings(tmp_path), embedder=HashEmbedder(64), master_key=MASTER) as mem:
        assert not mem.sync().errors  # a new process merges nothing it cannot read
        assert len(mem.recall("blue notebook", k=200, min_score=0)) == 121
