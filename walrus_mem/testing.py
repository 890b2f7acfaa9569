"""Helpers for tests and benchmarks that must not load a real model."""

from __future__ import annotations

import re
from typing import Final

import numpy as np
import numpy.typing as npt
from nacl.encoding import RawEncoder
from nacl.hash import blake2b

__all__ = ["HashEmbedder"]

_WORD: Final = re.compile(r"[\w']+", re.UNICODE)


class HashEmbedder:
    """Deterministic bag-of-words embedder (feature hashing), normalised.

    Texts sharing words get similar vectors, which is enough to test ranking
    plumbing without the 6 s sentence-transformers import.
    """

    def __init__(self, dim: int = 64, model_id: str = "test-hash-embedder") -> None:
        self.dim = dim
        self.model_id = f"{model_id}-{dim}"
        self.weights_digest = "feature-hash-v1"  # the algorithm is the whole model
        self.calls = 0

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                h = blake2b(word.encode(), digest_size=8, encoder=RawEncoder)
                idx = int.from_bytes(h[:4], "little") % self.dim
                sign = 1.0 if h[4] & 1 else -1.0
                out[row, idx] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out
