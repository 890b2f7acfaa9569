"""Validation and normalisation of what callers pass to :class:`walrus_mem.Memory`.

Every function raises :class:`~walrus_mem.errors.InvalidInput` (or
:class:`~walrus_mem.errors.PayloadTooLarge`) with a message that says what
was wrong; none of them logs or echoes long user text.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any, Final

from ..errors import InvalidInput, PayloadTooLarge

__all__ = [
    "MAX_CATEGORY_CHARS",
    "MAX_METADATA_BYTES",
    "UNSET",
    "new_memory_id",
    "normalise_text",
    "to_timestamp",
    "validate_category",
    "validate_idempotency_key",
    "validate_importance",
    "validate_memory_id",
    "validate_metadata",
]

# "not passed" where None means something (update(expires_at=None) clears the expiry)
UNSET: Any = object()
MAX_METADATA_BYTES: Final = 16 * 1024
MAX_CATEGORY_CHARS: Final = 64
MAX_IDEMPOTENCY_CHARS: Final = 256
_WS: Final = re.compile(r"\s+")
_MEMORY_ID: Final = re.compile(r"[0-9a-f]{32}")


def new_memory_id() -> str:
    """A random memory id (uuid4 hex). Never derived from the text."""
    return uuid.uuid4().hex


def validate_memory_id(memory_id: object) -> str:
    if not isinstance(memory_id, str) or not _MEMORY_ID.fullmatch(memory_id):
        raise InvalidInput("memory id must be 32 lowercase hex characters")
    return memory_id


def normalise_text(text: object, *, max_bytes: int) -> str:
    """NFC, strip, collapse runs of whitespace to one space; reject empty or oversized text.

    ``bytes`` are accepted if they are valid UTF-8.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput("text bytes are not valid UTF-8") from exc
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, not {type(text).__name__}")
    out = _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()
    if not out:
        raise InvalidInput("text is empty or only whitespace")
    size = len(out.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise PayloadTooLarge(f"text is {size} bytes; the limit is {max_bytes} bytes")
    try:
        out.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("text contains unpaired surrogates (not valid Unicode)") from exc
    return out


def validate_metadata(metadata: object) -> dict[str, Any]:
    """A JSON object with string keys, at most 16 KiB as JSON."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a mapping, not {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str) or not key:
            raise InvalidInput("metadata keys must be non-empty strings")
    try:
        encoded = json.dumps(dict(metadata), allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata must be JSON-serialisable: {exc}") from exc
    except RecursionError:
        raise InvalidInput("metadata is nested too deeply") from None
    if len(encoded.encode()) > MAX_METADATA_BYTES:
        raise PayloadTooLarge(f"metadata is over the {MAX_METADATA_BYTES}-byte limit")
    try:
        result: dict[str, Any] = json.loads(encoded)  # a plain, detached JSON copy
    except RecursionError:
        raise InvalidInput("metadata is nested too deeply") from None
    return result


def validate_category(category: object) -> str | None:
    if category is None:
        return None
    if not isinstance(category, str):
        raise InvalidInput(f"category must be a string, not {type(category).__name__}")
    category = category.strip()
    if not category or len(category) > MAX_CATEGORY_CHARS:
        raise InvalidInput(f"category must be 1-{MAX_CATEGORY_CHARS} characters")
    return category


def validate_importance(importance: object) -> float:
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        raise InvalidInput("importance must be a number between 0 and 1")
    value = float(importance)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInput("importance must be a number between 0 and 1")
    return value


def to_timestamp(value: object, *, what: str = "timestamp") -> float:
    """datetime / date / ISO-8601 string / unix seconds to unix seconds (UTC).

    Naive datetimes and bare dates are taken as UTC.
    """
    if isinstance(value, bool):
        raise InvalidInput(f"{what} must be a datetime, ISO-8601 string or unix seconds")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise InvalidInput(f"{what} must be finite")
        return float(value)
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return dt.timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    if isinstance(value, str):
        text = value.strip()
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError as exc:
            raise InvalidInput(
                f"{what} {value[:40]!r} is not an ISO-8601 date or datetime"
            ) from exc
        return to_timestamp(dt, what=what)
    raise InvalidInput(f"{what} must be a datetime, ISO-8601 string or unix seconds")


def validate_idempotency_key(key: object) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_IDEMPOTENCY_CHARS:
        raise InvalidInput(f"idempotency_key must be a string of 1-{MAX_IDEMPOTENCY_CHARS} chars")
    return key
