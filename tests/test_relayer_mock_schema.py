"""relayer_mock's on-disk layouts: a store written by older code opens and answers the same.

``tests/data/relayer_schema1/`` is a small relayer folder written by the code before its
index schema 2 (79a4de8: one SQLite row per quilt patch), and
``tests/data/relayer_schema1.json`` what that code answered, in one process, to the reads
listed in it (every blob, object, quilt, patch by id and by identifier, listings, byte
ranges, ids that name nothing) against a copy of it, with the default (strict) settings
and with ``strict=False``. The test replays the same reads in the same order against a
copy opened by this code and compares status, headers and body byte for byte.

Regenerate (only with the code that wrote the layout; from a tree of 79a4de8)::

    PYTHONPATH=<tree> python tests/test_relayer_mock_schema.py --write tests/data
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from relayer_mock.embedded import EmbeddedRelayer

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "relayer_schema1"
EXPECTED = DATA / "relayer_schema1.json"
_TRACE = re.compile(rb"TraceID: [0-9a-f]+")

# 32-hex identifiers like walrus_mem's facts; a few hand-made ones for tags and escaping
_FACT_IDS = [f"{i:032x}" for i in range(7, 7 + 40 * 97, 97)]


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _write_store(client: httpx.Client) -> None:
    """What the fixture holds (run once, by the code that writes the old layout)."""
    from relayer_mock._quilt import PatchInput, write_quilt

    _ok(client.put("/v1/blobs?epochs=3", content=b"a plain blob"))
    _ok(client.put("/v1/blobs?permanent=true&epochs=7", content=b"a permanent blob"))
    _ok(client.put("/v1/blobs?share=true&epochs=4", content=b"a shared blob"))
    _ok(client.put("/v1/blobs?epochs=1", content=b"expires at the next epoch"))
    tagged = [("note", "a note", {"content-type": "text/plain", "x-n": 3}),
              ("café", "non-ASCII identifier", {"lang": "fr"}),
              ("a/b", "a slash in it", {}),
              ("z", "", {})]
    files: list[tuple[str, tuple[str, bytes]]] = [
        (name, (name, data.encode())) for name, data, _ in tagged]
    metadata = json.dumps([{"identifier": n, "tags": t} for n, _, t in tagged if t])
    _ok(client.put("/v1/quilts?epochs=5", files=files, data={"_metadata": metadata}))
    facts = {ident: bytes([i]) * (1 + i) for i, ident in enumerate(_FACT_IDS)}
    _ok(client.put("/v1/quilts?epochs=5", files={k: (k, v) for k, v in facts.items()}))
    _ok(client.put("/v1/quilts?epochs=1", files={"short": b"lived"}))
    deleted = _ok(client.put("/v1/quilts?epochs=5", files={"gone": b"soon"}))
    quilt_id = deleted["blobStoreResult"]["newlyCreated"]["blobObject"]["blobId"]
    assert client.delete(f"/_mock/blobs/{quilt_id}").status_code == 200
    # a quilt's exact bytes stored first as a plain blob, then as a quilt (one blob id)
    patches = [PatchInput("first", b"plain, then quilt", 17), PatchInput("second", b"2", 1)]
    container = _container(patches, write_quilt)
    _ok(client.put("/v1/blobs?epochs=5", content=container))
    _ok(client.put("/v1/quilts?epochs=5",
                   files={p.identifier: (p.identifier, p.data) for p in patches}))
    # a container never stored as a quilt: a plain blob
    _ok(client.put("/v1/blobs?epochs=5",
                   content=_container([PatchInput("never", b"a quilt", 7)], write_quilt)))
    client.post("/_mock/epoch/advance?by=1")


def _container(patches: list[Any], write_quilt: Any) -> bytes:
    import io

    out = io.BytesIO()
    write_quilt(patches, out)
    return out.getvalue()


def _reads(client: httpx.Client) -> list[tuple[str, dict[str, str]]]:
    """The reads to replay, from the store's own listing (same order every time)."""
    reads: list[tuple[str, dict[str, str]]] = [("/_mock/blobs", {})]
    for entry in client.get("/_mock/blobs").json()["blobs"]:
        blob_id = entry["blobId"]
        reads += [(f"/v1/blobs/{blob_id}", {}), (f"/v1/quilts/{blob_id}/patches", {}),
                  (f"/v1/blobs/{blob_id}", {"range": "bytes=3-20"}),
                  (f"/v1/blobs/{blob_id}/byte-range?start=5&length=9", {}),
                  (f"/_mock/blobs/{blob_id}", {})]
        reads += [(f"/v1/blobs/by-object-id/{o['objectId']}", {}) for o in entry["objects"]]
        for name in ("note", "café", "a/b", "z", "first", "never", "missing", _FACT_IDS[3]):
            reads.append((f"/v1/blobs/by-quilt-id/{blob_id}/{quote(name, safe='')}", {}))
        raw = base64.urlsafe_b64decode(blob_id + "=")
        for start, end in ((1, 2), (2, 3), (4, 5), (40, 41), (41, 42), (99, 100), (1, 3)):
            patch_id = base64.urlsafe_b64encode(
                raw + bytes([1]) + start.to_bytes(2, "little") + end.to_bytes(2, "little"))
            reads.append((f"/v1/blobs/by-quilt-patch-id/{patch_id.decode().rstrip('=')}", {}))
    reads.append(("/_mock/stats", {}))
    return reads


def _answer(response: httpx.Response) -> dict[str, Any]:
    body = _TRACE.sub(b"TraceID: -", response.content)
    if response.url.path == "/_mock/stats":
        stats = json.loads(body)
        stats.pop("settings", None)
        body = json.dumps(stats, sort_keys=True).encode()
    shown = (base64.b64encode(body).decode() if len(body) <= 160
             else "sha256:" + hashlib.sha256(body).hexdigest())
    return {"status": response.status_code, "headers": sorted(response.headers.items()),
            "body": shown}


def _replay(folder: Path, reads: list[tuple[str, dict[str, str]]] | None,
            strict: bool) -> tuple[list[tuple[str, dict[str, str]]], list[dict[str, Any]]]:
    with EmbeddedRelayer(folder, fsync=False, strict=strict) as relayer, \
            relayer.client() as client:
        if reads is None:
            reads = _reads(client)
        answers = [_answer(client.get(path, headers=headers)) for path, headers in reads]
    return reads, answers


def _copy(tmp: Path) -> Path:
    folder = tmp / "relayer"
    shutil.copytree(FIXTURE, folder)
    return folder


def test_a_schema1_store_answers_every_read_as_before(tmp_path: Path) -> None:
    expected = json.loads(EXPECTED.read_text())
    for strict in (True, False):
        folder = _copy(tmp_path / str(strict))
        reads = [(path, headers) for path, headers in expected["reads"]]
        _, answers = _replay(folder, reads, strict)
        want = expected["strict" if strict else "lenient"]
        for (path, _), got, old in zip(reads, answers, want, strict=True):
            headers = expected["header_sets"][old["headers"]]
            old = {**old, "headers": [tuple(h) for h in headers]}
            assert got == old, path


def test_a_schema1_store_is_migrated_and_shrinks(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    before = (folder / "index.sqlite3").stat().st_size
    with EmbeddedRelayer(folder, fsync=False):
        pass
    con = sqlite3.connect(folder / "index.sqlite3")
    try:
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master")}
        version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    finally:
        con.close()
    assert "patches" not in tables and version == ("2",)
    assert (folder / "index.sqlite3").stat().st_size < before
    # the blob files are untouched
    assert {p.name: p.read_bytes() for p in (folder / "blobs").rglob("*") if p.is_file()} == {
        p.name: p.read_bytes() for p in (FIXTURE / "blobs").rglob("*") if p.is_file()}


def test_two_relayers_opening_a_schema1_store_at_once_both_serve(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    expected = json.loads(EXPECTED.read_text())
    path, _ = next((p, h) for (p, h), a in zip(expected["reads"], expected["strict"],
                                               strict=True)
                   if "by-quilt-patch-id" in p and a["status"] == 200)
    with ThreadPoolExecutor(2) as pool:
        relayers = list(pool.map(lambda _: EmbeddedRelayer(folder, fsync=False), range(2)))
    try:
        for relayer in relayers:
            with relayer.client() as client:
                assert client.get(path).status_code == 200
    finally:
        for relayer in relayers:
            relayer.close()


def _write_fixture(out: Path) -> None:
    """Write the folder and the answers of the code on PYTHONPATH."""
    folder = out / "relayer_schema1"
    if folder.exists():
        shutil.rmtree(folder)
    with EmbeddedRelayer(folder, fsync=False, initial_epoch=3) as relayer, \
            relayer.client() as client:
        _write_store(client)
    import gc

    gc.collect()  # the relayer's worker threads' connections
    con = sqlite3.connect(folder / "index.sqlite3")
    assert con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    con.close()
    for extra in ("index.sqlite3-wal", "index.sqlite3-shm"):  # empty once checkpointed
        path = folder / extra
        if path.exists():
            assert extra.endswith("-shm") or path.stat().st_size == 0, extra
            path.unlink()
    (folder / "tmp").rmdir()  # git keeps no empty folder; the store makes it again
    expected: dict[str, Any] = {}
    scratch = out / "relayer_schema1.scratch"
    for strict in (True, False):
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(folder, scratch)
        reads, answers = _replay(scratch, expected.get("reads"), strict)
        expected["reads"] = reads
        expected["strict" if strict else "lenient"] = answers
    shutil.rmtree(scratch)
    header_sets: list[list[list[str]]] = []  # each distinct header list once
    for mode in ("strict", "lenient"):
        for answer in expected[mode]:
            headers = [list(h) for h in answer["headers"]]
            if headers not in header_sets:
                header_sets.append(headers)
            answer["headers"] = header_sets.index(headers)
    expected["header_sets"] = header_sets
    (out / "relayer_schema1.json").write_text(json.dumps(expected) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", type=Path, required=True)
    _write_fixture(parser.parse_args().write)
    sys.exit(0)
