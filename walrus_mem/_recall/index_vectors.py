"""Where a namespace index keeps its int8 vectors (the saved USearch file, or copies), and
how a vector becomes int8 (:func:`quantize`).

``NamespaceIndex`` (index.py) reads a memory's vector, by slot, from one of two places:

* the memories that the USearch file it last saved or opened holds (the row's
  ``file_slot``): from that file's vector matrix, mapped read-only (usearch_file.py),
  while the graph is a view of the file; from the graph itself once a write copied it
  into RAM (``NamespaceIndex._saved_vectors``: the file's pages are then not held a
  second time);
* the *copies*, an array addressed by slot (:func:`lazy_zeros`) holding the others only:
  pending memories (not in the graph yet) and those written since that save.

A save writes the graph, reads from the new file which slot holds which key
(:func:`file_slots`), and drops the copies of the memories it holds; only the remaining
copies are saved beside it. So the index directory keeps a built memory's vector once,
and a process holds in RAM only the copies written since its last save.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ..errors import LocalStoreError

__all__ = ["VECTOR_DTYPE", "SlotVectors", "file_slots", "graph_vectors", "lazy_zeros",
           "quantize"]

VECTOR_DTYPE: Final = np.dtype("i1")
_INT8_MAX: Final = 127.0


def quantize(vectors: npt.ArrayLike) -> npt.NDArray[np.int8]:
    """Each vector (a row, or one vector) as int8, scaled by its own largest component to
    ±127 and rounded: what the index stores and searches with (384 B a 384-d vector,
    float16 took 768: issue 28's data dir at 1M memories).

    The cosine does not see a vector's scale, so no scale is kept. USearch's own cast for
    metric cos (float input to an ``i8`` index) multiplies the *normalised* vector by 127
    and truncates: a 384-d unit vector's components are about ±0.05, so they land within
    ±25 (about 5 bits) and cosines move by up to 0.06; scaled here they span ±127, and a
    cosine moves by about 0.0003 on MiniLM's vectors, 0.0016 at most (float16: 0.00001;
    bench/index_int8.py, docs/benchmarks.md "Run 5").
    int8 input is taken as it is (already quantized: a copy, or the graph's)."""
    arr = np.asarray(vectors)
    if arr.dtype == VECTOR_DTYPE:
        return arr
    arr = arr.astype(np.float32, copy=False)
    peak = np.max(np.abs(arr), axis=-1, keepdims=True)
    scale = np.divide(_INT8_MAX, peak, out=np.zeros_like(peak), where=peak > 0)
    out: npt.NDArray[np.int8] = np.rint(arr * scale).astype(VECTOR_DTYPE)
    return out


def lazy_zeros(count: int, dim: int) -> npt.NDArray[np.int8]:
    """A zeroed int8 (count, dim) array whose pages take memory only once written: the
    copies are addressed by slot but hold few rows (a million-slot array costs nothing
    until a row is stored). An anonymous mapping, not np.zeros: whether calloc maps
    fresh pages depends on the allocator's thresholds. Private, not shared (mmap's
    default): a shared one gives a page read before it is written a page of its own,
    so gathers over rows never stored (a recall's mixed candidates) took memory (117 MB
    at 1M memories after 1,200 recalls); a private one reads them as the zero page."""
    if count * dim == 0:
        return np.zeros((count, dim), VECTOR_DTYPE)
    size = count * dim * VECTOR_DTYPE.itemsize
    private = getattr(mmap, "MAP_PRIVATE", None)  # not on Windows (no flags there)
    buffer = mmap.mmap(-1, size) if private is None else mmap.mmap(-1, size, flags=private)
    return np.frombuffer(buffer, dtype=VECTOR_DTYPE).reshape(count, dim)


def file_slots(keys: npt.NDArray[np.int64], built: npt.NDArray[np.bool_],
               file_keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
    """Per row (``keys``: -1 for a free row), the USearch file slot whose key is the row's
    (``file_keys``: the key of each file slot, -1 if freed), or -1: rows not ``built``
    (pending: not in the graph, so not in the file) and keys the file does not hold."""
    out = np.full(len(keys), -1, dtype=np.int32)
    in_file = np.flatnonzero(file_keys >= 0)
    if not len(in_file):
        return out
    order = np.argsort(file_keys[in_file], kind="stable")
    sorted_keys = file_keys[in_file][order]
    rows = np.flatnonzero(built & (keys >= 0))
    pos = np.minimum(np.searchsorted(sorted_keys, keys[rows]), len(sorted_keys) - 1)
    found = sorted_keys[pos] == keys[rows]
    out[rows[found]] = in_file[order[pos[found]]]
    return out


def graph_vectors(index: Any, keys: npt.NDArray[np.int64], dim: int
                  ) -> npt.NDArray[np.int8]:
    """The int8 vectors an int8 USearch ``index`` holds for ``keys`` (every one
    present), as stored: ``Index.get``'s own call without its per-key views and tuple
    (about 27 µs per 100 keys against 57)."""
    from usearch.compiled import ScalarKind  # loaded by index.py already (after native.py)

    if not len(keys):
        return np.zeros((0, dim), VECTOR_DTYPE)
    wanted = np.ascontiguousarray(keys, dtype=np.uint64)
    compiled = getattr(index, "_compiled", None)
    got = (compiled.get_many(wanted, ScalarKind.I8) if compiled is not None
           else index.get(wanted, dtype="i8"))
    try:
        rows = np.concatenate(got)
    except (TypeError, ValueError) as exc:  # a None: a key the graph does not hold
        raise LocalStoreError("index rows name a memory its graph does not hold") from exc
    out: npt.NDArray[np.int8] = rows.view(VECTOR_DTYPE).reshape(len(wanted), dim)
    return out


class SlotVectors:
    """``idx.vectors[slots]``: the int8 vectors at ``slots`` (an int, an int array or a
    boolean mask), wherever each is kept (``read``: ``NamespaceIndex.vectors_at``)."""

    def __init__(self, read: Callable[[npt.NDArray[np.intp]], npt.NDArray[np.int8]],
                 size: int) -> None:
        self._read = read
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, at: Any) -> npt.NDArray[np.int8]:
        arr = np.asarray(at)
        if arr.dtype == np.bool_:
            return self._read(np.flatnonzero(arr))
        if arr.ndim == 0:
            one: npt.NDArray[np.int8] = self._read(arr.reshape(1).astype(np.intp))[0]
            return one
        return self._read(arr.astype(np.intp, copy=False))
