"""Issue 28 footprint: the mock's quilt container keeps its header zlib-packed
(``WMQUILT2``): the JSON header cost 73 B a patch at 200k memories (a 32-hex identifier,
its length, empty tags), about a tenth of a short fact's patch. Containers written before
(``WMQUILT1``) still read."""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import pytest

from relayer_mock._ids import blob_id_for
from relayer_mock._quilt import (
    MAGIC,
    PatchInput,
    QuiltError,
    read_layout,
    split_container,
    write_quilt,
)
from relayer_mock._quilt_index import QuiltIndex


def _patches(n: int) -> list[PatchInput]:
    return [PatchInput(f"{i:08x}{'5e1f' * 6}", bytes([i % 251]) * 638, 638) for i in range(n)]


def test_a_quilt_header_is_packed() -> None:
    out = io.BytesIO()
    quilt_id, size, layout = write_quilt(_patches(600), out)
    data = out.getvalue()
    assert data.startswith(MAGIC) and MAGIC == b"WMQUILT2"
    assert quilt_id == blob_id_for(data) and size == len(data)
    assert layout[0].offset / 600 < 30  # 73 B a patch as JSON
    assert read_layout(io.BytesIO(data), quilt_id) == layout
    assert [(name, bytes(raw)) for name, raw in split_container(data)] == [
        (p.identifier, data[p.offset:p.offset + p.length]) for p in layout]


def test_a_container_written_before_still_reads(tmp_path: Path) -> None:
    patches = _patches(5)
    header = json.dumps({"version": 1, "patches": [
        {"identifier": p.identifier, "length": p.length, "tags": {}} for p in patches]},
        separators=(",", ":")).encode()
    data = b"WMQUILT1" + struct.pack("<I", len(header)) + header + b"".join(
        p.data for p in patches if isinstance(p.data, bytes))
    quilt_id = blob_id_for(data)
    layout = read_layout(io.BytesIO(data), quilt_id)
    assert [p.identifier for p in layout] == [p.identifier for p in patches]
    assert data[layout[3].offset:layout[3].offset + 638] == patches[3].data
    (tmp_path / "q").write_bytes(data)
    index = QuiltIndex.read(tmp_path / "q", quilt_id)
    assert [r.offset for r in index.records()] == [p.offset for p in layout]
    assert [name for name, _ in split_container(data)] == [p.identifier for p in patches]


def test_a_bad_packed_header_is_not_a_quilt(tmp_path: Path) -> None:
    bomb = zlib.compress(b" " * (80 * 2**20))
    for packed in (b"not zlib", bomb):
        data = MAGIC + struct.pack("<I", len(packed)) + packed
        with pytest.raises(QuiltError):
            read_layout(io.BytesIO(data), "q")
        (tmp_path / "q").write_bytes(data)
        with pytest.raises(QuiltError):
            QuiltIndex.read(tmp_path / "q", "q")
    assert split_container(b"WMEM plain blob") == [(None, b"WMEM plain blob")]
