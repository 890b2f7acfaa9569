"""The learned injection screen: logistic regression on hashed character and word n-grams.

The screen's first layer. Trained by ``python bench/train_injection.py`` on public
labelled corpora (S-Labs prompt-injection-dataset, MIT; neuralchemy
Prompt-injection-dataset, Apache-2.0) and the memory-style corpora in
tests/data; the weights ship in ``injection_classifier.npz`` next to this file,
the data hashes, threshold and figures in ``injection_classifier.json``. Run
time needs numpy only: the same :func:`features` builds the training matrix.

Features: the text is normalised (format characters shown or dropped, NFKC,
casefolded, whitespace collapsed); character 1- to 5-grams (any script, no
tokeniser) and word 1- and 2-grams are hashed into ``2**BITS`` buckets,
weighted ``log(1 + count)`` and scaled to unit length. A long text is scored as
a whole, or, when the card says ``"windows": true``, in overlapping windows of
which the highest counts (an instruction buried in a long document is then
diluted less, but long benign texts score higher and raise every threshold; the
shipped models score the whole text: docs/security.md).

Two models ship in the weights file. The *text* model reads the n-grams only:
:func:`walrus_mem.safety.detect_injection` runs it (capture, and recall of
texts without a stored vector). The *joint* model adds the MiniLM embedding
the fact gets at remember time (384 weights on the unit vector): the recall
screen (:func:`walrus_mem._safety.prompt_screen.screen_records`) runs it on
the stored vector, so it costs no embedding. Each has its own threshold and
``active`` switch in the card.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from .format_chars import reveal_format_chars

__all__ = [
    "BITS",
    "Classifier",
    "consulted",
    "disabled",
    "features",
    "forced",
    "flagged_score",
    "is_injection",
    "load",
    "load_joint",
    "normalise",
    "score",
]

BITS: Final = 18
WEIGHTS: Final = Path(__file__).with_name("injection_classifier.npz")
CARD: Final = Path(__file__).with_name("injection_classifier.json")
_CHAR_NS: Final = (3, 4, 5)
_PUNCT: Final = re.compile(r"[^\w\s]+")
_WINDOW: Final = 600
_STRIDE: Final = 400
_PRIME: Final = np.uint64(1_000_003)
_GOLDEN: Final = np.uint64(0x9E3779B97F4A7C15)
_SHIFT: Final = np.uint64(64 - BITS)
_WORD: Final = re.compile(r"\w+")


def normalise(text: str) -> str:
    """The form every feature is read from (training and run time alike)."""
    text = unicodedata.normalize("NFKC", reveal_format_chars(text)).casefold()
    return " ".join(text.split())


def _char_buckets(text: str) -> npt.NDArray[np.uint64]:
    codes = np.frombuffer((" " + text + " ").encode("utf-32-le"), dtype=np.uint32)
    codes = codes.astype(np.uint64)
    out = []
    with np.errstate(over="ignore"):  # the hashes wrap modulo 2**64 on purpose
        for n in _CHAR_NS:
            if len(codes) < n:
                break
            h = np.full(len(codes) - n + 1, np.uint64(n), dtype=np.uint64)
            for k in range(n):
                h = h * _PRIME + codes[k:len(codes) - n + 1 + k]
            out.append((h * _GOLDEN) >> _SHIFT)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


def _word_buckets(text: str) -> npt.NDArray[np.uint64]:
    words = _WORD.findall(text)
    pairs = zip(words, words[1:], strict=False)
    grams = [f"w {w}" for w in words] + [f"b {a} {b}" for a, b in pairs]
    h = np.array([zlib.crc32(g.encode()) for g in grams], dtype=np.uint64)
    with np.errstate(over="ignore"):
        return ((h + np.uint64(0x5BD1E995)) * _GOLDEN) >> _SHIFT


def features(normalised: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Sparse feature vector of a :func:`normalise` d text: bucket indices and values."""
    # Punctuation says more about the corpora (benign rows are questions) than about intent.
    words = " ".join(_PUNCT.sub(" ", normalised).split())
    buckets = np.concatenate([_char_buckets(words), _word_buckets(words)])
    index, counts = np.unique(buckets.astype(np.int64), return_counts=True)
    values = np.log1p(counts).astype(np.float32)
    norm = float(np.sqrt(np.dot(values, values)))
    return index, values / norm if norm else values


def windows(normalised: str) -> list[str]:
    """The text itself when short, else overlapping windows covering all of it."""
    if len(normalised) <= _WINDOW:
        return [normalised]
    starts = range(0, len(normalised) - _WINDOW + _STRIDE, _STRIDE)
    return [normalised[s:s + _WINDOW] for s in starts]


@dataclass(frozen=True)
class Classifier:
    """Weights, bias and the decision threshold (chosen on training data only).

    ``active`` says whether the screen consults the model: the training script
    sets it only when the calibration figures meet the targets (docs/security.md).
    """

    weights: npt.NDArray[np.float32]
    bias: float
    threshold: float
    active: bool = True
    embedding_weights: npt.NDArray[np.float32] | None = None  # the joint model's
    windowed: bool = True  # a long text scores its worst window; else the whole text

    def score(self, text: str, embedding: npt.ArrayLike | None = None) -> float:
        """Probability that ``text`` is an injection (highest over its windows).

        The joint model needs ``embedding`` (the text's MiniLM vector); the text model
        ignores it.
        """
        norm = normalise(text)
        if not norm:
            return 0.0
        offset = self.bias
        if self.embedding_weights is not None:
            if embedding is None:
                raise ValueError("the joint model needs the text's embedding")
            vector = np.asarray(embedding, dtype=np.float32).reshape(-1)
            offset += float(np.dot(self.embedding_weights, vector))
        best = -np.inf
        for part in windows(norm) if self.windowed else [norm]:
            index, values = features(part)
            best = max(best, float(np.dot(self.weights[index], values)) + offset)
        return float(1.0 / (1.0 + np.exp(-best)))

    def is_injection(self, text: str, embedding: npt.ArrayLike | None = None) -> bool:
        return self.score(text, embedding) >= self.threshold


_LOCK: Final = threading.Lock()
_LOADED: dict[str, Classifier | None] = {}
_OFF: Final = threading.local()


@contextmanager
def _switch(name: str) -> Iterator[None]:
    before = getattr(_OFF, name, False)
    setattr(_OFF, name, True)
    try:
        yield
    finally:
        setattr(_OFF, name, before)


def disabled() -> AbstractContextManager[None]:
    """Switch the learned layer off in this thread (to measure the rules alone)."""
    return _switch("off")


def forced() -> AbstractContextManager[None]:
    """Consult the model in this thread even when its card leaves it inactive."""
    return _switch("forced")


def _read(weights: Path, card: Path) -> dict[str, Classifier | None]:
    meta = json.loads(card.read_text(encoding="utf-8"))
    windowed = bool(meta.get("windows", True))
    with np.load(weights) as data:
        text = Classifier(data["weights"].astype(np.float32), float(data["bias"]),
                          float(meta["threshold"]), bool(meta.get("active")),
                          windowed=windowed)
        joint = None
        if "joint_weights" in data.files and "joint" in meta:
            joint = Classifier(data["joint_weights"].astype(np.float32),
                               float(data["joint_bias"]), float(meta["joint"]["threshold"]),
                               bool(meta["joint"].get("active")),
                               data["joint_embedding"].astype(np.float32), windowed)
    return {"text": text, "joint": joint}


def _models(weights: Path, card: Path) -> dict[str, Classifier | None]:
    if weights != WEIGHTS:
        return _read(weights, card)
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                _LOADED.update(_read(weights, card))
    return _LOADED


def load(weights: Path = WEIGHTS, card: Path = CARD) -> Classifier:
    """The text model, from the weights file and its card; cached after the first call."""
    model = _models(weights, card)["text"]
    assert model is not None
    return model


def load_joint(weights: Path = WEIGHTS, card: Path = CARD) -> Classifier | None:
    """The joint (n-grams + embedding) model, or ``None`` if the weights hold none."""
    return _models(weights, card)["joint"]


def score(text: str) -> float:
    """Injection probability of ``text`` under the shipped model."""
    return load().score(text)


def is_injection(text: str) -> bool:
    """Whether the shipped model flags ``text`` at its shipped threshold."""
    return flagged_score(text) is not None


def consulted(model: Classifier) -> bool:
    """Whether the screen consults ``model`` in this thread (active or forced, not disabled)."""
    if getattr(_OFF, "off", False):
        return False
    return model.active or bool(getattr(_OFF, "forced", False))


def flagged_score(text: str, embedding: npt.ArrayLike | None = None) -> float | None:
    """The score when the shipped model flags ``text``, else ``None``.

    With ``embedding`` (the text's default-model vector) the joint model
    decides, without it the text model. ``None`` too when the layer is switched
    off (:func:`disabled`) or the card leaves that model inactive (unless
    :func:`forced`).
    """
    if getattr(_OFF, "off", False):
        return None
    model = load_joint() if embedding is not None else load()
    if model is None or not consulted(model):
        return None
    value = model.score(text, embedding)
    return value if value >= model.threshold else None
