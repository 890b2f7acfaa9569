"""The onnxruntime runtime: a graph written from the packaged weights, the warm-up switch,
and onnxruntime living in one process with USearch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.helpers_memory import MASTER_HEX, make_settings
from tests.test_minilm import FACTS, QUERIES, TEXTS
from walrus_mem._recall import minilm_onnx
from walrus_mem._recall.embeddings import SentenceTransformerEmbedder
from walrus_mem.errors import EmbeddingError, InvalidInput
from walrus_mem.memory import Memory

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(autouse=True)
def _cache_env(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", str(cache))


@pytest.fixture(scope="module")
def onnx_embedder(cache: Path) -> SentenceTransformerEmbedder:
    with pytest.MonkeyPatch.context() as m:
        m.setenv("WALRUS_MEM_MODEL_CACHE", str(cache))
        embedder = SentenceTransformerEmbedder(backend="onnx")
        embedder.embed(["warm up"])
    assert embedder.backend == "onnx"
    return embedder


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder(backend="torch")
    embedder.embed(["warm up"])
    return embedder


@pytest.mark.model
def test_onnx_vectors_match_sentence_transformers(
    onnx_embedder: SentenceTransformerEmbedder, torch_embedder: SentenceTransformerEmbedder
) -> None:
    fast = onnx_embedder.embed(TEXTS)
    reference = torch_embedder.embed(TEXTS)
    assert fast.shape == reference.shape == (len(TEXTS), 384)
    cosines = (fast * reference).sum(axis=1)
    assert cosines.min() > 0.9999, cosines  # the bound (measured > 0.99999)
    for i, text in enumerate(TEXTS):  # unpadded one by one = the padded batch
        assert float(onnx_embedder.embed([text])[0] @ fast[i]) > 0.99999


@pytest.mark.model
def test_onnx_path_recalls_the_same_hits_as_the_reference_path(
    tmp_path: Path,
    onnx_embedder: SentenceTransformerEmbedder,
    torch_embedder: SentenceTransformerEmbedder,
) -> None:
    results = {}
    for name, embedder in (("onnx", onnx_embedder), ("torch", torch_embedder)):
        memory = Memory(make_settings(tmp_path / name), embedder=embedder,
                        master_key=MASTER_HEX)
        try:
            memory.remember_many(FACTS, namespace="default")
            results[name] = [memory.recall(q, namespace="default", k=5) for q in QUERIES]
        finally:
            memory.close()
    for query, fast, ref in zip(QUERIES, results["onnx"], results["torch"], strict=True):
        assert [h.record.text for h in fast] == [h.record.text for h in ref], query
        for a, b in zip(fast, ref, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
            assert a.dense == pytest.approx(b.dense, abs=1e-4)


@pytest.mark.model
def test_export_is_written_once_into_the_cache(cache: Path) -> None:
    first = minilm_onnx.cached_model(cache_dir=cache)
    stamp = first.stat().st_mtime_ns
    assert minilm_onnx.cached_model(cache_dir=cache) == first
    assert first.stat().st_mtime_ns == stamp  # reused, not exported again
    assert first.parent == cache and first.suffix == ".onnx"
    assert oct(first.stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.model
def test_auto_switches_to_onnxruntime_in_a_long_lived_process() -> None:
    embedder = SentenceTransformerEmbedder()  # auto
    first = embedder.embed(["food allergies"])
    embedder.embed(["food allergies"])
    assert embedder.backend == "numpy"
    model = embedder._load()
    assert isinstance(model, minilm_onnx.WarmingMiniLM)
    assert model._thread is None  # a burst of embeddings (a CLI command): no onnxruntime
    assert model._first is not None
    model._first -= minilm_onnx.WARM_AFTER_S  # the next embedding comes later
    embedder.embed(["food allergies"])  # starts the background build
    assert model._thread is not None
    assert embedder.warm(timeout=300)
    assert embedder.backend == "onnx"
    again = embedder.embed(["food allergies"])
    assert float(first[0] @ again[0]) > 0.99999


def test_onnx_backend_is_validated() -> None:
    with pytest.raises(InvalidInput, match="onnx backend"):
        SentenceTransformerEmbedder("some-org/other-model", backend="onnx")


def test_a_broken_model_dir_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 12}')
    with pytest.raises(EmbeddingError, match="not an all-MiniLM-L6-v2"):
        minilm_onnx.OnnxMiniLM(tmp_path, cache_dir=tmp_path / "cache").encode(["x"])


LONG_LIVED = """
import sys
from walrus_mem.config import Settings
from walrus_mem.memory import Memory
m = Memory(Settings(data_dir=sys.argv[1], use_keyring=False), master_key="{key}")
m.remember("User is allergic to peanuts.", namespace="default")
m.recall("what can't I eat", namespace="default", k=3)
assert m.embedder.warm(timeout=300) and m.embedder.backend == "onnx"
hits = m.recall("food allergies", namespace="default", k=3)
assert hits and "peanuts" in hits[0].record.text, hits
m.close()
heavy = [n for n in ("torch", "sentence_transformers", "transformers") if n in sys.modules]
print(",".join(heavy) or "none")
"""


@pytest.mark.model
def test_a_long_lived_process_recalls_on_onnxruntime_without_torch(
    tmp_path: Path, cache: Path
) -> None:
    """USearch is loaded first (the crash native.py prevents), the export needs no torch."""
    code = textwrap.dedent(LONG_LIVED.format(key=MASTER_HEX))
    env = {"WALRUS_MEM_MODEL_CACHE": str(tmp_path / "fresh-cache"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "none", out.stderr[-2000:]


def test_onnxruntime_imports_after_usearch() -> None:
    """usearch's wheel carries its own libstdc++; onnxruntime's init crashed after it."""
    code = "import walrus_mem._recall.index, usearch.index, onnxruntime; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr[-2000:]


def test_vectors_are_normalised_float32(onnx_embedder: SentenceTransformerEmbedder) -> None:
    out = onnx_embedder.embed(["one", "two words", ""])
    assert out.dtype == np.float32 and out.shape == (3, 384)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
