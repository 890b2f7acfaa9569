"""A saved USearch index file, read without USearch: its vector matrix and each slot's key.

The index keeps no copy of a built memory's vector beside the graph (issue 28 item 4:
the copies cost 869 B per memory at 10k, as much again as the USearch file): it reads
the vector from the saved USearch file, which stores every vector once, in one matrix
addressed by USearch's slot. Mapped read-only, a gather of a hundred rows by slot costs
what a gather from a copy costs (``Index.get`` of 50 keys: about 40 µs against 3). The
slot of each key is not in USearch's Python API (``Index.keys`` walks its hash table),
so :func:`slot_keys` reads it from the graph's nodes once, when the file is saved.

Layout (USearch 2.x, ``index_dense_gt::save_to_stream`` and ``index_gt::save_to_stream``
in include/usearch/index_dense.hpp and index.hpp; 32-bit matrix dimensions, uint64 keys,
uint32 slots, little-endian)::

    uint32 rows, uint32 bytes per vector    the matrix's shape (rows = slots, freed included)
    rows x bytes per vector                 the vector of slot 0, 1, ... (float16 here)
    64 bytes                                index_dense_head_t (magic "usearch", versions, kinds)
    5 x uint64                              nodes, connectivity, connectivity_base, max level,
                                            entry slot
    nodes x int16                           each node's level
    the nodes, one after another            uint64 key, int16 level, then its neighbours:
                                            4 + 4 * connectivity_base bytes at level 0 and
                                            4 + 4 * connectivity bytes per level above

A removed key's slot keeps its row and node, its key set to 2**64 - 1 (read as -1 here)
until USearch reuses the slot. Every read checks that the parts add up to the file's
size exactly; a file that does not (another USearch layout) reads as None, and the
caller keeps its own copies of the vectors, as before this module.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["file_digest", "file_stamp", "map_file", "slot_keys", "vector_matrix"]

_MATRIX_AT: Final = 8  # after the two uint32 dimensions
_HEAD: Final = 64  # index_dense_head_t
_MAGIC: Final = b"usearch"
_GRAPH_HEADER: Final = 40  # index_serialized_header_t: five uint64
_NODE_HEAD: Final = 10  # uint64 key + int16 level
_CHUNK: Final = 1 << 16  # nodes per gather of keys (bounds the temporary arrays)


def file_digest(path: Path) -> str:
    """BLAKE2b-256 of a file, read in chunks (hashlib releases the GIL while hashing)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=32)).hexdigest()


def file_stamp(path: Path) -> list[int]:
    """What changes when a file is rewritten or replaced: size, mtime_ns, inode."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def map_file(path: Path) -> mmap.mmap:
    """The whole file, mapped read-only: USearch views the index from this buffer
    (``Index.view`` of a buffer) and :func:`vector_matrix` reads the vectors from it, so
    a page both read is mapped once, and counted once in the process's memory (two
    mappings of one file count each page they both touch twice)."""
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _matrix_shape(source: Path | mmap.mmap, dim: int) -> tuple[int, int] | None:
    """(rows, file size) when the file starts with a float16 matrix of ``dim`` columns."""
    if isinstance(source, mmap.mmap):
        head, size = source[:_MATRIX_AT], len(source)
    else:
        with open(source, "rb") as fh:
            head = fh.read(_MATRIX_AT)
            size = os.fstat(fh.fileno()).st_size
    if len(head) < _MATRIX_AT:
        return None
    rows, cols = (int(x) for x in np.frombuffer(head, dtype="<u4"))
    if cols != 2 * dim or _MATRIX_AT + rows * cols + _HEAD + _GRAPH_HEADER > size:
        return None
    return rows, size


def vector_matrix(source: Path | mmap.mmap, dim: int) -> npt.NDArray[np.float16] | None:
    """The file's vectors, one row per USearch slot (None: no such matrix): read from
    ``source`` when it is the file's mapping (:func:`map_file`), else from a new
    read-only mapping of the file. Nothing is read until rows are gathered; replacing
    the file (a save) leaves the mapping on the old one."""
    shape = _matrix_shape(source, dim)
    if shape is None:
        return None
    rows = shape[0]
    if rows == 0:
        return np.zeros((0, dim), dtype="<f2")
    if isinstance(source, mmap.mmap):
        return np.frombuffer(source, dtype="<f2", count=rows * dim,
                             offset=_MATRIX_AT).reshape(rows, dim)
    matrix = np.memmap(source, dtype="<f2", mode="r", offset=_MATRIX_AT, shape=(rows, dim))
    # A plain ndarray view: np.memmap's Python-level __getitem__ costs microseconds a gather.
    return matrix.view(np.ndarray)


def slot_keys(path: Path, dim: int) -> npt.NDArray[np.int64] | None:
    """The key of each USearch slot of the saved file (-1: a freed slot), or None when the
    file's parts do not add up to its size (not the layout above)."""
    shape = _matrix_shape(path, dim)
    if shape is None:
        return None
    rows, size = shape
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        at = _MATRIX_AT + rows * 2 * dim
        if bytes(raw[at:at + len(_MAGIC)]) != _MAGIC:
            return None
        at += _HEAD
        nodes, conn, conn_base = (int(x) for x in
                                  np.frombuffer(bytes(raw[at:at + 24]), dtype="<u8"))
        at += _GRAPH_HEADER
        if nodes != rows or at + 2 * nodes > size:
            return None
        levels = np.frombuffer(bytes(raw[at:at + 2 * nodes]), dtype="<i2").astype(np.int64)
        at += 2 * nodes
        sizes = _NODE_HEAD + 4 + 4 * conn_base + levels * (4 + 4 * conn)
        ends = np.cumsum(sizes)
        if levels.min() < 0 or at + int(ends[-1]) != size:
            return None
        starts = at + ends - sizes
        keys = np.empty(nodes, dtype=np.int64)
        byte = np.arange(8)
        for lo in range(0, nodes, _CHUNK):
            gathered = raw[starts[lo:lo + _CHUNK, None] + byte]  # (m, 8) uint8, a copy
            keys[lo:lo + _CHUNK] = np.ascontiguousarray(gathered).view("<i8").reshape(-1)
        return keys  # 2**64 - 1 (a freed slot) reads as -1 in int64
    finally:
        del raw  # unmapped now: the graph's pages read here do not stay in this process
