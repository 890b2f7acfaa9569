"""Format-1 manifests as `sync` published them before format 2 (at 2d2800e), for tests.

Only tests write format 1; the product reads it (walrus_mem/_log/legacy_manifest.py).
The layout is the old manifest.py's: a root ``{"format": 1, "seq", "prev",
"created_at", "count", "entries" | None, "pages": [{b, p, d, n}]}`` whose
entries are ``{i, v, b, p, e}``, and pages ``{"id": "page-<digest>", "kind":
"manifest-page", "format": 1, "entries"}`` whose digest is BLAKE2b-256 of the
canonical JSON of those five-field entries; new pages went out as one quilt
(identifier = digest), a single page as a blob.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from walrus_mem import Memory
from walrus_mem._memory.inputs import new_memory_id
from walrus_mem.envelope import seal

MAX_PLAINTEXT = 8 * 1024 * 1024


def _digest(entries: list[dict[str, Any]]) -> str:
    body = json.dumps(entries, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(body.encode(), digest_size=32).hexdigest()


def publish_format1_manifest(mem: Memory, ns: str, *, page_size: int | None = None,
                             seq: int = 1, prev: str | None = None,
                             swap_pages: bool = False) -> str:
    """Seal and store a format-1 manifest of ``ns``'s published memories (as listed
    in ``mem``'s catalog); return its blob id, what SyncReport.manifests held then.
    ``page_size``: put the entries in pages of that size (format 1 did so above 500).
    ``swap_pages``: a tampered root whose first two pages point at each other's bytes."""
    keys = mem.keys_for(ns)
    snap = mem._log.tables.snapshot(ns)
    entries = [{"i": str(r["id"]), "v": int(r["version"]), "b": str(r["blob_id"]),
                "p": r["quilt_patch_id"], "e": r["end_epoch"]} for r in snap.rows]
    inline: list[dict[str, Any]] | None = entries
    pages: list[dict[str, Any]] = []
    if page_size is not None:
        inline = None
        sealed_pages: dict[str, bytes] = {}
        for start in range(0, len(entries), page_size):
            chunk = entries[start:start + page_size]
            digest = _digest(chunk)
            record = {"id": f"page-{digest}", "kind": "manifest-page", "format": 1,
                      "entries": chunk}
            sealed_pages[digest] = seal(keys, record, max_plaintext=MAX_PLAINTEXT)
            pages.append({"b": None, "p": None, "d": digest, "n": len(chunk)})
        if len(sealed_pages) == 1:
            (digest, data), = sealed_pages.items()
            stored = mem.walrus.store_blob(data)
            located = {digest: (stored.blob_id, None)}
        else:
            quilt = mem.walrus.store_quilt(sealed_pages)
            located = {d: (quilt.blob.blob_id, quilt.patches[d]) for d in sealed_pages}
        for page in pages:
            page["b"], page["p"] = located[page["d"]]
        if swap_pages:
            first, second = pages[0], pages[1]
            first["b"], first["p"], second["b"], second["p"] = (
                second["b"], second["p"], first["b"], first["p"])
    info = mem._catalog.namespace(ns)
    assert info is not None
    root = {
        "id": f"manifest-{new_memory_id()}",
        "kind": "manifest",
        "format": 1,
        "seq": seq,
        "created_at": time.time(),
        "prev": prev,
        "model_id": info["model_id"],
        "dim": info["dim"],
        "count": len(entries),
        "entries": inline,
        "pages": pages,
    }
    return mem.walrus.store_blob(seal(keys, root, max_plaintext=MAX_PLAINTEXT)).blob_id
