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
weighted ``log(1 + count)`` and scaled to unit length. Long texts are scored in
overlapping windows and the highest window counts, so an instruction buried in
a long document is not diluted by it.
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
    "disabled",
    "features",
    "forced",
    "flagged_score",
    "is_injection",
    "load",
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

    def score(self, text: str) -> float:
        """Probability that ``text`` is an injection (highest over its windows)."""
        norm = normalise(text)
        if not norm:
            return 0.0
        best = -np.inf
        for part in windows(norm):
            index, values = features(part)
            best = max(best, float(np.dot(self.weights[index], values)) + self.bias)
        return float(1.0 / (1.0 + np.exp(-best)))

    def is_injection(self, text: str) -> bool:
        return self.score(text) >= self.threshold


_LOCK: Final = threading.Lock()
_LOADED: list[Classifier] = []
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


def load(weights: Path = WEIGHTS, card: Path = CARD) -> Classifier:
    """Read the weights file and its card (threshold); cached after the first call."""
    if weights == WEIGHTS and _LOADED:
        return _LOADED[0]
    with _LOCK:
        if weights == WEIGHTS and _LOADED:
            return _LOADED[0]
        with np.load(weights) as data:
            vector = data["weights"].astype(np.float32)
            bias = float(data["bias"])
        meta = json.loads(card.read_text(encoding="utf-8"))
        model = Classifier(vector, bias, float(meta["threshold"]), bool(meta.get("active")))
        if weights == WEIGHTS:
            _LOADED.append(model)
        return model


def score(text: str) -> float:
    """Injection probability of ``text`` under the shipped model."""
    return load().score(text)


def is_injection(text: str) -> bool:
    """Whether the shipped model flags ``text`` at its shipped threshold."""
    return flagged_score(text) is not None


def flagged_score(text: str) -> float | None:
    """The score when the shipped model flags ``text``, else ``None``.

    ``None`` too when the layer is switched off (:func:`disabled`) or the card
    leaves the model inactive (unless :func:`forced`).
    """
    if getattr(_OFF, "off", False):
        return None
    model = load()
    if not (model.active or getattr(_OFF, "forced", False)):
        return None
    value = model.score(text)
    return value if value >= model.threshold else None
