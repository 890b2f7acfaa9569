"""all-MiniLM-L6-v2 on onnxruntime: the warm query path of long-lived processes.

A numpy encode of one query spends about 85 % of its time in OpenBLAS sgemm,
which packs the weight matrices again on every call. onnxruntime packs them
once per session, so a warm one-query encode costs a fraction of numpy's;
importing onnxruntime and building the session costs more than numpy's cold
start, which is why the CLI keeps numpy and long-lived processes switch
(:class:`walrus_mem._recall.embeddings.SentenceTransformerEmbedder`).

The ONNX graph is *written out* from the packaged ``model.safetensors``
(:func:`export`), not traced: the same computation as :mod:`walrus_mem._recall.minilm`
(BERT encoder, mean pooling over the attention mask, L2 normalisation) as
ONNX operators, with the weights as initializers. Exporting needs the
``onnx`` package, no torch, and nothing downloaded; it runs once per model
file into the cache directory (:func:`cached_model`) and takes about a second.
Vectors match sentence-transformers' to float32 rounding (tests/test_minilm.py).

Thread policy: the session runs on ``threads`` intra-op threads (default 1),
one inter-op thread, sequential execution, and its worker threads never spin
waiting for work (spinning burns the core a busy neighbour needs).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .._local.private_dirs import make_private_dirs
from ..errors import EmbeddingError, MissingExtra
from .minilm import (
    _HEADS,
    _LAYERS,
    MAX_SEQ_LENGTH,
    _read_safetensors,
    default_model_dir,
    model_cache_dir,
)
from .native import onnxruntime_safe

__all__ = ["EXPORT_FORMAT", "WARM_AFTER_S", "OnnxMiniLM", "WarmingMiniLM", "available",
           "cached_model", "export"]

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

EXPORT_FORMAT: Final = 1
"""Bumped when :func:`export` writes a different graph (part of the cache file's name)."""
_OPSET: Final = 17  # LayerNormalization
_WIDTH: Final = 384
WARM_AFTER_S: Final = 10.0
"""An encode this long after a process's first starts the switch to onnxruntime."""
_EXIT_WAIT_S: Final = 60.0


def available() -> bool:
    """Whether onnxruntime and onnx are installed (the ``onnx`` extra) and safe to import."""
    from importlib.util import find_spec

    return (find_spec("onnxruntime") is not None and find_spec("onnx") is not None
            and onnxruntime_safe())


def _weights_digest(path: Path) -> str:
    """Identity of a weights file: its size, mtime and the BLAKE2b of its header (cheap)."""
    st = path.stat()
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    return hashlib.blake2b(f"{st.st_size}:{st.st_mtime_ns}:".encode() + head,
                           digest_size=10).hexdigest()


def cached_model(model_dir: Path | None = None, cache_dir: Path | None = None) -> Path:
    """The ONNX file for ``model_dir``'s weights, exported into the cache on first use."""
    model_dir = model_dir if model_dir is not None else default_model_dir()
    _check_config(model_dir)
    weights = model_dir / "model.safetensors"
    directory = cache_dir if cache_dir is not None else model_cache_dir()
    target = directory / f"all-minilm-l6-v2.{_weights_digest(weights)}.v{EXPORT_FORMAT}.onnx"
    if not target.exists():
        make_private_dirs(directory)
        export(model_dir, target)
    return target


def _check_config(model_dir: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    if (config.get("num_hidden_layers"), config.get("num_attention_heads"),
            config.get("hidden_act")) != (_LAYERS, _HEADS, "gelu"):
        raise EmbeddingError(f"{model_dir} is not an all-MiniLM-L6-v2 model")
    return config


def export(model_dir: Path, target: Path) -> None:
    """Write the MiniLM graph with ``model_dir``'s weights to ``target`` (atomically)."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise MissingExtra("the onnx backend needs the onnx extra: "
                           "pip install 'walrus-mem[onnx]'", extra="onnx") from exc
    eps = float(_check_config(model_dir).get("layer_norm_eps", 1e-12))
    w = _read_safetensors(model_dir / "model.safetensors")
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: Any, dtype: Any = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))  # 0-d stays 0-d
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    width = int(w["embeddings.word_embeddings.weight"].shape[1])
    head = width // _HEADS
    e = "embeddings."
    # Embeddings: word + position (first seq rows) + token type 0, then LayerNorm.
    shape = node("Shape", ["input_ids"], "ids_shape")
    seq = node("Slice", [shape, const("one", [1], np.int64), const("two", [2], np.int64)],
               "seq_len")
    positions = node("Slice", [const("position_table", w[e + "position_embeddings.weight"]),
                               const("zero", [0], np.int64), seq, const("axis0", [0], np.int64)],
                     "positions")
    words = node("Gather", [const("word_table", w[e + "word_embeddings.weight"]), "input_ids"],
                 "words")
    x = node("Add", [words, positions], "emb_sum")
    x = node("Add", [x, const("token_type", w[e + "token_type_embeddings.weight"][0])], "emb_tt")
    x = node("LayerNormalization", [x, const("emb_ln_w", w[e + "LayerNorm.weight"]),
                                    const("emb_ln_b", w[e + "LayerNorm.bias"])],
             "emb_ln", axis=-1, epsilon=eps)
    # Padded keys get a large negative bias (softmax weight 0), as in transformers.
    mask = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    keep = node("Sub", [const("f_one", 1.0), mask], "mask_inv")
    bias = node("Mul", [keep, const("neg_big", -1e9)], "mask_bias_2d")
    bias = node("Unsqueeze", [bias, const("axes12", [1, 2], np.int64)], "mask_bias")
    split_shape = const("split_shape", [0, 0, 3, _HEADS, head], np.int64)
    merge_shape = const("merge_shape", [0, 0, width], np.int64)
    scale = const("scale", 1.0 / np.sqrt(head))
    for i in range(_LAYERS):
        p = f"encoder.layer.{i}."
        a = p + "attention."
        qkv_w = np.concatenate([w[a + f"self.{n}.weight"] for n in ("query", "key", "value")]).T
        qkv_b = np.concatenate([w[a + f"self.{n}.bias"] for n in ("query", "key", "value")])
        L = f"l{i}_"
        qkv = node("MatMul", [x, const(L + "qkv_w", qkv_w)], L + "qkv_mm")
        qkv = node("Add", [qkv, const(L + "qkv_b", qkv_b)], L + "qkv")
        qkv = node("Reshape", [qkv, split_shape], L + "qkv_split")
        qkv = node("Transpose", [qkv], L + "qkv_t", perm=[2, 0, 3, 1, 4])  # (3, b, h, s, d)
        q = node("Gather", [qkv, const(L + "i0", 0, np.int64)], L + "q", axis=0)
        k = node("Gather", [qkv, const(L + "i1", 1, np.int64)], L + "k", axis=0)
        v = node("Gather", [qkv, const(L + "i2", 2, np.int64)], L + "v", axis=0)
        kt = node("Transpose", [k], L + "kt", perm=[0, 1, 3, 2])
        s = node("MatMul", [q, kt], L + "scores_raw")
        s = node("Mul", [s, scale], L + "scores_scaled")
        s = node("Add", [s, bias], L + "scores")
        s = node("Softmax", [s], L + "probs", axis=-1)
        ctx = node("MatMul", [s, v], L + "ctx_h")
        ctx = node("Transpose", [ctx], L + "ctx_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge_shape], L + "ctx")
        out = node("MatMul", [ctx, const(L + "out_w", w[a + "output.dense.weight"].T)],
                   L + "out_mm")
        out = node("Add", [out, const(L + "out_b", w[a + "output.dense.bias"])], L + "out")
        out = node("Add", [out, x], L + "res1")
        x = node("LayerNormalization", [out, const(L + "ln1_w", w[a + "output.LayerNorm.weight"]),
                                        const(L + "ln1_b", w[a + "output.LayerNorm.bias"])],
                 L + "ln1", axis=-1, epsilon=eps)
        up = node("MatMul", [x, const(L + "up_w", w[p + "intermediate.dense.weight"].T)],
                  L + "up_mm")
        up = node("Add", [up, const(L + "up_b", w[p + "intermediate.dense.bias"])], L + "up")
        # BERT's exact GELU: 0.5 x (1 + erf(x / sqrt 2)) (onnxruntime fuses it).
        g = node("Mul", [up, const(L + "rsqrt2", 0.7071067811865476)], L + "g_scaled")
        g = node("Erf", [g], L + "g_erf")
        g = node("Add", [g, const(L + "g_one", 1.0)], L + "g_plus")
        g = node("Mul", [up, g], L + "g_mul")
        g = node("Mul", [g, const(L + "g_half", 0.5)], L + "gelu")
        down = node("MatMul", [g, const(L + "down_w", w[p + "output.dense.weight"].T)],
                    L + "down_mm")
        down = node("Add", [down, const(L + "down_b", w[p + "output.dense.bias"])], L + "down")
        down = node("Add", [down, x], L + "res2")
        x = node("LayerNormalization", [down, const(L + "ln2_w", w[p + "output.LayerNorm.weight"]),
                                        const(L + "ln2_b", w[p + "output.LayerNorm.bias"])],
                 L + "ln2", axis=-1, epsilon=eps)
    # Mean pooling over the mask, then L2 normalisation.
    m3 = node("Unsqueeze", [mask, const("axis2", [2], np.int64)], "mask_3d")
    summed = node("ReduceSum", [node("Mul", [x, m3], "masked"), const("axis1", [1], np.int64)],
                  "summed", keepdims=0)
    count = node("ReduceSum", [mask, "axis1"], "count", keepdims=1)
    count = node("Max", [count, const("tiny", 1e-9)], "count_safe")
    pooled = node("Div", [summed, count], "pooled")
    norm = node("ReduceL2", [pooled], "norm", axes=[1], keepdims=1)  # axes: attribute in 17
    norm = node("Max", [norm, const("tiny_norm", 1e-12)], "norm_safe")
    node("Div", [pooled, norm], "sentence_embedding")
    graph = helper.make_graph(
        nodes, "all-minilm-l6-v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                       ["batch", width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)],
                              producer_name="walrus_mem")
    model.ir_version = 8  # readable by onnxruntime >= 1.14
    onnx.checker.check_model(model)
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
            fh.write(model.SerializeToString())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


class OnnxMiniLM:
    """The all-MiniLM-L6-v2 sentence encoder on onnxruntime (thread-safe, lazy).

    Same interface as :class:`walrus_mem._recall.minilm.MiniLM`: :meth:`encode` returns
    L2-normalised float32 vectors of shape ``(len(texts), 384)``.
    """

    def __init__(self, model_dir: str | Path | None = None, *, batch_size: int = 32,
                 threads: int = 1, cache_dir: Path | None = None) -> None:
        self._dir = Path(model_dir) if model_dir is not None else None
        self._cache_dir = cache_dir
        self._batch_size = max(1, batch_size)
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def load(self) -> None:
        """Export the graph if not cached, build the session, read the tokenizer."""
        with self._lock:
            if self._session is not None:
                return
            model_dir = self._dir if self._dir is not None else default_model_dir()
            if not onnxruntime_safe():
                raise EmbeddingError("onnxruntime cannot be loaded into this process: usearch "
                                     "was imported before walrus_mem "
                                     "(see walrus_mem._recall.native)")
            # onnxruntime's telemetry would keep a device id and a database under
            # ~/.cache/Microsoft (outside WALRUS_MEM_HOME); a user's own setting wins
            os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingExtra("the onnx backend needs the onnx extra: "
                                   "pip install 'walrus-mem[onnx]'", extra="onnx") from exc
            try:
                path = cached_model(model_dir, self._cache_dir)
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(f"cannot write the ONNX MiniLM for {model_dir}: "
                                     f"{type(exc).__name__}: {exc}") from exc
            options = ort.SessionOptions()
            if self._threads:
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            options.log_severity_level = 3  # warnings about unused initializers etc.
            try:
                session = ort.InferenceSession(str(path), options,
                                               providers=["CPUExecutionProvider"])
            except Exception as exc:
                raise EmbeddingError(f"cannot load the ONNX MiniLM {path.name}: "
                                     f"{type(exc).__name__}: {exc}") from exc
            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.enable_truncation(MAX_SEQ_LENGTH)
            self._tokenizer = tokenizer
            self._session = session

    def encode(self, texts: list[str]) -> Vectors:
        """Sentence vectors for ``texts``, L2-normalised."""
        self.load()
        out = np.empty((len(texts), _WIDTH), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = [enc.ids for enc in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # little padding
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            seq = max(len(ids[i]) for i in chunk)
            tokens = np.zeros((len(chunk), seq), dtype=np.int64)
            mask = np.zeros((len(chunk), seq), dtype=np.int64)
            for row, i in enumerate(chunk):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            out[chunk] = self._session.run(None, {"input_ids": tokens,
                                                  "attention_mask": mask})[0]
        return out


class WarmingMiniLM:
    """numpy for a process's first encodes, onnxruntime once the process proves long-lived.

    Encodes run on numpy (the fastest cold start) until one comes
    :data:`WARM_AFTER_S` or more after the first: that one starts building the
    onnxruntime session in a background thread (exporting the graph the first
    time ever), and every encode after the session is ready runs on it. A CLI
    command, done within seconds (even on a loaded machine), never loads
    onnxruntime; a server or agent answering its next query switches. If the
    session cannot be built, numpy stays (logged once). A process exiting while the session is built
    waits for it (atexit): tearing onnxruntime down under a running
    constructor could crash the exit.
    """

    def __init__(self, numpy_model: Any, onnx_model: OnnxMiniLM) -> None:
        self._numpy = numpy_model
        self._onnx = onnx_model
        self._fast: OnnxMiniLM | None = None
        self._first: float | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def runtime(self) -> str:
        """``onnx`` once the session is serving, else ``numpy``."""
        return "onnx" if self._fast is not None else "numpy"

    def load(self) -> None:
        self._numpy.load()

    def encode(self, texts: list[str]) -> Vectors:
        fast = self._fast
        if fast is not None:
            return fast.encode(texts)
        now = time.monotonic()
        if self._first is None:
            self._first = now
        elif self._thread is None and now - self._first >= WARM_AFTER_S:
            self._start()
        return self._numpy.encode(texts)  # type: ignore[no-any-return]

    def warm(self, timeout: float | None = None) -> bool:
        """Build the onnxruntime session now (or wait for the build); True if it serves."""
        thread = self._start()
        thread.join(timeout)
        return self._fast is not None

    def _start(self) -> threading.Thread:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._build, name="walrus-mem-onnx",
                                                daemon=True)
                self._thread.start()
                atexit.register(self._thread.join, _EXIT_WAIT_S)
            return self._thread

    def _build(self) -> None:
        try:
            self._onnx.load()
        except Exception as exc:  # any failure leaves numpy serving
            log.warning("onnxruntime embedding unavailable, staying on numpy (%s: %s)",
                        type(exc).__name__, exc)
            return
        self._fast = self._onnx
        log.info("embedding on onnxruntime from now on")
