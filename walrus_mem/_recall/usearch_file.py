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
    rows x bytes per vector                 the vector of slot 0, 1, ... (int8 here; float16
                                            in files saved before: :func:`upgrade_f16`)
    64 bytes                                index_dense_head_t (magic "usearch", versions, kinds:
                                            the scalar kind at byte 14)
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
from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["file_digest", "file_stamp", "map_file", "slot_keys", "upgrade_f16",
           "vector_matrix"]

_MATRIX_AT: Final = 8  # after the two uint32 dimensions
_HEAD: Final = 64  # index_dense_head_t
_MAGIC: Final = b"usearch"
_GRAPH_HEADER: Final = 40  # index_serialized_header_t: five uint64
_NODE_HEAD: Final = 10  # uint64 key + int16 level
_CHUNK: Final = 1 << 16  # nodes per gather of keys (bounds the temporary arrays)
_SCALAR_AT: Final = 14  # in index_dense_head_t: magic 7, three uint16 versions, metric kind
_F16: Final = 12  # USearch's scalar_kind_t values
_I8: Final = 23
_ITEM: Final = 1  # bytes per value of the matrix: int8


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


def _matrix_shape(source: Path | mmap.mmap, dim: int, item: int = _ITEM
                  ) -> tuple[int, int] | None:
    """(rows, file size) when the file starts with a matrix of ``dim`` columns of ``item``
    bytes each (int8; float16: 2)."""
    if isinstance(source, mmap.mmap):
        head, size = source[:_MATRIX_AT], len(source)
    else:
        with open(source, "rb") as fh:
            head = fh.read(_MATRIX_AT)
            size = os.fstat(fh.fileno()).st_size
    if len(head) < _MATRIX_AT:
        return None
    rows, cols = (int(x) for x in np.frombuffer(head, dtype="<u4"))
    if cols != item * dim or _MATRIX_AT + rows * cols + _HEAD + _GRAPH_HEADER > size:
        return None
    return rows, size


def vector_matrix(source: Path | mmap.mmap, dim: int) -> npt.NDArray[np.int8] | None:
    """The file's vectors, one row per USearch slot (None: no such matrix): read from
    ``source`` when it is the file's mapping (:func:`map_file`), else from a new
    read-only mapping of the file. Nothing is read until rows are gathered; replacing
    the file (a save) leaves the mapping on the old one."""
    shape = _matrix_shape(source, dim)
    if shape is None:
        return None
    rows = shape[0]
    if rows == 0:
        return np.zeros((0, dim), dtype="i1")
    if isinstance(source, mmap.mmap):
        return np.frombuffer(source, dtype="i1", count=rows * dim,
                             offset=_MATRIX_AT).reshape(rows, dim)
    matrix = np.memmap(source, dtype="i1", mode="r", offset=_MATRIX_AT, shape=(rows, dim))
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
        at = _MATRIX_AT + rows * _ITEM * dim
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


def upgrade_f16(path: Path, dim: int, out: Path,
                quantize: Callable[[npt.NDArray[np.float16]], npt.NDArray[np.int8]]) -> bool:
    """Write to ``out`` the int8 file of the float16 index file at ``path`` (saved before
    the index stored int8): the same graph, links and keys, each vector ``quantize``d, the
    head's scalar kind set to int8. Seconds at 1M memories where rebuilding the graph
    from the catalog takes about 20 minutes; the graph was linked by float16 distances,
    which int8's order almost everywhere the same. False (nothing written): not a float16
    file of this layout."""
    shape = _matrix_shape(path, dim, item=2)
    if shape is None:
        return False
    rows, size = shape
    old = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        head_at = _MATRIX_AT + rows * 2 * dim
        head = bytearray(old[head_at:head_at + _HEAD])
        if bytes(head[:len(_MAGIC)]) != _MAGIC or head[_SCALAR_AT] != _F16:
            return False
        head[_SCALAR_AT] = _I8
        with open(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
            fh.write(np.array([rows, dim], dtype="<u4").tobytes())
            matrix = old[_MATRIX_AT:head_at].view("<f2").reshape(rows, dim)
            for lo in range(0, rows, _CHUNK):
                fh.write(quantize(matrix[lo:lo + _CHUNK]).tobytes())
            fh.write(bytes(head))
            for lo in range(head_at + _HEAD, size, 1 << 24):
                fh.write(bytes(old[lo:min(size, lo + (1 << 24))]))
    finally:
        del old
    return True
