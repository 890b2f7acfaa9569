"""An index saved with float16 vectors (metadata format 2), made int8 in place, once.

Until issue 28's last footprint cut the USearch file stored each vector as float16 (768 B
for 384 dimensions); it stores int8 now (384 B: index_vectors.quantize). A data dir saved
before holds float16 files. Rebuilding the graph from the catalog would cost about a
millisecond a memory (some 20 minutes at 1M, in the background builder); the graph's
links do not depend on how its vectors are stored, so :func:`upgrade_index` rewrites the
file's vector matrix as int8 and keeps the graph (usearch_file.upgrade_f16): seconds at
1M, with one warning line. A file whose digest does not match (damaged) is not upgraded:
the caller rebuilds it from the catalog, as for any damaged file.

Order on disk, so that a process killed midway leaves either the old state or the new
one, or a file the next open refuses by its digest and rebuilds: the new vector copies
under a new name, the int8 USearch file over the old one, the metadata naming both, then
the old copies removed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

from .index_vectors import quantize
from .usearch_file import file_digest, upgrade_f16

__all__ = ["F16_FORMAT", "upgrade_index"]

log = logging.getLogger("walrus_mem._recall.index")  # index.py's: the name callers filter on

F16_FORMAT: Final = 2


def _write_npy(path: Path, array: np.ndarray[Any, Any]) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
        np.save(fh, array, allow_pickle=False)
    os.replace(tmp, path)


def upgrade_index(path: Path, meta_path: Path, meta: dict[str, Any], dim: int,
                  new_format: int) -> dict[str, Any] | None:
    """Make the float16 index at ``path`` (metadata ``meta``, format 2) int8; its new
    metadata (format ``new_format``), or None when it cannot be (damaged, unreadable, not
    this layout: the caller rebuilds it). Callers hold the index's file lock."""
    started = time.monotonic()
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    new_meta = dict(meta, format=new_format)
    try:
        if file_digest(path) != meta.get("blake2b"):
            log.warning("index file %s does not match its checksum (damaged, or a save was "
                        "cut short); rebuilding from the catalog", path.name)
            return None
        if not upgrade_f16(path, dim, tmp, quantize):
            log.warning("index file %s: not a float16 file of the known layout; rebuilding "
                        "from the catalog", path.name)
            tmp.unlink(missing_ok=True)
            return None
        old_vectors = meta.get("vectors_file")
        if isinstance(old_vectors, str) and "/" not in old_vectors:
            copies = np.load(path.parent / old_vectors, allow_pickle=False)
            token = os.urandom(6).hex()
            new_meta["vectors_file"] = f"{path.stem}.{token}.vectors.npy"
            _write_npy(path.parent / new_meta["vectors_file"], quantize(copies))
        new_meta["blake2b"] = file_digest(tmp)
        os.replace(tmp, path)
        tmp_meta = meta_path.with_name(meta_path.name + f".{os.getpid()}.tmp")
        tmp_meta.write_text(json.dumps(new_meta, sort_keys=True), encoding="utf-8")
        os.chmod(tmp_meta, 0o600)
        os.replace(tmp_meta, meta_path)
        if isinstance(old_vectors, str) and old_vectors != new_meta["vectors_file"]:
            (path.parent / old_vectors).unlink(missing_ok=True)
    except (OSError, ValueError) as exc:
        tmp.unlink(missing_ok=True)
        log.warning("index file %s could not be made int8 (%s); rebuilding from the catalog",
                    path.name, exc)
        return None
    log.warning("index %s held float16 vectors (saved by an older walrus_mem): made int8 in "
                "place, %d memories in %.1f s (its vectors take half the disk)",
                path.name, int(meta.get("count", 0)), time.monotonic() - started)
    return new_meta
