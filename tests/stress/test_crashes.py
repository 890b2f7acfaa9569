"""Crashes: an ingesting process is SIGKILLed at 20 points; nothing acknowledged is lost.

Each crash point runs ``tests/stress/ingest_worker.py`` in a fresh data dir (half
of them publishing to a RelayerServer over loopback HTTP that outlives the
crash, half to the embedded relayer, which dies with the process). 17 points are
hit deterministically by the worker's hooks (a real SIGKILL at the N-th embed,
seal, catalog COMMIT, publish, index save ...; N drawn from a seeded RNG within
the calls a full run makes) and 3 are SIGKILLs at random times from outside.

After each crash, reopening the data dir must show every memory whose
``remember`` / ``remember_many`` had returned, consistent in catalog, FTS,
history and index; ``sync()`` must publish everything with each memory in
exactly one blob; and re-running the same ingest must complete with no
duplicate memory and no duplicate blob. Torn and garbage index files are
rebuilt from the catalog with a warning.
"""

from __future__ import annotations

import json
import logging
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
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
from walrus_mem._recall.index import index_file_stem

pytestmark = pytest.mark.slow

SEED = 424242
N_FACTS = 120
PLAN = [  # (phase, mode) for the 20 crash points
    ("embed", "http"), ("embed", "embedded"),
    ("seal", "http"), ("seal", "embedded"),
    ("commit", "http"), ("commit", "embedded"), ("commit", "http"),
    ("committed", "embedded"), ("committed", "http"),
    ("publish", "http"), ("publish", "embedded"),
    ("published", "http"), ("published", "embedded"), ("published", "http"),
    ("index_tmp", "embedded"), ("index_save", "http"), ("index_save", "embedded"),
    ("random", "http"), ("random", "embedded"), ("random", "http"),
]
FIGURES: dict[str, Any] = {"points": [], "by_phase": Counter(), "index_rebuilds": Counter()}


@pytest.fixture(scope="module")
def relayer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("crash-relayer")) as server:
        yield server


@pytest.fixture(scope="module")
def facts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("crash-facts") / "facts.json"
    path.write_text(json.dumps(make_facts(N_FACTS, seed=SEED)))
    return path


def _args(data_dir: Path, facts: Path, ns: str, mode: str, url: str) -> list[str]:
    args = ["--data-dir", str(data_dir), "--facts", str(facts), "--namespace", ns]
    return [*args, "--publisher", url] if mode == "http" else args


def _overrides(mode: str, url: str) -> dict[str, Any]:
    return {"publisher_url": url, "aggregator_urls": [url]} if mode == "http" else {}


@pytest.fixture(scope="module")
def phase_counts(
    relayer: RelayerServer, facts_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """Calls per phase (and wall time) of a full, uncrashed ingest, per mode."""
    out = {}
    for mode in ("http", "embedded"):
        data_dir = tmp_path_factory.mktemp(f"count-{mode}")
        worker = Worker([*_args(data_dir, facts_file, "count", mode, relayer.url),
                         "--count-phases"])
        assert worker.wait() == 0, worker.stderr
        line = next(x for x in worker.lines if x.startswith("COUNTS "))
        out[mode] = {"counts": json.loads(line[7:]),
                     "seconds": worker.seconds_between("READY", "DONE")}
    return out


def _relayer_dir(mode: str, relayer: RelayerServer, data_dir: Path) -> Path:
    return relayer.data_dir if mode == "http" else data_dir / "relayer"


def _check_store(data_dir: Path, ns: str, mode: str, relayer: RelayerServer,
                 facts: list[str], acked: dict[int, str],
                 caplog: pytest.LogCaptureFixture) -> bool:
    """Reopen, check every acknowledged memory, sync, check the relayer. Index rebuilt?"""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="walrus_mem._recall.index"):
        mem = open_memory(data_dir, **_overrides(mode, relayer.url))
        try:
            rows = {r.id: r for r in mem.list(ns, limit=10_000)}
            for index, mid in acked.items():
                assert mid in rows, f"acknowledged memory {index} ({mid}) lost"
                assert rows[mid].text == facts[index]
            consistency = check_consistency(mem, ns)
            assert consistency.ok, consistency.problems
            rebuilt = any("rebuild" in r.getMessage() for r in caplog.records)
            report = mem.sync()
            assert report.still_queued == 0 and report.errors == [], report
            keys = mem.keys_for(ns)
            found = census(relayer_blobs(_relayer_dir(mode, relayer, data_dir)), [keys])
            assert found.duplicates() == {}
            for mid, rec in {r.id: r for r in mem.list(ns, limit=10_000)}.items():
                assert found.locations[(mid, rec.version)] == {rec.blob_id}
            for mid in acked.values():
                mem.get(mid, namespace=ns, verify=True)
            assert check_consistency(mem, ns).ok
        finally:
            mem.close()
    return rebuilt


@pytest.mark.parametrize("point", range(len(PLAN)), ids=[f"{i:02d}-{p}-{m}"
                                                         for i, (p, m) in enumerate(PLAN)])
def test_sigkill_at_point(
    point: int,
    relayer: RelayerServer,
    facts_file: Path,
    phase_counts: dict[str, dict[str, Any]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    phase, mode = PLAN[point]
    rng = random.Random(SEED * 100 + point)
    facts = json.loads(facts_file.read_text())
    ns = f"crash-{point:02d}"
    data_dir = tmp_path / "data"
    args = _args(data_dir, facts_file, ns, mode, relayer.url)
    clock = Stopwatch()
    delay: float | None = None  # seconds after READY of a random-time kill

    if phase == "random":
        ingest = phase_counts[mode]["seconds"]  # READY to DONE of an uncrashed run
        for attempt in range(5):
            worker = Worker(args)
            assert worker.ready.wait(60)
            # ``ingest`` was timed under another load: each retry kills earlier.
            delay = round(rng.uniform(0.05, 0.9) * ingest / 2**attempt, 3)
            time.sleep(delay)
            worker.proc.send_signal(signal.SIGKILL)
            code = worker.wait()
            if code == -signal.SIGKILL and "DONE" not in worker.lines:
                break
            # Finished first. Its blobs stay on the shared HTTP relayer, and the
            # checks below count every blob of the namespace there: start over in
            # a fresh data dir *and* namespace (the same namespace made the blob
            # census find the finished run's 120 memories too).
            ns = f"crash-{point:02d}-retry{attempt + 1}"
            data_dir = tmp_path / f"data-{attempt}"
            args = _args(data_dir, facts_file, ns, mode, relayer.url)
        at: int | str = "random"
    else:
        at = rng.randint(1, phase_counts[mode]["counts"][phase])
        worker = Worker([*args, "--crash-phase", phase, "--crash-at", str(at)])
        code = worker.wait()
    assert code == -signal.SIGKILL, f"worker was not killed (exit {code}): {worker.stderr}"
    acked = worker.acked()

    rebuilt = _check_store(data_dir, ns, mode, relayer, facts, acked, caplog)

    # The same ingest again, to completion: no duplicates anywhere.
    rerun = Worker(args)
    assert rerun.wait() == 0, rerun.stderr
    again = rerun.acked()
    assert len(again) == N_FACTS
    assert len(set(again.values())) == N_FACTS
    mem = open_memory(data_dir, **_overrides(mode, relayer.url))
    try:
        texts = [r.text for r in mem.list(ns, limit=10_000)]
        assert sorted(texts) == sorted(facts)  # each fact exactly once
        # the re-ingest re-stated each acknowledged fact (walrus_mem/_memory/restate.py): a new
        # id, the acknowledged one forgotten
        for index, mid in acked.items():
            assert again[index] != mid and mem._catalog.is_tombstoned(ns, mid), index
        assert check_consistency(mem, ns).ok
        found = census(relayer_blobs(_relayer_dir(mode, relayer, data_dir)), [mem.keys_for(ns)])
        assert found.duplicates() == {}
        located = {mid for mid, _ in found.locations}
        assert set(again.values()) <= located  # and else only retired (forgotten) ids
        assert all(mem._catalog.is_tombstoned(ns, mid) for mid in located - set(again.values()))
    finally:
        mem.close()

    FIGURES["points"].append({"point": point, "phase": phase, "mode": mode, "at": at,
                              "kill_after_ready_s": delay,
                              "acknowledged_before_kill": len(acked),
                              "index_rebuilt_on_reopen": rebuilt, "seconds": clock.seconds})
    FIGURES["by_phase"][phase] += 1
    if rebuilt:
        FIGURES["index_rebuilds"][phase] += 1
    write_figures("crashes", {
        "crash_points_survived": len(FIGURES["points"]),
        "survived_by_phase": dict(FIGURES["by_phase"]),
        "index_rebuilt_by_phase": dict(FIGURES["index_rebuilds"]),
        "acknowledged_checked": sum(p["acknowledged_before_kill"] for p in FIGURES["points"]),
        "facts_per_ingest": N_FACTS,
        "calls_per_full_ingest": {m: v["counts"] for m, v in phase_counts.items()},
        "points": FIGURES["points"],
    })


def _ingest(data_dir: Path, facts_file: Path, ns: str) -> None:
    worker = Worker(["--data-dir", str(data_dir), "--facts", str(facts_file), "--namespace", ns])
    assert worker.wait() == 0, worker.stderr


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "meta_deleted",
                                    "meta_garbage", "stale_copy"])
def test_torn_index_is_rebuilt_from_the_catalog(
    damage: str, facts_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    ns = "torn"
    _ingest(data_dir, facts_file, ns)
    stem = index_file_stem(ns)
    index_path = data_dir / "index" / f"{stem}.usearch"
    meta_path = data_dir / "index" / f"{stem}.meta.json"
    assert index_path.exists() and meta_path.exists()
    if damage == "stale_copy":  # an older, smaller index file with matching metadata
        old_dir = tmp_path / "old"
        facts = json.loads(facts_file.read_text())
        small = tmp_path / "small.json"
        small.write_text(json.dumps(facts[:40]))
        _ingest(old_dir, small, ns)
        index_path.write_bytes((old_dir / "index" / f"{stem}.usearch").read_bytes())
    data = index_path.read_bytes()
    if damage == "truncated":
        index_path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        index_path.write_bytes(random.Random(1).randbytes(len(data)))
    elif damage == "empty":
        index_path.write_bytes(b"")
    elif damage == "meta_deleted":
        meta_path.unlink()
    elif damage == "meta_garbage":
        meta_path.write_text("{not json")
    catalog_before = (data_dir / "catalog.sqlite3").stat().st_size
    facts = json.loads(facts_file.read_text())
    with caplog.at_level(logging.WARNING, logger="walrus_mem._recall.index"):
        mem = open_memory(data_dir)
        try:
            hits = mem.recall(facts[7], namespace=ns, k=3)
            assert facts[7] in [h.text for h in hits]
            warnings = [r.getMessage() for r in caplog.records
                        if r.levelno >= logging.WARNING and r.name == "walrus_mem._recall.index"]
            assert any("rebuild" in w for w in warnings), warnings
            report = check_consistency(mem, ns)
            assert report.ok and report.memories == N_FACTS, report.problems
        finally:
            mem.close()
    assert (data_dir / "catalog.sqlite3").stat().st_size >= catalog_before
    write_figures("crashes", {f"torn_index_{damage}": "rebuilt with a warning"})
