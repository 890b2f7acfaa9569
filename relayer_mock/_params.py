"""Query, path and header parsing with the daemon's (serde / axum) rejection texts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._ids import normalize_sui_address, parse_blob_id, parse_quilt_patch_id

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


class QueryError(ValueError):
    """Becomes ``400 Failed to deserialize query string: <message>`` (plain text)."""


class PathError(ValueError):
    """Becomes ``400 Invalid URL: <message>`` (plain text)."""


class RangeHeaderError(ValueError):
    """Becomes ``416 INVALID_BYTE_RANGE`` (JSON)."""


def _unique(items: Sequence[tuple[str, str]], known: Sequence[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, value in items:
        if name in known:
            if name in values:
                raise QueryError(f"duplicate field `{name}`")
            values[name] = value
    return values


def _deny_unknown(items: Sequence[tuple[str, str]], known: Sequence[str]) -> None:
    for name, _ in items:
        if name not in known:
            expected = " or ".join(f"`{k}`" for k in known)
            if len(known) > 2:
                expected = "one of " + ", ".join(f"`{k}`" for k in known)
            raise QueryError(f"unknown field `{name}`, expected {expected}")


def parse_bool(name: str, value: str) -> bool:
    if value == "true":
        return True
    if value == "false":
        return False
    raise QueryError(f"{name}: provided string was not `true` or `false`")


def parse_uint(name: str, value: str, maximum: int) -> int:
    if value == "":
        raise QueryError(f"{name}: cannot parse integer from empty string")
    digits = value[1:] if value.startswith("+") else value
    if not digits.isascii() or not digits.isdigit():
        raise QueryError(f"{name}: invalid digit found in string")
    number = int(digits)
    if number > maximum:
        raise QueryError(f"{name}: number too large to fit in target type")
    return number


@dataclass(frozen=True)
class PublisherQuery:
    """``PublisherQuery`` of the daemon; ``deletable`` only matters together with ``permanent``."""

    epochs: int = 1
    permanent: bool = False
    deletable: bool = False
    force: bool = False
    send_object_to: str | None = None
    share: bool = False
    encoding_type: str | None = None
    quilt_version: str | None = None
    reuse_resources: bool = False


_PUBLISHER_FIELDS = (
    "encoding_type", "epochs", "deletable", "permanent", "force", "quilt_version",
    "send_object_to", "share", "reuse_resources",
)


def parse_publisher_query(
    items: Sequence[tuple[str, str]], *, strict: bool = True
) -> PublisherQuery:
    """Parse the publisher's query. Strict (the daemon: ``PublisherQuery`` has
    ``deny_unknown_fields``): unknown parameters are a 400 and ``send_object_to`` must be a
    full 32-byte address. Lenient: unknown parameters are ignored, short hex is padded."""
    if strict:
        _deny_unknown(items, _PUBLISHER_FIELDS)
    values = _unique(items, _PUBLISHER_FIELDS)
    epochs = parse_uint("epochs", values["epochs"], U32_MAX) if "epochs" in values else 1
    flags = {
        name: parse_bool(name, values[name]) if name in values else False
        for name in ("permanent", "deletable", "force", "share", "reuse_resources")
    }
    send_to = None
    if "send_object_to" in values:
        if "share" in values:
            raise QueryError("`send_object_to` and `share` cannot be used together")
        raw = values["send_object_to"]
        if strict and len(raw) != 66:
            raise QueryError(
                "send_object_to: invalid length, expected 0x followed by 64 hex digits"
            )
        try:
            send_to = normalize_sui_address(raw)
        except ValueError as exc:
            raise QueryError(f"send_object_to: {exc}") from exc
    encoding = values.get("encoding_type")
    if encoding is not None and encoding != "RS2":
        raise QueryError(f"encoding_type: unknown variant `{encoding}`, expected `RS2`")
    version = values.get("quilt_version")
    if version is not None and version not in ("v1", "V1", "1"):
        raise QueryError(f"quilt_version: unknown quilt version `{version}`, expected `V1`")
    return PublisherQuery(
        epochs=epochs,
        permanent=flags["permanent"],
        deletable=flags["deletable"],
        force=flags["force"],
        send_object_to=send_to,
        share=flags["share"],
        encoding_type=encoding,
        quilt_version=version,
        reuse_resources=flags["reuse_resources"],
    )


_READ_FIELDS = ("strict_consistency_check", "skip_consistency_check")


def parse_read_options(items: Sequence[tuple[str, str]]) -> tuple[bool, bool]:
    """``ReadOptions`` (deny_unknown_fields): returns (strict, skip)."""
    _deny_unknown(items, _READ_FIELDS)
    values = _unique(items, _READ_FIELDS)
    return tuple(  # type: ignore[return-value]
        parse_bool(name, values[name]) if name in values else False for name in _READ_FIELDS
    )


_RANGE_FIELDS = ("start", "length")


def parse_byte_range_query(items: Sequence[tuple[str, str]]) -> tuple[int, int]:
    """``ByteRangeQueryParams`` (deny_unknown_fields): returns (start, length)."""
    _deny_unknown(items, _RANGE_FIELDS)
    values = _unique(items, _RANGE_FIELDS)
    for name in _RANGE_FIELDS:
        if name not in values:
            raise QueryError(f"missing field `{name}`")
    return (
        parse_uint("start", values["start"], U64_MAX),
        parse_uint("length", values["length"], U64_MAX),
    )


_CONCAT_FIELDS = ("ids", "strict_consistency_check", "skip_consistency_check")


def parse_concat_query(items: Sequence[tuple[str, str]]) -> tuple[list[str], bool, bool]:
    _deny_unknown(items, _CONCAT_FIELDS)
    values = _unique(items, _CONCAT_FIELDS)
    if "ids" not in values:
        raise QueryError("missing field `ids`")
    ids = [part.strip() for part in values["ids"].split(",") if part.strip()]
    strict, skip = (
        parse_bool(name, values[name]) if name in values else False for name in _READ_FIELDS
    )
    return ids, strict, skip


def parse_range_header(value: str) -> tuple[int, int]:
    """``Range: bytes=a-b`` (one closed range) -> (a, b) inclusive, as ``parse_range_header``
    in the daemon; anything else raises RangeHeaderError with the daemon's message."""
    text = value.strip()
    if not text.startswith("bytes="):
        raise RangeHeaderError("invalid range header format: Invalid range header")
    ranges = [part.strip() for part in text[len("bytes="):].split(",")]
    if any(not part or "-" not in part for part in ranges):
        raise RangeHeaderError("invalid range header format: Invalid range header")
    if len(ranges) != 1:
        raise RangeHeaderError("only support one range per request")
    start_text, _, end_text = ranges[0].partition("-")
    start_text, end_text = start_text.strip(), end_text.strip()
    for part in (start_text, end_text):
        if part and not (part.isascii() and part.isdigit()):
            raise RangeHeaderError("invalid range header format: Invalid range header")
    if not start_text:
        raise RangeHeaderError("must provide start index")
    if not end_text:
        raise RangeHeaderError("must provide end index")
    start, end = int(start_text), int(end_text)
    if start > end:
        raise RangeHeaderError("start index must be less than end index")
    return start, end


def path_blob_id(value: str, name: str = "blob_id") -> str:
    try:
        parse_blob_id(value)
    except ValueError as exc:
        raise PathError(f"Cannot parse `{name}` with value `{value}` to a `BlobId`") from exc
    return value


def path_object_id(value: str) -> str:
    try:
        return normalize_sui_address(value)
    except ValueError as exc:
        raise PathError(
            f"Cannot parse `blob_object_id` with value `{value}` to a `ObjectID`"
        ) from exc


def path_patch_id(value: str) -> str:
    try:
        parse_quilt_patch_id(value)
    except ValueError as exc:
        raise PathError(
            f"Cannot parse `quilt_patch_id` with value `{value}` to a `QuiltPatchId`"
        ) from exc
    return value
