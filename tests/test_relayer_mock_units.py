"""relayer_mock building blocks: ids, cost formula, quilt container, query/header parsing."""

from __future__ import annotations

import base64
import hashlib
import io
import struct

import pytest

from relayer_mock import _cost as cost
from relayer_mock._ids import (
    b64url_decode,
    base58_encode,
    blob_file_name,
    blob_id_for,
    new_object_id,
    new_tx_digest,
    normalize_sui_address,
    parse_blob_id,
    parse_quilt_patch_id,
    quilt_patch_id,
)
from relayer_mock._params import (
    QueryError,
    RangeHeaderError,
    parse_byte_range_query,
    parse_publisher_query,
    parse_range_header,
    parse_read_options,
)
from relayer_mock._quilt import (
    MAX_PATCHES,
    PatchInput,
    QuiltError,
    read_layout,
    validate_identifier,
    write_quilt,
)

# -- ids ----------------------------------------------------------------------------------


def test_blob_id_is_blake2b_base64url() -> None:
    data = b"walrus"
    expected = base64.urlsafe_b64encode(hashlib.blake2b(data, digest_size=32).digest())
    assert blob_id_for(data) == expected.rstrip(b"=").decode()
    assert len(blob_id_for(b"")) == 43
    assert parse_blob_id(blob_id_for(data)) == hashlib.blake2b(data, digest_size=32).digest()
    assert blob_file_name(blob_id_for(data)) == hashlib.blake2b(data, digest_size=32).hexdigest()


@pytest.mark.parametrize("bad", ["", "A" * 42, "A" * 44, "A" * 42 + "=", "A" * 42 + "/",
                                 "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUl"])
def test_parse_blob_id_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_blob_id(bad)


def test_b64url_decode_is_strict() -> None:
    assert b64url_decode("AAE", 2) == b"\x00\x01"
    with pytest.raises(ValueError):
        b64url_decode("AAF", 2)  # non-canonical trailing bits
    with pytest.raises(ValueError):
        b64url_decode("AAE=", 2)


def test_quilt_patch_id_layout() -> None:
    quilt_id = blob_id_for(b"quilt")
    patch_id = quilt_patch_id(quilt_id, 1, 208)
    assert len(patch_id) == 50
    raw = base64.urlsafe_b64decode(patch_id + "==")
    assert raw[:32] == parse_blob_id(quilt_id)
    assert raw[32:] == b"\x01" + struct.pack("<HH", 1, 208)
    assert parse_quilt_patch_id(patch_id) == (quilt_id, 1, 208)
    # the docs' example patch id decodes the same way
    docs = "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoBAQDQAA"
    assert parse_quilt_patch_id(docs) == ("6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKo", 1, 208)
    with pytest.raises(ValueError):
        parse_quilt_patch_id(quilt_id)
    version_two = base64.urlsafe_b64encode(raw[:32] + b"\x02" + raw[33:]).rstrip(b"=").decode()
    with pytest.raises(ValueError, match="version"):
        parse_quilt_patch_id(version_two)


def test_sui_ids() -> None:
    assert normalize_sui_address("0xAB") == "0x" + "0" * 62 + "ab"
    assert normalize_sui_address("0x" + "F" * 64) == "0x" + "f" * 64
    for bad in ("ab", "0x", "0x" + "1" * 65, "0xg1"):
        with pytest.raises(ValueError):
            normalize_sui_address(bad)
    object_id = new_object_id()
    assert object_id.startswith("0x") and len(object_id) == 66 and object_id == object_id.lower()
    assert new_object_id() != object_id
    digest = new_tx_digest()
    assert 40 <= len(digest) <= 44
    assert base58_encode(b"\x00\x00\x01") == "112"
    assert base58_encode(bytes(32)) == "1" * 32


# -- cost ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "encoded"),
    [(0, 66_034_000), (1, 66_034_000), (17, 66_034_000), (445_556, 66_034_000),
     (445_557, 68_036_000), (1_782_224, 72_040_000)],
)
def test_encoded_length(length: int, encoded: int) -> None:
    assert cost.encoded_length(length) == encoded


def test_cost_formula() -> None:
    assert cost.storage_units(66_034_000) == 63
    assert cost.store_cost(17, 1, storage_price=1000, write_price=1100) == 132_300
    assert cost.store_cost(17, 2) == 63 * (2 * cost.DEFAULT_STORAGE_PRICE
                                           + cost.DEFAULT_WRITE_PRICE)
    assert cost.symbol_size(cost.MAX_BLOB_SIZE) == cost.MAX_SYMBOL_SIZE
    with pytest.raises(ValueError):
        cost.symbol_size(cost.MAX_BLOB_SIZE + 1)
    with pytest.raises(ValueError):
        cost.symbol_size(-1)


# -- quilt container ----------------------------------------------------------------------


@pytest.mark.parametrize("ok", ["a", "_test", "-test", ".test", "ünïcode", "with space", "x" * 100])
def test_identifier_accepted(ok: str) -> None:
    validate_identifier(ok)


@pytest.mark.parametrize("bad", ["", "trailing ", "tab\t", "ctl\x01x", "nl\nx",
                                 "x" * 65_536])
def test_identifier_rejected(bad: str) -> None:
    with pytest.raises(QuiltError, match="InvalidIdentifier"):
        validate_identifier(bad)


def test_write_quilt_layout_and_read_back() -> None:
    patches = [PatchInput("b", b"second", 6, {"k": "v"}),
               PatchInput("a", io.BytesIO(b"first!"), 6)]
    out = io.BytesIO()
    quilt_id, size, layout = write_quilt(patches, out)
    data = out.getvalue()
    assert len(data) == size and quilt_id == blob_id_for(data)
    assert [p.identifier for p in layout] == ["a", "b"]
    assert [(p.start, p.end) for p in layout] == [(1, 2), (2, 3)]
    assert data[layout[0].offset:layout[0].offset + 6] == b"first!"
    assert data[layout[1].offset:layout[1].offset + 6] == b"second"
    assert read_layout(io.BytesIO(data), quilt_id) == layout
    # same patches and tags, any order: same quilt id; different tags: different id
    again = write_quilt([PatchInput("a", b"first!", 6), PatchInput("b", b"second", 6,
                                                                   {"k": "v"})], io.BytesIO())
    assert again[0] == quilt_id
    other = write_quilt([PatchInput("a", b"first!", 6), PatchInput("b", b"second", 6)],
                        io.BytesIO())
    assert other[0] != quilt_id


def test_write_quilt_limits() -> None:
    too_many = [PatchInput(f"p{i}", b"", 0) for i in range(MAX_PATCHES + 1)]
    with pytest.raises(QuiltError, match="TooManyBlobs"):
        write_quilt(too_many, io.BytesIO())
    with pytest.raises(QuiltError, match="DuplicateIdentifier"):
        write_quilt([PatchInput("a", b"", 0), PatchInput("a", b"", 0)], io.BytesIO())
    big_tags = {f"k{i}": "v" * 1000 for i in range(70)}
    with pytest.raises(QuiltError, match="QuiltOversize"):
        write_quilt([PatchInput("a", b"", 0, big_tags)], io.BytesIO())
    with pytest.raises(QuiltError, match="length mismatch"):
        write_quilt([PatchInput("a", b"abc", 2)], io.BytesIO())


# -- params -------------------------------------------------------------------------------


def test_publisher_query_defaults_and_values() -> None:
    query = parse_publisher_query([])
    assert (query.epochs, query.permanent, query.deletable, query.force, query.share,
            query.send_object_to) == (1, False, False, False, False, None)
    owner = "0x" + "0" * 63 + "1"
    query = parse_publisher_query([("epochs", "7"), ("permanent", "true"), ("force", "true"),
                                   ("send_object_to", owner)])
    assert (query.epochs, query.permanent, query.force) == (7, True, True)
    assert query.send_object_to == owner
    with pytest.raises(QueryError, match="unknown field `whatever`"):
        parse_publisher_query([("epochs", "7"), ("whatever", "x")])
    with pytest.raises(QueryError, match="send_object_to: invalid length"):
        parse_publisher_query([("send_object_to", "0x1")])
    lenient = parse_publisher_query([("send_object_to", "0x1"), ("whatever", "x")], strict=False)
    assert lenient.send_object_to == owner
    assert parse_publisher_query([("share", "false")]).share is False
    with pytest.raises(QueryError, match="duplicate field `epochs`"):
        parse_publisher_query([("epochs", "1"), ("epochs", "2")])


def test_read_and_byte_range_queries() -> None:
    assert parse_read_options([]) == (False, False)
    assert parse_read_options([("skip_consistency_check", "true")]) == (False, True)
    with pytest.raises(QueryError, match="unknown field `x`"):
        parse_read_options([("x", "1")])
    assert parse_byte_range_query([("start", "3"), ("length", "4")]) == (3, 4)
    with pytest.raises(QueryError, match="expected `start` or `length`"):
        parse_byte_range_query([("start", "3"), ("length", "4"), ("end", "9")])
    with pytest.raises(QueryError, match="number too large"):
        parse_byte_range_query([("start", str(2**64)), ("length", "1")])


@pytest.mark.parametrize(
    ("header", "expected"),
    [("bytes=0-0", (0, 0)), ("bytes=10-20", (10, 20)), (" bytes=10-20 ", (10, 20))],
)
def test_range_header_ok(header: str, expected: tuple[int, int]) -> None:
    assert parse_range_header(header) == expected


@pytest.mark.parametrize(
    ("header", "message"),
    [("bytes=5-", "must provide end index"), ("bytes=-5", "must provide start index"),
     ("bytes=0-1,2-3", "only support one range per request"),
     ("bytes=3-2", "start index must be less than end index"),
     ("bytes=", "invalid range header format"), ("invalid", "invalid range header format"),
     ("bytes=a-b", "invalid range header format")],
)
def test_range_header_rejected(header: str, message: str) -> None:
    with pytest.raises(RangeHeaderError, match=message):
        parse_range_header(header)
