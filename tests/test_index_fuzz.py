"""Damaged USearch graph links: a recall in a fresh process works or rebuilds, never crashes.

USearch trusts the neighbour slots it reads from the file. A file whose header, keys and
vectors are intact but whose links point outside the graph passes every cheap check, and
the first search that follows such a link dies with SIGSEGV (the red team crashed 4 of 24
fuzzed files; doctor said OK). Each case runs the recall in a child process, so a crash
fails the test instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import Memory
from walrus_mem._memory.integrity import check_index_file
from walrus_mem.testing import HashEmbedder

ROOT = Path(__file__).resolve().parent.parent
COUNT = 300
QUERIES = [f"subject {i}" for i in range(0, 40, 3)] + ["fact", "index fact about"]

_CHILD = """
import json, logging, sys
from pathlib import Path
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import Memory
from walrus_mem.testing import HashEmbedder
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
settings = make_settings(Path(sys.argv[1]))
with Memory(settings, embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
    out = [[h.id for h in mem.recall(q, k=10, min_score=0)] for q in json.loads(sys.argv[2])]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """A data dir with a saved index of COUNT memories (never damaged itself)."""
    data = tmp_path_factory.mktemp("fuzz") / "pristine"
    with Memory(make_settings(data), embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        ids = {r.id for r in mem.remember_many(
            [f"index fact {i} about subject {i % 37}" for i in range(COUNT)]).records}
        mem.recall("subject 3")
    return data, ids


def _links(body: bytes) -> list[int] | None:
    """Offsets of the neighbour slots (u32) in a saved dense index, or None if the layout is
    not the one parsed here (USearch 2.x: vectors, a 64-byte gap, the graph header
    size/connectivity/connectivity_base/max_level/entry as u64, levels as i16, then per node
    key u64, level i16 and per level a u32 count plus capacity u32 slots)."""
    rows, row_bytes = struct.unpack_from("<II", body, 0)
    header = 8 + rows * row_bytes + 64
    size, conn, conn0, _, _ = struct.unpack_from("<QQQQQ", body, header)
    if size != rows or not 0 < conn <= conn0 <= 1024:
        return None
    levels = struct.unpack_from(f"<{size}h", body, header + 40)
    at = header + 40 + 2 * size
    slots: list[int] = []
    for level in levels:
        _, own_level = struct.unpack_from("<Qh", body, at)
        if own_level != level:
            return None
        at += 10
        for lv in range(level + 1):
            cap = conn0 if lv == 0 else conn
            (count,) = struct.unpack_from("<I", body, at)
            if count > cap:
                return None
            slots += [at + 4 + 4 * j for j in range(count)]
            at += 4 + 4 * cap
    return slots if at == len(body) else None


def _damage(body: bytes, kind: str, seed: int) -> bytes:
    rng = random.Random(seed)
    out = bytearray(body)
    links = _links(body)
    rows, row_bytes = struct.unpack_from("<II", body, 0)
    graph_start = 8 + rows * row_bytes + 64
    if kind == "links" and links is not None:
        for at in rng.sample(links, max(1, len(links) // 20)):  # 5%: out of the graph
            struct.pack_into("<I", out, at, rng.randrange(rows, 2**32))
    else:  # random bytes anywhere in the graph (or the layout is not the one parsed)
        for _ in range(64):
            out[rng.randrange(graph_start, len(out))] = rng.randrange(256)
    assert out != body
    return bytes(out)


@pytest.mark.parametrize(("kind", "seed"), [("links", 1), ("links", 2), ("links", 3),
                                            ("bytes", 4), ("bytes", 5)])
def test_recall_on_a_damaged_graph_rebuilds_and_never_crashes(
    tmp_path: Path, pristine: tuple[Path, set[str]], kind: str, seed: int
) -> None:
    source, ids = pristine
    data = tmp_path / "data"
    shutil.copytree(source, data)
    index_file = next((data / "index").glob("*.usearch"))
    body = index_file.read_bytes()
    if kind == "links":
        assert _links(body) is not None, "USearch's file layout changed: update _links"
    index_file.write_bytes(_damage(body, kind, seed))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(data), json.dumps(QUERIES)],
                          capture_output=True, text=True, env=env, timeout=300, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, f"recall died (rc {done.returncode}): {done.stderr[-2000:]}"
    results = json.loads(done.stdout)
    assert all(hits and set(hits) <= ids for hits in results)
    assert "does not match its checksum" in done.stderr  # noticed and rebuilt, not trusted
    with Memory(make_settings(data), embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        health = check_index_file(mem._catalog, mem._indexes.directory, "default",
                                  "test-hash-embedder-64", 64)
    assert health.ok and health.index_count == COUNT, health.describe()


def test_doctor_finds_a_damaged_link_without_searching_for_it(
    tmp_path: Path, pristine: tuple[Path, set[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One damaged link is enough to crash some search, and doctor's sampled searches (in a
    child) need not follow it: the red team's crashing files passed doctor. The checksum
    names the file as damaged before any search runs."""
    import walrus_mem._memory.integrity as integrity

    monkeypatch.setattr(integrity, "search_probe",
                        lambda *a: pytest.fail("the damaged graph was searched"))
    source, _ = pristine
    data = tmp_path / "data"
    shutil.copytree(source, data)
    index_file = next((data / "index").glob("*.usearch"))
    body = bytearray(index_file.read_bytes())
    links = _links(bytes(body))
    assert links is not None
    struct.pack_into("<I", body, links[len(links) // 2], 2**31)
    index_file.write_bytes(bytes(body))
    with Memory(make_settings(data), embedder=HashEmbedder(), master_key=MASTER_HEX) as mem:
        health = check_index_file(mem._catalog, mem._indexes.directory, "default",
                                  "test-hash-embedder-64", 64)
        assert not health.ok and "checksum" in health.describe()
