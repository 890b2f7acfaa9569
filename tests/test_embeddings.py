"""Embedders: validation of outputs, batching, lazy loading, and the real offline model."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from walrus_mem._recall.embeddings import (
    DEFAULT_MODEL_ID,
    Embedder,
    SentenceTransformerEmbedder,
    check_vectors,
    embed_checked,
)
from walrus_mem.errors import EmbeddingError
from walrus_mem.testing import HashEmbedder


class Scripted:
    model_id = "scripted"
    dim = 4

    def __init__(self, out: object) -> None:
        self.out = out
        self.batches: list[int] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.batches.append(len(texts))
        return self.out if not callable(self.out) else self.out(texts)  # type: ignore[return-value]


def test_hash_embedder_satisfies_the_protocol() -> None:
    assert isinstance(HashEmbedder(8), Embedder)
    assert not isinstance(object(), Embedder)


def test_check_vectors_normalises_and_casts() -> None:
    out = check_vectors(np.array([[3.0, 4.0]], dtype=np.float64), 1, 2, "m")
    assert out.dtype == np.float32
    assert np.allclose(out, [[0.6, 0.8]])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[1.0, 0.0]], "not a numpy array"),
        (np.array([[1, 0]], dtype=np.int64), "not float"),
        (np.zeros((2, 2), dtype=np.float32) + 1, r"expected \(1, 2\)"),
        (np.array([[np.nan, 1.0]], dtype=np.float32), "NaN or infinite"),
        (np.array([[np.inf, 1.0]], dtype=np.float32), "NaN or infinite"),
        (np.zeros((1, 2), dtype=np.float32), "all-zero"),
    ],
)
def test_check_vectors_rejects_bad_output(value: object, message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        check_vectors(value, 1, 2, "m")


@pytest.mark.parametrize(("bad", "message"), [
    ([np.nan, 1.0], "NaN or infinite"), ([0.0, -np.inf], "NaN or infinite"),
    ([0.0, 0.0], "all-zero"), ([3e20, 1.0], "too large"),
])
@pytest.mark.parametrize("row", [0, 2])
def test_check_vectors_finds_a_bad_row_among_good_ones(bad: list[float], message: str,
                                                        row: int) -> None:
    batch = np.ones((3, 2), dtype=np.float32)
    batch[row] = bad
    with np.errstate(over="ignore"), pytest.raises(EmbeddingError, match=message):
        check_vectors(batch, 3, 2, "m")


def test_check_vectors_leaves_the_embedders_array_alone_and_matches_linalg_norm() -> None:
    raw = np.random.default_rng(1).standard_normal((5, 384)).astype(np.float32)
    kept = raw.copy()
    out = check_vectors(raw, 5, 384, "m")
    assert np.array_equal(raw, kept)  # an embedder may hand out a cached array
    assert out.flags.c_contiguous and out.dtype == np.float32
    assert np.array_equal(out, kept / np.linalg.norm(kept, axis=1, keepdims=True))
    fortran = np.asfortranarray(kept)
    assert check_vectors(fortran, 5, 384, "m").flags.c_contiguous


def test_embed_checked_batches_and_concatenates() -> None:
    emb = Scripted(lambda texts: np.ones((len(texts), 4), dtype=np.float32))
    out = embed_checked(emb, [f"t{i}" for i in range(10)], batch_size=4)
    assert emb.batches == [4, 4, 2]
    assert out.shape == (10, 4)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert embed_checked(emb, [], batch_size=4).shape == (0, 4)


def test_embedder_exceptions_become_embedding_error() -> None:
    def boom(texts: list[str]) -> np.ndarray:
        raise RuntimeError("CUDA on fire")

    with pytest.raises(EmbeddingError, match="CUDA on fire") as info:
        embed_checked(Scripted(boom), ["x"], batch_size=4)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_sentence_transformer_embedder_is_lazy() -> None:
    emb = SentenceTransformerEmbedder()
    assert emb.model_id == DEFAULT_MODEL_ID
    assert emb.dim == 384  # known without loading
    assert not emb.loaded
    assert "not loaded" in repr(emb)


def test_unknown_model_fails_offline_with_embedding_error() -> None:
    emb = SentenceTransformerEmbedder("no-such-org/no-such-model-xyz")
    with pytest.raises(EmbeddingError, match="offline"):
        emb.embed(["hello"])


def test_importing_and_opening_memory_does_not_import_torch(tmp_path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from walrus_mem.config import Settings
        from walrus_mem.memory import Memory
        m = Memory(Settings(data_dir={str(tmp_path)!r}, use_keyring=False))
        m.list("default"); m.stats("default"); m.close()
        heavy = [n for n in ("torch", "sentence_transformers", "transformers") if n in sys.modules]
        print(",".join(heavy) or "none")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "none"


@pytest.mark.model
def test_real_model_embeds_normalised_384_vectors(
    real_embedder: SentenceTransformerEmbedder,
) -> None:
    texts = ["I'm allergic to peanuts", "food allergies", "The rocket launched at dawn"]
    out = embed_checked(real_embedder, texts, batch_size=2)
    assert out.shape == (3, 384)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-4)
    assert float(out[0] @ out[1]) > float(out[0] @ out[2]) + 0.1


def test_test_hash_switch_selects_the_fake_embedder_without_loading_a_model() -> None:
    from walrus_mem._recall.embeddings import SentenceTransformerEmbedder, make_embedder
    from walrus_mem.testing import HashEmbedder

    fake = make_embedder("test-hash-32")
    assert isinstance(fake, HashEmbedder) and fake.dim == 32
    assert isinstance(make_embedder("test-hash"), HashEmbedder)
    # Anything else is a real model name, loaded lazily (nothing loads here).
    assert isinstance(make_embedder("test-hashish"), SentenceTransformerEmbedder)
