"""What the Walrus clients accept: Walrus's size and epoch limits and the argument checks.

The checks raise :class:`~walrus_mem.errors.InvalidInput` before anything is sent
(:mod:`walrus_mem._walrus.core` calls them when it builds an operation).
"""

from __future__ import annotations

import unicodedata
from typing import Final
from urllib.parse import urlsplit

from ..errors import AggregatorUnavailable, InvalidInput, PublisherUnavailable, StorageError
from .responses import Side
from .retry import call_time_left
from .url_secrets import redact_userinfo

__all__ = ["MAX_BLOB_BODY", "MAX_EPOCHS", "MAX_QUILT_BODY", "MAX_QUILT_PATCHES", "MAX_TAG_BYTES"]

MAX_BLOB_BODY: Final = 10 * 1024 * 1024  # publisher default --max-body-size (10,240 KiB)
MAX_QUILT_BODY: Final = 100 * 1024 * 1024  # --max-quilt-body-size
MAX_QUILT_PATCHES: Final = 666  # QuiltV1 with 1000 shards
MAX_EPOCHS: Final = 53
MAX_TAG_BYTES: Final = 64 * 1024
_RESERVED_FIELD: Final = "_metadata"


def _check_url(url: str, what: str) -> str:
    if not isinstance(url, str):
        raise InvalidInput(f"{what} must be a string URL")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInput(f"{what} must be an http(s) URL, got {redact_userinfo(url)[:80]!r}")
    return url.strip().rstrip("/")


def _check_epochs(epochs: object) -> int:
    if not isinstance(epochs, int) or isinstance(epochs, bool) or not 1 <= epochs <= MAX_EPOCHS:
        raise InvalidInput(f"epochs must be an integer from 1 to {MAX_EPOCHS}, got {epochs!r}")
    return epochs


def _check_deadline(value: float | None, default: float) -> float:
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise InvalidInput(f"deadline must be a positive number of seconds, got {value!r}")
    return float(value)


def _within_call(seconds: float, side: Side) -> float:
    """``seconds``, cut to what is left of the enclosing call's budget (retry.call_deadline)."""
    left = call_time_left()
    if left is None:
        return seconds
    if left < 0.001:
        error_type: type[StorageError] = (
            PublisherUnavailable if side == "publisher" else AggregatorUnavailable
        )
        raise error_type(f"{side} not asked: the call's deadline already passed",
                         reason="DEADLINE_EXCEEDED")
    return min(seconds, left)


def _check_address(value: str | None) -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.startswith("0x")
        or len(value) != 66
        or any(c not in "0123456789abcdefABCDEF" for c in value[2:])
    ):
        raise InvalidInput(
            "send_object_to must be a full 32-byte Sui address (0x + 64 hex digits)"
        )
    return value.lower()


def _check_identifier(identifier: object) -> str:
    """Quilt identifier rules of ``validate_quilt_identifier`` plus what HTTP can carry."""
    if not isinstance(identifier, str) or not identifier:
        raise InvalidInput("quilt identifiers must be non-empty strings")
    if identifier == _RESERVED_FIELD:
        raise InvalidInput("'_metadata' is reserved by the quilt HTTP API")
    if len(identifier.encode("utf-8", "surrogatepass")) > 65_535:
        raise InvalidInput("quilt identifier longer than 65,535 bytes")
    if identifier != identifier.rstrip():
        raise InvalidInput(f"quilt identifier {identifier[:40]!r} ends with whitespace")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in identifier):
        raise InvalidInput("quilt identifier contains control characters")
    if '"' in identifier or "\\" in identifier:  # multipart escapes them; servers do not undo it
        raise InvalidInput("quilt identifier must not contain '\"' or '\\'")
    return identifier


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidInput(f"{what} must be bytes, got {type(data).__name__}")
