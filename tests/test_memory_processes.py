"""Several processes sharing one data dir (a small version; the stress suite does more)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import Memory
from walrus_mem.testing import HashEmbedder

WRITER = textwrap.dedent(
    """
    import sys
    from walrus_mem import Memory, Settings
    from walrus_mem.testing import HashEmbedder

    data_dir, tag, key = sys.argv[1], sys.argv[2], sys.argv[3]
    settings = Settings(data_dir=data_dir, use_keyring=False)
    with Memory(settings, embedder=HashEmbedder(64), master_key=key) as mem:
        for i in range(20):
            mem.remember(f"process {tag} wrote fact {i}")
            mem.recall(f"process {tag}", min_score=0)
        mem.remember_many([f"process {tag} batch fact {i}" for i in range(10)])
        mem.remember("a fact both processes write")
    """
)


def test_two_processes_write_one_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "shared"
    settings = make_settings(data_dir)
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as observer:
        observer.remember("written before the children start")
        observer.recall("written before")  # index loaded before the other writers appear
        procs = [
            subprocess.Popen([sys.executable, "-c", WRITER, str(data_dir), tag, MASTER_HEX],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for tag in ("alpha", "beta")
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
        # 1 + 2 * (20 + 10) + one shared fact deduplicated across the processes
        assert observer.stats().memories == 62
        hits = observer.recall("process beta wrote fact 7", k=3, min_score=0)
        assert hits[0].text == "process beta wrote fact 7"  # other processes' writes visible
        assert len(observer.recall("fact", k=100, min_score=0)) == 62
        assert observer.stats().queued == 0
        assert observer.sync().still_queued == 0
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as reopened:
        assert len(reopened.recall("fact", k=100, min_score=0)) == 62


def test_a_restatement_by_another_writer_meanwhile_returns_the_moved_memory(
        tmp_path: Path) -> None:
    """Two writers state the same text at once: the second's re-statement moves the
    first's new memory to another id (restate.py) before the first reads its record
    back. The first call returns the memory that holds the fact now (deduplicated), not
    MemoryNotFound (seen in CI as a rare failure of the test above)."""
    settings = make_settings(tmp_path / "shared")
    with Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as a, \
            Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX) as b:
        catalog = a._parts.catalog
        original = catalog.memories_by_ids

        def racing(ns: str, ids: list[str]) -> dict[str, object]:
            catalog.memories_by_ids = original  # type: ignore[method-assign]
            b.remember("a fact both writers state")  # moves a's memory to a new id
            return original(ns, ids)

        catalog.memories_by_ids = racing  # type: ignore[method-assign]
        record = a.remember("a fact both writers state")
        assert record.deduplicated and record.text == "a fact both writers state"
        assert [r.id for r in a.list()] == [record.id]
