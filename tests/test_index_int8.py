"""The index stores int8 vectors (issue 28: the data dir of 1M memories within 3 GB).

A USearch file held each vector as float16 (768 B at 384 dimensions); it holds int8 now
(384 B), quantized by walrus_mem._recall.index_vectors.quantize. Files saved before are
made int8 in place at their first open, keeping the graph (index_upgrade.py):
``tests/data/index_f16`` is a namespace index saved by walrus_mem fe28742 (200 memories
of 16 dimensions, keys 5 and 6 removed, keys 200-219 pending), built from
:func:`vectors` with seed 28.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.test_index_file_vectors import ATTRS, assert_holds, saved_copies, vectors
from walrus_mem._recall import index as index_module
from walrus_mem._recall.index import NamespaceIndex
from walrus_mem._recall.index_vectors import quantize

FIXTURE = Path(__file__).parent / "data" / "index_f16"


def _matrix_columns(path: Path) -> int:
    return int(np.frombuffer(path.read_bytes()[:8], dtype="<u4")[1])


def test_the_usearch_file_keeps_one_byte_per_dimension(tmp_path: Path) -> None:
    dim, n = 384, 300
    v = vectors(2, n, dim)
    idx = NamespaceIndex("ns", tmp_path, "m", dim)
    idx.upsert(list(range(n)), v, [ATTRS] * n)
    assert idx.save()
    assert _matrix_columns(idx.path) == dim  # bytes per vector; float16 wrote 2 * dim
    assert idx.path.stat().st_size < n * (dim + 200)  # the vectors and a graph of this size
    again = NamespaceIndex("ns", tmp_path, "m", dim)
    assert again.load()
    assert again.index.dtype.name == "I8"
    assert [again.search(v[i], 1)[0] for i in (0, 150, 299)] == [[0], [150], [299]]


def test_quantize_scales_each_vector_to_its_largest_component() -> None:
    v = vectors(3, 200, 384)
    q = quantize(v * np.linspace(0.1, 10, 200, dtype=np.float32)[:, None])
    assert q.dtype == np.int8
    assert (np.abs(q.astype(np.int16)).max(axis=1) == 127).all()  # the scale is not kept
    assert np.array_equal(quantize(q), q)  # int8 passes unchanged
    assert not quantize(np.zeros(384, np.float32)).any()
    # cosines stay within a few thousandths of the float32 ones (USearch's own cast of
    # a unit vector, x 127 truncated, moved them by up to 0.06 at 384 dimensions)
    qf = q.astype(np.float32)
    qf /= np.linalg.norm(qf, axis=1, keepdims=True)
    assert np.abs(qf @ qf.T - v @ v.T).max() < 0.01


def test_scores_agree_between_the_graph_the_file_and_the_pending_copies(
        tmp_path: Path) -> None:
    v = vectors(4, 120, 64)
    idx = NamespaceIndex("ns", tmp_path, "m", 64)
    idx.upsert(list(range(100)), v[:100], [ATTRS] * 100)
    idx.defer(list(range(100, 120)), v[100:], [ATTRS] * 20)
    assert idx.save()
    again = NamespaceIndex("ns", tmp_path, "m", 64)
    assert again.load() and again.pending == 20
    keys, sims = again.search(v[3], 120)
    assert keys[0] == 3
    exact = again.similarities(keys, v[3])
    assert np.array_equal(np.asarray(sims), np.asarray(exact))  # to the last bit


def _copy_fixture(tmp_path: Path) -> Path:
    directory = tmp_path / "index"
    shutil.copytree(FIXTURE, directory)
    return directory


def _meta(directory: Path) -> dict[str, object]:
    [path] = directory.glob("*.meta.json")
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded


def test_an_index_saved_with_float16_vectors_is_made_int8_in_place_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _copy_fixture(tmp_path)
    assert _meta(directory)["format"] == 2
    v = vectors(28, 220).astype(np.float16)  # what the old index held
    truth = {k: v[k] for k in range(220) if k not in (5, 6)}
    monkeypatch.setattr(index_module, "_add", lambda *a: pytest.fail("rebuilt the graph"))
    idx = NamespaceIndex("ns", directory, "m", 16)
    with caplog.at_level(logging.WARNING, logger="walrus_mem._recall.index"):
        assert idx.load()
    assert "held float16 vectors" in caplog.text and "made int8 in place" in caplog.text
    meta = _meta(directory)
    assert meta["format"] == index_module.META_FORMAT
    assert _matrix_columns(idx.path) == 16
    assert saved_copies(directory).dtype == np.int8 and len(saved_copies(directory)) == 20
    assert len(list(directory.glob("*.vectors.npy"))) == 1  # the float16 copies are gone
    assert idx.rows_loaded and idx.pending == 20 and len(idx.index) == 198
    assert_holds(idx, truth)
    assert all(idx.search(v[k].astype(np.float32), 1)[0] == [k] for k in (0, 50, 199, 210))
    caplog.clear()
    again = NamespaceIndex("ns", directory, "m", 16)
    with caplog.at_level(logging.WARNING, logger="walrus_mem._recall.index"):
        assert again.load()
    assert caplog.text == ""  # once
    monkeypatch.undo()
    assert again.build_step(20) == 20 and again.save()
    assert_holds(again, truth)


def test_a_damaged_float16_index_is_rebuilt_not_upgraded(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = _copy_fixture(tmp_path)
    [path] = directory.glob("*.usearch")
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF  # a link of the graph
    path.write_bytes(bytes(raw))
    idx = NamespaceIndex("ns", directory, "m", 16)
    with caplog.at_level(logging.WARNING, logger="walrus_mem._recall.index"):
        assert not idx.load()
    assert "does not match its checksum" in caplog.text
    assert _meta(directory)["format"] == 2  # left for the rebuild to replace
