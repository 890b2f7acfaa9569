"""The one screen every path runs before memory text or a category reaches a model.

Search, get, list, history (tools and MCP), auto-recall (hooks) and the
middleware (through the hooks) all call :func:`screen_records` (or
:func:`screen_text` for texts without a stored embedding, such as old
versions in a history). A record is withheld when:

* the text layers of :func:`walrus_mem.safety.detect_injection` flag its text
  or its category string, or
* the learned joint model (:func:`walrus_mem._safety.classifier.load_joint`:
  n-grams plus the stored embedding) flags it, when its card makes it active, or
* the semantic layer (:class:`walrus_mem._safety.injection.PrototypeBank`) finds its
  stored embedding -- computed at remember time, read from the catalog, never
  recomputed -- close to an injection prototype. The prototypes are embedded
  once per model with the memory's own embedder (no extra model load). The
  threshold is calibrated for the default model (docs/security.md); other
  models skip this layer unless :func:`set_semantic_threshold` sets one.

Categories outside :data:`walrus_mem.extract.CATEGORIES` are never rendered.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Final

from .._recall.embeddings import DEFAULT_MODEL_ID, constant_vectors
from ..extract import CATEGORIES
from ..safety import InjectionResult, detect_injection
from . import classifier
from .injection import PrototypeBank

__all__ = [
    "SEMANTIC_THRESHOLDS",
    "prototype_bank",
    "safe_category",
    "screen_records",
    "screen_text",
    "set_semantic_threshold",
]

#: Cosine threshold per embedding model id (calibrated on the tuning corpora).
SEMANTIC_THRESHOLDS: dict[str, float] = {DEFAULT_MODEL_ID: 0.73}
_BANKS: dict[str, PrototypeBank] = {}
_LOCK: Final = threading.Lock()
_CATEGORY_SET: Final = frozenset(CATEGORIES)
_CACHE_CHARS: Final = 2000


def set_semantic_threshold(model_id: str, threshold: float | None) -> None:
    """Enable (or with ``None`` disable) the semantic layer for ``model_id``."""
    with _LOCK:
        if threshold is None:
            SEMANTIC_THRESHOLDS.pop(model_id, None)
        else:
            SEMANTIC_THRESHOLDS[model_id] = float(threshold)


def safe_category(category: object) -> str | None:
    """The category if it is one of the known ones, else ``None`` (never rendered)."""
    return category if isinstance(category, str) and category in _CATEGORY_SET else None


@lru_cache(maxsize=4096)
def _detect_cached(text: str) -> InjectionResult:
    return detect_injection(text)


def _detect(text: str) -> InjectionResult:
    # Recall screens the same memories again and again: cache short texts (the
    # verdict depends on the text only). Long ones are rare and not kept around.
    return _detect_cached(text) if len(text) <= _CACHE_CHARS else detect_injection(text)


def screen_text(text: str, category: object = None) -> InjectionResult:
    """The text layers on a text and its category string."""
    result = _detect(text)
    if category is not None and safe_category(category) is None:
        flagged = _detect(str(category))
        if flagged:
            return InjectionResult(True, ("category", *flagged.labels),
                                   tuple("category: " + r for r in flagged.reasons))
    return result


def prototype_bank(memory: Any) -> tuple[PrototypeBank, float] | None:
    """The memory's prototype bank and threshold, or ``None`` if the layer is off."""
    embedder = getattr(memory, "embedder", None)
    model_id = getattr(embedder, "model_id", None)
    if embedder is None or model_id not in SEMANTIC_THRESHOLDS:
        return None
    with _LOCK:
        bank = _BANKS.get(model_id)
        if bank is None:
            bank = PrototypeBank(lambda texts: constant_vectors(embedder, texts))
            _BANKS[model_id] = bank
        return bank, SEMANTIC_THRESHOLDS[model_id]


def _joint_model(memory: Any) -> Any:
    """The learned joint model when it is consulted and the memory embeds with its model."""
    if getattr(getattr(memory, "embedder", None), "model_id", None) != DEFAULT_MODEL_ID:
        return None  # its embedding weights read the default model's vectors only
    model = classifier.load_joint()
    return model if model is not None and classifier.consulted(model) else None


def screen_records(memory: Any, records: Sequence[Any], namespace: str | None = None
                   ) -> list[InjectionResult]:
    """One verdict per record: text layers on text and category, then the stored vector's
    layers (the learned joint model, the semantic prototypes)."""
    results = [screen_text(r.text, getattr(r, "category", None)) for r in records]
    layer = prototype_bank(memory)
    joint = _joint_model(memory)
    lister = getattr(memory, "stored_vectors", None)
    if (layer is None and joint is None) or not callable(lister):
        return results
    pending = [i for i, res in enumerate(results) if not res]
    if not pending:
        return results
    import numpy as np

    vectors = lister([records[i].id for i in pending], namespace=namespace)
    have = [i for i in pending if records[i].id in vectors]
    if not have:
        return results
    if joint is not None:
        for i in have:
            vector = vectors[records[i].id]
            score = joint.score(records[i].text, vector) if vector.shape == (384,) else 0.0
            if score >= joint.threshold:
                results[i] = InjectionResult(True, ("classifier",),
                                             (f"classifier: {score:.2f} (text and embedding)",))
        have = [i for i in have if not results[i]]
    if layer is None or not have:
        return results
    bank, threshold = layer
    scores = bank.scores(np.stack([vectors[records[i].id] for i in have]))
    for i, score in zip(have, scores, strict=True):
        if float(score) >= threshold:
            results[i] = InjectionResult(True, ("semantic",),
                                         (f"semantic: {float(score):.2f} to an injection "
                                          "prototype",))
    return results
