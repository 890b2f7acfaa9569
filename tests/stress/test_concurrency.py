"""Concurrency: 4 processes x 250 ``remember`` calls plus concurrent recalls on one data dir.

Every process runs its own embedded relayer on the shared ``<data_dir>/relayer``
(the harder case: five independent relayer_mock instances and five Memory
instances on one catalog, one index directory and one blob store). Writers
recall their own facts as they go; a reader process recalls random facts the
whole time. Afterwards: no process raised, all 1,000 memories are present once,
catalog / FTS / history / index agree (in this process and in a fresh one that
recalls all 1,000), and every memory is published in exactly one blob.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from relayer_mock.server import RelayerServer
from tests.stress.helpers import (
    Stopwatch,
    Worker,
    census,
    check_consistency,
    make_facts,
    open_memory,
    relayer_blobs,
    write_figures,
)

pytestmark = pytest.mark.slow

WORKERS = 4
PER_WORKER = 250
NS = "shared"
SEED = 777


def _worker(*args: str) -> Worker:
    return Worker(args=list(args), module="tests.stress.concurrent_worker")


def test_four_processes_one_data_dir(tmp_path: Path) -> None:
    clock = Stopwatch()
    facts = make_facts(WORKERS * PER_WORKER, seed=SEED)
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts))
    data_dir = tmp_path / "data"
    go, stop = tmp_path / "go", tmp_path / "stop"
    common = ["--data-dir", str(data_dir), "--facts", str(facts_file)]

    writers = [
        _worker("write", *common, "--worker", str(i), "--workers", str(WORKERS), "--go", str(go))
        for i in range(WORKERS)
    ]
    reader = _worker("read", *common, "--go", str(go), "--stop", str(stop))
    for w in [*writers, reader]:
        assert w.ready.wait(60), w.stderr
    go.touch()
    codes = [w.wait(600) for w in writers]
    writing_seconds = clock.seconds
    stop.touch()
    reader_code = reader.wait(120)
    for w, code in zip(writers, codes, strict=True):
        assert code == 0, w.stderr
        assert "Traceback" not in w.stderr, w.stderr
    assert reader_code == 0, reader.stderr
    reads_line = next(x for x in reader.lines if x.startswith("READS"))
    reads, found = int(reads_line.split()[1]), int(reads_line.split()[3])

    acked: dict[int, str] = {}
    for w in writers:
        acked.update(w.acked())
    assert len(acked) == len(facts)
    assert len(set(acked.values())) == len(facts)

    mem = open_memory(data_dir)
    try:
        rows = {r.id: r.text for r in mem.list(NS, limit=10 * len(facts))}
        assert rows == {mid: facts[i] for i, mid in acked.items()}
        consistency = check_consistency(mem, NS)
        assert consistency.ok, consistency.problems
        queued = mem.stats(NS).queued
    finally:
        mem.close()

    verifier = _worker("verify", *common)
    assert verifier.wait(300) == 0, verifier.stderr
    missing_line = next(x for x in verifier.lines if x.startswith("MISSING"))
    assert missing_line.split()[1] == "0", missing_line
    sync_line = next(x for x in verifier.lines if x.startswith("SYNC")).split()
    assert sync_line[2:] == ["0", "0"], sync_line

    mem = open_memory(data_dir)
    try:
        assert check_consistency(mem, NS).ok
        found_blobs = census(relayer_blobs(data_dir / "relayer"), [mem.keys_for(NS)])
        assert found_blobs.duplicates() == {}
        assert {mid for mid, _ in found_blobs.locations} == set(acked.values())
        stats = mem.stats(NS)
        manifest_id = stats.manifest_blob_id
    finally:
        mem.close()

    # The latest manifest must list everything: restore into an empty data dir from it.
    with RelayerServer(data_dir / "relayer") as server:
        fresh = open_memory(tmp_path / "restored", publisher_url=server.url,
                            aggregator_urls=[server.url])
        try:
            restored = fresh.restore(NS, manifest_blob_id=manifest_id)
            restored_ids = {r.id for r in fresh.list(NS, limit=10 * len(facts))}
        finally:
            fresh.close()
    assert restored.failed == []
    assert restored_ids == set(acked.values()), (
        f"latest manifest (seq {stats.manifest_seq}) lists {len(restored_ids)} of "
        f"{len(acked)} memories")

    write_figures("concurrency", {
        "processes": WORKERS,
        "remember_calls_per_process": PER_WORKER,
        "memories_present": len(rows),
        "duplicates": 0,
        "exceptions": 0,
        "concurrent_reader_recalls": reads,
        "concurrent_reader_found": found,
        "queued_after_writers": queued,
        "fresh_process_missing": 0,
        "blobs_on_relayer": found_blobs.blobs,
        "restored_from_latest_manifest": len(restored_ids),
        "manifest_seq": stats.manifest_seq,
        "seconds_writing": writing_seconds,
        "seconds_total": clock.seconds,
    })


def test_concurrent_syncs_leave_a_complete_latest_manifest(tmp_path: Path) -> None:
    """Two syncs overlap: the slower one must not leave an older snapshot as the latest.

    Thread ``slow`` remembers fact 3 and syncs, and its manifest store is held for
    a second; meanwhile the main thread remembers fact 4 and syncs (a manifest
    with all five). Whatever order they finish in, the latest manifest recorded
    after both (and after one more ``sync()``) must list all five memories, since
    ``restore`` reads only that one.
    """
    facts = make_facts(5, seed=SEED + 1)
    mem = open_memory(tmp_path / "data")
    relayer_dir = tmp_path / "data" / "relayer"
    try:
        ids = [mem.remember(t, namespace=NS).id for t in facts[:3]]
        assert mem.sync().manifests
        client = mem.walrus
        store = client.store_blob
        armed, held = threading.Event(), threading.Event()

        def slow_store(data: bytes, **kwargs: Any) -> Any:
            if threading.current_thread().name == "slow" and armed.is_set():
                held.set()
                time.sleep(1.0)
            return store(data, **kwargs)

        client.store_blob = slow_store  # type: ignore[method-assign]

        def slow_writer() -> None:
            ids.append(mem.remember(facts[3], namespace=NS).id)
            armed.set()
            mem.sync()

        thread = threading.Thread(target=slow_writer, name="slow")
        thread.start()
        assert held.wait(10)
        ids.append(mem.remember(facts[4], namespace=NS).id)
        mem.sync()
        thread.join(30)
        client.store_blob = store  # type: ignore[method-assign]
        mem.sync()  # a stale pointer may be repaired here at the latest
        latest = mem.stats(NS).manifest_blob_id
    finally:
        mem.close()
    with RelayerServer(relayer_dir) as server:
        fresh = open_memory(tmp_path / "restored", publisher_url=server.url,
                            aggregator_urls=[server.url])
        try:
            fresh.restore(NS, manifest_blob_id=latest)
            restored = {r.id for r in fresh.list(NS)}
        finally:
            fresh.close()
    assert restored == set(ids), f"the latest manifest lists {len(restored)} of {len(ids)}"


def test_a_sync_in_another_process_cannot_leave_a_stale_manifest(tmp_path: Path) -> None:
    """The same overlap across processes: the manifest lock is a file lock too."""
    facts = make_facts(5, seed=SEED + 2)
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps(facts))
    data_dir = tmp_path / "data"
    mem = open_memory(data_dir)
    try:
        ids = [mem.remember(t, namespace=NS).id for t in facts[:3]]
        assert mem.sync().manifests
        other = _worker("slowsync", "--data-dir", str(data_dir), "--facts", str(facts_file),
                        "--worker", "3")
        deadline = time.monotonic() + 60
        while "HELD" not in other.lines:  # the other process is inside its manifest stores
            assert time.monotonic() < deadline and other.proc.poll() is None, other.stderr
            time.sleep(0.01)
        ids.append(mem.remember(facts[4], namespace=NS).id)
        mem.sync()
        assert other.wait(60) == 0, other.stderr
        ids += list(other.acked().values())
        mem.sync()
        latest = mem.stats(NS).manifest_blob_id
    finally:
        mem.close()
    with RelayerServer(data_dir / "relayer") as server:
        fresh = open_memory(tmp_path / "restored", publisher_url=server.url,
                            aggregator_urls=[server.url])
        try:
            fresh.restore(NS, manifest_blob_id=latest)
            restored = {r.id for r in fresh.list(NS)}
        finally:
            fresh.close()
    assert restored == set(ids), f"the latest manifest lists {len(restored)} of {len(ids)}"
