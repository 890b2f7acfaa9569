"""The learned joint model at capture, on the vector the write path computes anyway.

:func:`walrus_mem.safety.screen_fact` runs before a fact has a vector, so it runs
the rules only. The capture paths (auto-capture, ``memory_store``,
``memory_update``, ``analyze``) then store through ``remember_many`` / ``update``,
which embed the new facts moments later. Wrapped in :func:`screening`, that
write path (:mod:`walrus_mem._memory.writer`) hands the new facts and their
vectors to :func:`flags` before anything is written: a fact the joint model
(:func:`walrus_mem._safety.classifier.load_joint`) flags is not stored; it is
reported in ``RememberManyResult.failed`` with :data:`REFUSED` (``update``
raises :class:`~walrus_mem.errors.UnsafeContent`) and listed in the
:class:`Refused` the context yields, so the caller reports it as an injection.
No second embedding: the model reads the vector that is stored with the fact.

Outside :func:`screening` (``Memory.remember`` called directly, imports, restores,
grants) nothing changes: the caller's own text is stored as given. As at recall,
only vectors of the default embedding model are scored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from .._recall.embeddings import DEFAULT_MODEL_ID
from . import classifier

__all__ = ["REFUSED", "Refused", "flags", "refused_message", "screening"]

REFUSED: Final = "UnsafeContent: refused by the injection screen (classifier)"


@dataclass
class Refused:
    """What the write path refused under :func:`screening`: item index -> model score."""

    scores: dict[int, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.scores)


_ACTIVE: ContextVar[Refused | None] = ContextVar("walrus_mem_capture_screen", default=None)


@contextmanager
def screening() -> Iterator[Refused]:
    """Run the joint model on the facts the write path embeds inside this block."""
    refused = Refused()
    token = _ACTIVE.set(refused)
    try:
        yield refused
    finally:
        _ACTIVE.reset(token)


def flags(texts: Sequence[str], vectors: npt.NDArray[np.float32],
          model_id: str | None) -> list[float | None]:
    """Per text, the joint model's score when it flags the text (else ``None``).

    All ``None`` outside :func:`screening`, for another embedding model, or when the
    learned layer is off (card inactive, :func:`classifier.disabled`).
    """
    out: list[float | None] = [None] * len(texts)
    if _ACTIVE.get() is None or model_id != DEFAULT_MODEL_ID or not len(texts):
        return out
    model = classifier.load_joint()
    if model is None or not classifier.consulted(model):
        return out
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        if np.shape(vector) == (384,):
            score = model.score(text, vector)
            out[i] = score if score >= model.threshold else None
    return out


def refused_message(index: int, score: float) -> str:
    """Record item ``index`` as refused in the active :func:`screening`; the error text."""
    active = _ACTIVE.get()
    if active is not None:
        active.scores[index] = score
    return REFUSED
