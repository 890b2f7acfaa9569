"""The mock's ``walrus blob-id``: the id relayer_mock gives a blob or a quilt, computed
without storing it.

Real blob ids need the RS2 encoding (``walrus blob-id <file>`` computes them offline);
the mock's are BLAKE2b-256 of the blob, or of its quilt container. A client that can
compute the id of what it is about to store can check, after a lost store answer,
whether the store landed (walrus_mem's ``blob_id`` hook, docs/walrus.md "Never pay
twice"); tests hand it this function.

    from relayer_mock import mock_blob_id
    mock_blob_id(b"bytes")                                   # a blob
    mock_blob_id(None, files={"a": b"1"}, metadata={"a": {"k": "v"}})  # a quilt
"""

from __future__ import annotations

import io
from collections.abc import Mapping

from ._ids import blob_id_for
from ._quilt import PatchInput, write_quilt

__all__ = ["mock_blob_id"]


def mock_blob_id(body: bytes | None, *, files: Mapping[str, bytes] | None = None,
                 metadata: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The blob id relayer_mock answers for ``body`` (PUT /v1/blobs) or for a quilt of
    ``files`` with ``metadata`` tags (PUT /v1/quilts)."""
    if files is None:
        if body is None:
            raise ValueError("give the blob's bytes or the quilt's files")
        return blob_id_for(body)
    tags = metadata or {}
    patches = [PatchInput(name, data, len(data), dict(tags.get(name, {})))
               for name, data in files.items()]
    quilt_id, _, _ = write_quilt(patches, io.BytesIO())
    return quilt_id
