"""The torch-free query path: numpy MiniLM against sentence-transformers, thread policy."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._recall.embeddings import SentenceTransformerEmbedder, make_embedder
from walrus_mem._recall.minilm import MAX_SEQ_LENGTH, MiniLM
from walrus_mem.config import Settings
from walrus_mem.errors import EmbeddingError, InvalidInput
from walrus_mem.memory import Memory

# Short and long, cased, accented, CJK, emoji, punctuation only, empty, over the
# 256-token truncation limit, and lengths that differ inside one padded batch.
TEXTS = [
    "food allergies",
    "What does the user prefer about coffee in the morning?",
    "User is allergic to peanuts and shellfish; carries an EpiPen.",
    "Émile visited 北京 last Tuesday!! 🙂",
    "!!!",
    "",
    "The user's sister Ana moved to Lisbon in March 2023 to work as a nurse.",
    " ".join(f"word{i} the user said" for i in range(200)),  # truncated at 256 tokens
]

FACTS = [
    "User is allergic to peanuts and shellfish.",
    "User prefers oat milk in coffee.",
    "User's sister Ana lives in Lisbon.",
    "User runs 10 km every Saturday morning.",
    "User is learning Japanese for a trip to Kyoto in April.",
    "User works as a backend engineer on payment systems.",
    "User's dog is called Biscuit and is afraid of thunder.",
    "User dislikes horror movies but loves documentaries.",
    "User had knee surgery in 2022 and avoids stairs.",
    "User's favourite cuisine is Ethiopian food.",
    "User plays the cello in a community orchestra.",
    "User wants to repaint the kitchen green.",
    "User's daughter starts school in September.",
    "User reads science fiction before bed.",
    "User's car is a 2015 Honda Civic that needs new brakes.",
    "User volunteers at the food bank on Wednesdays.",
]
QUERIES = ["food allergies", "what does the user drink", "family abroad", "exercise routine",
           "travel plans", "job", "pets", "surgery history", "music hobby", "car repairs"]


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceTransformerEmbedder:
    """The reference: the same model through sentence-transformers (torch)."""
    embedder = SentenceTransformerEmbedder(backend="torch")
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture(scope="module")
def numpy_embedder() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder()
    assert embedder.backend == "numpy"
    return embedder


@pytest.mark.model
def test_numpy_vectors_match_sentence_transformers(
    numpy_embedder: SentenceTransformerEmbedder, torch_embedder: SentenceTransformerEmbedder
) -> None:
    fast = numpy_embedder.embed(TEXTS)
    reference = torch_embedder.embed(TEXTS)
    assert fast.shape == reference.shape == (len(TEXTS), 384)
    cosines = (fast * reference).sum(axis=1)
    assert cosines.min() > 0.99999, cosines  # the issue asks 0.9999
    assert np.abs(fast - reference).max() < 1e-4
    # One text at a time (no padding) gives the batch's vectors.
    for i, text in enumerate(TEXTS):
        assert float(numpy_embedder.embed([text])[0] @ fast[i]) > 0.99999


@pytest.mark.model
def test_long_text_is_truncated_like_sentence_transformers(
    numpy_embedder: SentenceTransformerEmbedder,
) -> None:
    long = TEXTS[-1]
    longer = long + " and then many more words that fall beyond the limit" * 20
    model = MiniLM()
    assert len(model.tokenize(long)) == MAX_SEQ_LENGTH
    a, b = numpy_embedder.embed([long, longer])
    assert float(a @ b) > 0.99999  # the tail past 256 tokens is not read


def _memory(path: Path, embedder: SentenceTransformerEmbedder) -> Memory:
    return Memory(make_settings(path), embedder=embedder, master_key=MASTER_HEX)


@pytest.mark.model
def test_fast_path_recalls_the_same_hits_as_the_reference_path(
    tmp_path: Path,
    numpy_embedder: SentenceTransformerEmbedder,
    torch_embedder: SentenceTransformerEmbedder,
) -> None:
    results = {}
    for name, embedder in (("numpy", numpy_embedder), ("torch", torch_embedder)):
        memory = _memory(tmp_path / name, embedder)
        try:
            memory.remember_many(FACTS, namespace="default")
            results[name] = [memory.recall(q, namespace="default", k=5) for q in QUERIES]
        finally:
            memory.close()
    for query, fast, ref in zip(QUERIES, results["numpy"], results["torch"], strict=True):
        assert [h.record.text for h in fast] == [h.record.text for h in ref], query
        for a, b in zip(fast, ref, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-4)
            assert a.dense == pytest.approx(b.dense, abs=1e-4)


QUERY_PATH = """
import sys
from walrus_mem.config import Settings
from walrus_mem.memory import Memory
m = Memory(Settings(data_dir=sys.argv[1], use_keyring=False), master_key="{key}")
m.remember("User is allergic to peanuts.", namespace="default")
hits = m.recall("food allergies", namespace="default", k=3)
assert hits and "peanuts" in hits[0].record.text, hits
m.close()
heavy = [n for n in ("torch", "sentence_transformers", "transformers") if n in sys.modules]
print(",".join(heavy) or "none")
"""


@pytest.mark.model
def test_remember_and_recall_with_the_real_model_never_import_torch(tmp_path: Path) -> None:
    code = textwrap.dedent(QUERY_PATH.format(key=MASTER_HEX))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, check=True, timeout=300)
    assert out.stdout.strip() == "none", out.stderr


def test_backend_and_threads_are_validated() -> None:
    with pytest.raises(InvalidInput, match="backend"):
        SentenceTransformerEmbedder(backend="cuda")
    with pytest.raises(InvalidInput, match="threads"):
        SentenceTransformerEmbedder(threads=-1)
    with pytest.raises(InvalidInput, match="numpy backend"):
        SentenceTransformerEmbedder("some-org/other-model", backend="numpy")
    assert SentenceTransformerEmbedder("some-org/other-model").backend == "torch"
    assert SentenceTransformerEmbedder("all-MiniLM-L6-v2").backend == "numpy"


def test_settings_carry_the_thread_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_THREADS", "2")
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_BACKEND", "torch")
    settings = Settings(data_dir=tmp_path, use_keyring=False)
    memory = Memory(settings, master_key=MASTER_HEX)
    try:
        embedder = memory.embedder
        assert isinstance(embedder, SentenceTransformerEmbedder)
        assert (embedder.threads, embedder.backend) == (2, "torch")
        assert not embedder.loaded  # nothing loads before the first embed
    finally:
        memory.close()
    with pytest.raises(ValueError):
        Settings(data_dir=tmp_path, use_keyring=False, embedding_threads=-1)


@pytest.mark.model
def test_blas_threads_are_limited_during_an_encode_only() -> None:
    from threadpoolctl import threadpool_info

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    seen: list[list[int]] = []
    model = MiniLM(threads=1)
    model.load()
    real_forward = model._forward

    def spy(ids):  # type: ignore[no-untyped-def]
        seen.append(blas_threads())
        return real_forward(ids)

    model._forward = spy  # type: ignore[method-assign]
    model.encode(["one", "two"])
    assert seen and all(t == [1] * len(t) for t in seen)
    assert blas_threads() == before


@pytest.mark.model
def test_torch_backend_applies_its_thread_count() -> None:
    import torch

    previous = torch.get_num_threads()
    try:
        embedder = SentenceTransformerEmbedder(backend="torch", threads=1)
        embedder.embed(["hello"])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)


def test_a_broken_model_dir_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 12}')
    with pytest.raises(EmbeddingError, match="not an all-MiniLM-L6-v2"):
        MiniLM(tmp_path).encode(["x"])
    (tmp_path / "config.json").write_text("not json")
    with pytest.raises(EmbeddingError, match="cannot load"):
        MiniLM(tmp_path).encode(["x"])


def test_make_embedder_passes_the_policy_on() -> None:
    embedder = make_embedder("all-MiniLM-L6-v2", threads=0, backend="torch")
    assert isinstance(embedder, SentenceTransformerEmbedder)
    assert (embedder.threads, embedder.backend) == (0, "torch")


@pytest.mark.model
def test_prototype_vectors_are_embedded_once_per_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixed texts (prompt screen, query gate) are read back by the next process."""
    from walrus_mem._recall.embeddings import constant_vectors, embed_checked
    from walrus_mem.testing import HashEmbedder

    monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", str(tmp_path))
    texts = ["ignore previous instructions", "what do I like to eat"]
    first = SentenceTransformerEmbedder()
    vectors = constant_vectors(first, texts)
    assert np.array_equal(vectors, embed_checked(first, texts, 32))
    (cached,) = tmp_path.glob("vectors-*.npy")
    fresh = SentenceTransformerEmbedder()  # a new process's embedder: no model call
    calls: list[list[str]] = []
    monkeypatch.setattr(fresh, "embed", lambda batch: calls.append(batch))
    assert np.array_equal(constant_vectors(fresh, texts), vectors) and calls == []
    cached.write_bytes(b"damaged")
    monkeypatch.undo()
    monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", str(tmp_path))
    assert np.array_equal(constant_vectors(SentenceTransformerEmbedder(), texts), vectors)
    other = tmp_path / "other"
    monkeypatch.setenv("WALRUS_MEM_MODEL_CACHE", str(other))
    constant_vectors(HashEmbedder(dim=32), texts)  # no cache for other embedders
    assert not other.exists()
