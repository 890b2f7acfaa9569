"""Response models and parsing for the Walrus publisher/aggregator HTTP API.

Pure functions from ``(status, headers, body)`` to either a typed result or a
:class:`Failure` (a typed error plus the retry decision). No I/O, so the sync
and async clients share every decision and a fuzzer can hammer it directly.
Shapes follow the camelCase Rust types (docs/walrus.md; the OpenAPI file's
snake_case is wrong), except the patch list, which really is snake_case.

Nothing here lets a pydantic ``ValidationError``, ``JSONDecodeError`` or
``UnicodeDecodeError`` escape: a body that does not parse is an
:class:`~walrus_mem.errors.InvalidResponse`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..errors import (
    AggregatorUnavailable,
    AuthenticationFailed,
    BadRequest,
    BlobNotFound,
    BodyTooLarge,
    ForbiddenBlob,
    InsufficientConfirmations,
    InvalidInput,
    InvalidResponse,
    PublisherUnavailable,
    RateLimited,
    StorageError,
    StoreFailed,
)
from .retry import parse_retry_after

__all__ = [
    "BLOB_ID_LENGTH",
    "ErrorBody",
    "Failure",
    "QuiltPatch",
    "QuiltStoreResult",
    "Side",
    "StoreResult",
    "failure_for_status",
    "is_blob_id",
    "is_patch_id",
    "parse_error_body",
    "parse_patch_list",
    "parse_quilt_store_response",
    "parse_store_response",
    "quilt_store_outcome",
    "read_outcome",
    "store_outcome",
    "validate_blob_id",
    "validate_patch_id",
]

Side = Literal["publisher", "aggregator"]

BLOB_ID_LENGTH: Final = 43  # base64url-nopad of 32 bytes
_BLOB_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{43}")
# Spec: 37 bytes -> 50 chars. Accept a little slack; the point is URL safety.
_PATCH_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{44,128}")
_OBJECT_ID_RE: Final = re.compile(r"0x[0-9a-fA-F]{1,64}")
_AUTH_DOMAIN: Final = "auth.publisher.walrus.space"
_AUTH_REASONS: Final = frozenset(
    {
        "INVALID_SIGNATURE", "EXPIRED_SIGNATURE", "TOKEN_ALREADY_USED", "INVALID_EPOCHS",
        "INVALID_SIZE", "INVALID_SEND_OBJECT_TO", "INCONSISTENT_TOKEN", "INVALID_TOKEN",
        "INVALID_EXPIRATION", "INVALID_TIMESTAMP",
    }
)
_RETRYABLE_5XX: Final = frozenset({500, 502, 503, 504})
_MARKED_INVALID: Final = "marked invalid"  # the daemon's 500 message for markedInvalid
_MAX_MESSAGE: Final = 300


# -- identifiers --------------------------------------------------------------


def is_blob_id(value: object) -> bool:
    """Whether ``value`` has the shape of a blob id (43 base64url chars)."""
    return isinstance(value, str) and _BLOB_ID_RE.fullmatch(value) is not None


def is_patch_id(value: object) -> bool:
    """Whether ``value`` has the shape of a quilt patch id (base64url, ~50 chars)."""
    return isinstance(value, str) and _PATCH_ID_RE.fullmatch(value) is not None


def validate_blob_id(value: object, what: str = "blob id") -> str:
    """Return ``value`` if it is a well-formed blob id, else raise InvalidInput."""
    if not is_blob_id(value):
        raise InvalidInput(f"{what} must be 43 URL-safe base64 characters, got {_preview(value)}")
    assert isinstance(value, str)
    return value


def validate_patch_id(value: object) -> str:
    """Return ``value`` if it is a well-formed quilt patch id, else raise InvalidInput."""
    if not is_patch_id(value):
        raise InvalidInput(f"quilt patch id must be URL-safe base64, got {_preview(value)}")
    assert isinstance(value, str)
    return value


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _clean_text(text: str, limit: int = _MAX_MESSAGE) -> str:
    """Untrusted server text made safe for a log line: no control chars, bounded."""
    cleaned = "".join(" " if unicodedata.category(c)[0] == "C" else c for c in text)
    cleaned = " ".join(cleaned.split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."


# -- public result models -----------------------------------------------------


class StoreResult(BaseModel):
    """What the publisher says about one stored blob.

    ``newly_created`` is True for ``newlyCreated`` and False for
    ``alreadyCertified`` (the network already holds these bytes long enough).
    ``object_id`` is the Sui Blob object, None when an ``alreadyCertified``
    answer only points at an event. ``end_epoch`` is exclusive. ``cost`` is in
    FROST (1 WAL = 10^9 FROST), None when nothing was paid.
    """

    model_config = ConfigDict(frozen=True)

    blob_id: str
    object_id: str | None = None
    end_epoch: int
    cost: int | None = None
    newly_created: bool
    deletable: bool | None = None
    encoded_length: int | None = None
    registered_epoch: int | None = None
    certified_epoch: int | None = None
    size: int | None = None
    shared_object_id: str | None = None
    resource_operation: str
    tx_digest: str | None = None
    event_seq: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)


class QuiltStoreResult(BaseModel):
    """A stored quilt: the underlying blob and identifier -> patch id.

    ``ranges`` maps identifier -> ``(start_sliver, end_sliver_exclusive)``
    when the publisher reported them.
    """

    model_config = ConfigDict(frozen=True)

    blob: StoreResult
    patches: dict[str, str]
    ranges: dict[str, tuple[int, int]] = Field(default_factory=dict)

    @property
    def quilt_id(self) -> str:
        """The quilt's blob id (what ``list_quilt_patches`` takes)."""
        return self.blob.blob_id


class QuiltPatch(BaseModel):
    """One entry of ``GET /v1/quilts/{quiltId}/patches``."""

    model_config = ConfigDict(frozen=True)

    identifier: str
    patch_id: str
    tags: dict[str, str] = Field(default_factory=dict)


# -- wire models (validation only) ----------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class _Storage(_Wire):
    id: str
    start_epoch: int = Field(ge=0)
    end_epoch: int = Field(ge=0)
    storage_size: int = Field(ge=0)


class _BlobObject(_Wire):
    id: str
    registered_epoch: int = Field(ge=0)
    blob_id: str
    size: int = Field(ge=0)
    encoding_type: str | None = None
    certified_epoch: int | None = Field(default=None, ge=0)
    storage: _Storage
    deletable: bool


class _NewlyCreated(_Wire):
    blob_object: _BlobObject
    resource_operation: dict[str, Any] | str
    cost: int = Field(ge=0)
    shared_blob_object: str | None = None


class _Event(_Wire):
    tx_digest: str
    event_seq: str | int


class _AlreadyCertified(_Wire):
    blob_id: str
    event: _Event | None = None
    object: str | None = None
    end_epoch: int = Field(ge=0)


class _MarkedInvalid(_Wire):
    blob_id: str | None = None


class _StoreError(_Wire):
    blob_id: str | None = None
    failure_phase: str | None = None
    error_msg: str | None = None


class _StoredQuiltBlob(_Wire):
    identifier: str
    quilt_patch_id: str
    range: tuple[int, int] | None = None


class _QuiltStore(_Wire):
    blob_store_result: dict[str, Any]
    stored_quilt_blobs: list[_StoredQuiltBlob]


class _PatchEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    identifier: str
    patch_id: str
    tags: dict[str, Any] = Field(default_factory=dict)


# -- failures -----------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A response (or transport error) that did not give a result.

    ``error`` is what to raise if no retry follows; ``kind`` is the stats key
    (``http_503``, ``store_error``, ``truncated``, ``transport_ReadError`` ...).
    """

    kind: str
    error: StorageError
    retryable: bool
    retry_after: float | None = None
    connect: bool = False
    cause: BaseException | None = None


@dataclass(frozen=True)
class ErrorBody:
    """What an error body said: AIP-193 fields when it was the JSON envelope."""

    message: str
    reason: str | None = None
    status: str | None = None
    domain: str | None = None
    form: Literal["json", "text", "html", "empty", "invalid"] = "text"


def _decode_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError / UnicodeDecodeError
        raise InvalidResponse(f"response body is not JSON ({_body_hint(body)})") from exc


def _body_hint(body: bytes) -> str:
    if not body:
        return "empty body"
    return f"{len(body)} bytes starting {_clean_text(body[:40].decode('utf-8', 'replace'), 60)!r}"


def _is_html(body: bytes, headers: Mapping[str, str]) -> bool:
    ctype = headers.get("content-type", "").lower()
    head = body[:200].lstrip().lower()
    return "text/html" in ctype or head.startswith((b"<!doctype html", b"<html"))


_TITLE_RE: Final = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def parse_error_body(body: bytes, headers: Mapping[str, str] | None = None) -> ErrorBody:
    """Read an error body in any of its forms: JSON envelope, text, HTML, empty."""
    headers = headers or {}
    stripped = body.strip()
    if not stripped:
        return ErrorBody(message="", form="empty")
    if stripped[:1] in (b"{", b"["):
        try:
            data = json.loads(stripped)
        except (ValueError, RecursionError):
            return ErrorBody(message=_clean_text(stripped.decode("utf-8", "replace")),
                             form="invalid")
        return _envelope_fields(data) or ErrorBody(
            message=_clean_text(stripped.decode("utf-8", "replace")), form="invalid"
        )
    if _is_html(stripped, headers):
        match = _TITLE_RE.search(stripped[:4096])
        title = _clean_text(match.group(1).decode("utf-8", "replace"), 100) if match else ""
        return ErrorBody(message=f"HTML page {title!r}" if title else "HTML page", form="html")
    return ErrorBody(message=_clean_text(stripped.decode("utf-8", "replace")), form="text")


def _envelope_fields(data: Any) -> ErrorBody | None:
    """AIP-193 ``{"error":{"status","code","message","details":[...]}}`` -> fields."""
    if not isinstance(data, dict) or not isinstance(data.get("error"), dict):
        return None
    err = data["error"]
    message = err.get("message")
    status = err.get("status")
    reason = domain = None
    details = err.get("details")
    if isinstance(details, list):
        for detail in details:
            if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
                reason = _clean_text(detail["reason"], 80)
                dom = detail.get("domain")
                domain = _clean_text(dom, 80) if isinstance(dom, str) else None
                break
    if not isinstance(message, str) and reason is None and not isinstance(status, str):
        return None
    return ErrorBody(
        message=_clean_text(message) if isinstance(message, str) else "",
        reason=reason,
        status=_clean_text(status, 60) if isinstance(status, str) else None,
        domain=domain,
        form="json",
    )


def failure_for_status(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    side: Side,
    *,
    now: float | None = None,
) -> Failure:
    """Map an unsuccessful HTTP answer to a typed error and a retry decision.

    Retryable: 408, 429, 500, 502, 503, 504 (except auth-token failures, which
    repeat forever). Everything else, notably 400/401/403/404/413/416/451, is
    final; the caller treats 404 specially right after a store.
    """
    info = parse_error_body(body, headers)
    reason = info.reason
    detail = info.message or (f"({info.form} body)" if info.form == "empty" else "")
    label = f"{side} answered HTTP {status}" + (f" {reason}" if reason else "")
    message = f"{label}: {detail}" if detail else label
    unavailable: type[StorageError] = (
        PublisherUnavailable if side == "publisher" else AggregatorUnavailable
    )
    kind = f"http_{status}"

    def final(exc_type: type[StorageError]) -> Failure:
        return Failure(kind, exc_type(message, status_code=status, reason=reason), False)

    def retry(exc_type: type[StorageError], retry_after: float | None = None) -> Failure:
        return Failure(
            kind, exc_type(message, status_code=status, reason=reason), True, retry_after
        )

    if side == "publisher" and status == 500 and _MARKED_INVALID in info.message:
        # the daemon's 500 for a markedInvalid store: the blob id is invalid on chain, so
        # the same bytes fail the same way at any publisher, now or later
        return Failure("marked_invalid", StoreFailed(message, status_code=status,
                                                     reason="MARKED_INVALID"), False)
    # An auth-domain 500 is the publisher's own trouble (its replay cache is full), not the
    # token's: the next publisher may take the request.
    if side == "publisher" and (reason in _AUTH_REASONS or (
            info.domain == _AUTH_DOMAIN and status < 500)):
        if reason == "TOKEN_ALREADY_USED":  # the usual cause: a static token on a JWT publisher
            message += (" (this publisher accepts each token once: set "
                        "publisher_token_command to a command printing a fresh one)")
        return final(AuthenticationFailed)  # a token is single-use/expired: retry is futile
    if status == 429:
        retry_after = parse_retry_after(headers.get("retry-after"), now=now)
        error = RateLimited(message, retry_after=retry_after, status_code=429, reason=reason)
        return Failure(kind, error, True, retry_after)
    if status == 504 and reason == "INSUFFICIENT_CONFIRMATIONS" and side == "publisher":
        return retry(InsufficientConfirmations)
    if status in _RETRYABLE_5XX or status == 408:
        retry_after = parse_retry_after(headers.get("retry-after"), now=now)
        return retry(unavailable, retry_after)
    if status == 401:
        return final(AuthenticationFailed if side == "publisher" else BadRequest)
    if status == 413 or (status == 403 and (
        reason == "BLOB_TOO_LARGE" or info.status == "SIZE_EXCEEDED"
    )):
        return final(BodyTooLarge)
    if status == 404:
        if side == "publisher":  # no such route: the URL is not a publisher
            return Failure(kind, PublisherUnavailable(
                f"{message} (is this URL a Walrus publisher?)", status_code=404, reason=reason
            ), False)
        return final(BlobNotFound)
    if status == 451:
        return final(ForbiddenBlob)
    if 400 <= status < 500:
        return final(BadRequest)
    if status >= 500:
        return final(unavailable)
    return final(InvalidResponse)  # 1xx/2xx/3xx where a result was expected


def _length_failure(headers: Mapping[str, str], body: bytes) -> Failure | None:
    """A body shorter/longer than its Content-Length (truncated on the way)."""
    declared = headers.get("content-length")
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if declared is None or encoding not in ("", "identity"):
        return None
    try:
        expected = int(declared.strip())
    except ValueError:
        return Failure("invalid_response", InvalidResponse(
            f"invalid Content-Length header {_clean_text(declared, 40)!r}"), True)
    if expected != len(body):
        return Failure("truncated", InvalidResponse(
            f"body has {len(body)} bytes but Content-Length says {expected}"), True)
    return None


# -- store ---------------------------------------------------------------------


def _resource_operation(op: dict[str, Any] | str) -> tuple[str, int | None]:
    if isinstance(op, str):
        return op, None
    if len(op) != 1:
        raise InvalidResponse("resourceOperation must have exactly one variant")
    ((name, inner),) = op.items()
    encoded = inner.get("encodedLength") if isinstance(inner, dict) else None
    if encoded is not None and (
        not isinstance(encoded, int) or isinstance(encoded, bool) or encoded < 0
    ):
        raise InvalidResponse("resourceOperation.encodedLength is not a size")
    return str(name), encoded


def _check_ids(blob_id: str, *object_ids: str | None) -> None:
    if not is_blob_id(blob_id):
        raise InvalidResponse(f"publisher returned a malformed blob id {_preview(blob_id)}")
    for object_id in object_ids:
        if object_id is not None and _OBJECT_ID_RE.fullmatch(object_id) is None:
            raise InvalidResponse(f"publisher returned a malformed object id {_preview(object_id)}")


def _store_from_json(data: Any) -> StoreResult | Failure:
    """One ``BlobStoreResult`` (already-decoded JSON) -> result or failure."""
    if not isinstance(data, dict):
        raise InvalidResponse("store response is not a JSON object")
    try:
        if "newlyCreated" in data:
            created = _NewlyCreated.model_validate(data["newlyCreated"])
            blob = created.blob_object
            _check_ids(blob.blob_id, blob.id, created.shared_blob_object)
            op_name, encoded = _resource_operation(created.resource_operation)
            return StoreResult(
                blob_id=blob.blob_id,
                object_id=blob.id,
                end_epoch=blob.storage.end_epoch,
                cost=created.cost,
                newly_created=True,
                deletable=blob.deletable,
                encoded_length=encoded if encoded is not None else blob.storage.storage_size,
                registered_epoch=blob.registered_epoch,
                certified_epoch=blob.certified_epoch,
                size=blob.size,
                shared_object_id=created.shared_blob_object,
                resource_operation=op_name,
                raw=data,
            )
        if "alreadyCertified" in data:
            certified = _AlreadyCertified.model_validate(data["alreadyCertified"])
            _check_ids(certified.blob_id, certified.object)
            if certified.event is None and certified.object is None:
                raise InvalidResponse("alreadyCertified has neither event nor object")
            event = certified.event
            return StoreResult(
                blob_id=certified.blob_id,
                object_id=certified.object,
                end_epoch=certified.end_epoch,
                cost=None,
                newly_created=False,
                deletable=None,
                resource_operation="alreadyCertified",
                tx_digest=event.tx_digest if event else None,
                event_seq=str(event.event_seq) if event else None,
                raw=data,
            )
        if "markedInvalid" in data:
            invalid = _MarkedInvalid.model_validate(data["markedInvalid"] or {})
            return Failure("marked_invalid", StoreFailed(
                f"publisher reports blob {_clean_text(str(invalid.blob_id), 60)} marked invalid",
                status_code=200, reason="MARKED_INVALID"), False)
        if "error" in data:
            err = data["error"]
            if isinstance(err, dict) and ("code" in err or "status" in err) and not (
                "failurePhase" in err or "errorMsg" in err
            ):
                return _envelope_in_200(data)
            failed = _StoreError.model_validate(err)
            phase = _clean_text(failed.failure_phase or "unknown", 60)
            return Failure("store_error", StoreFailed(
                f"publisher store failed in phase {phase}: {_clean_text(failed.error_msg or '')}",
                status_code=200, reason=phase), True)
    except ValidationError as exc:
        raise InvalidResponse(f"unexpected store response shape: {_validation_hint(exc)}") from exc
    raise InvalidResponse(
        f"unknown store response variant {_clean_text(','.join(map(str, data))[:60], 60)!r}"
    )


def _envelope_in_200(data: Any) -> Failure:
    """A Status envelope sent with HTTP 200: trust the code inside it."""
    code = data["error"].get("code")
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return failure_for_status(code, {}, json.dumps(data).encode(), "publisher")
    raise InvalidResponse("HTTP 200 with an error envelope that has no valid code")


def _validation_hint(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid"
    loc = ".".join(str(p) for p in errors[0]["loc"])
    return _clean_text(f"{loc}: {errors[0]['msg']}", 120)


def store_outcome(
    status: int, headers: Mapping[str, str], body: bytes, *, now: float | None = None
) -> StoreResult | Failure:
    """``PUT /v1/blobs`` answer -> :class:`StoreResult` or :class:`Failure`.

    A body that does not parse is a retryable failure: storing the same bytes
    again is safe (Walrus answers with the same blob id).
    """
    if status != 200:
        return failure_for_status(status, headers, body, "publisher", now=now)
    if (short := _length_failure(headers, body)) is not None:
        return short
    try:
        return _store_from_json(_decode_json(body))
    except InvalidResponse as exc:
        return Failure("invalid_response", exc, True, cause=exc.__cause__)


def quilt_store_outcome(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    identifiers: Collection[str] | None = None,
    *,
    now: float | None = None,
) -> QuiltStoreResult | Failure:
    """``PUT /v1/quilts`` answer -> :class:`QuiltStoreResult` or :class:`Failure`.

    With ``identifiers``, the returned patches must name exactly those.
    """
    if status != 200:
        return failure_for_status(status, headers, body, "publisher", now=now)
    if (short := _length_failure(headers, body)) is not None:
        return short
    try:
        data = _decode_json(body)
        if isinstance(data, dict) and "blobStoreResult" not in data and "error" in data:
            inner = _store_from_json(data)  # an error envelope/variant in place of a quilt
            if isinstance(inner, Failure):
                return inner
            raise InvalidResponse("quilt response lacks blobStoreResult")
        try:
            quilt = _QuiltStore.model_validate(data)
        except ValidationError as exc:
            raise InvalidResponse(
                f"unexpected quilt response shape: {_validation_hint(exc)}"
            ) from exc
        blob = _store_from_json(quilt.blob_store_result)
        if isinstance(blob, Failure):
            return blob
        patches: dict[str, str] = {}
        ranges: dict[str, tuple[int, int]] = {}
        for entry in quilt.stored_quilt_blobs:
            if not is_patch_id(entry.quilt_patch_id):
                raise InvalidResponse(f"malformed quilt patch id {_preview(entry.quilt_patch_id)}")
            if entry.identifier in patches:
                raise InvalidResponse(f"duplicate quilt identifier {_preview(entry.identifier)}")
            patches[entry.identifier] = entry.quilt_patch_id
            if entry.range is not None:
                ranges[entry.identifier] = entry.range
        if identifiers is not None and set(patches) != set(identifiers):
            raise InvalidResponse("quilt response names other identifiers than were sent")
        return QuiltStoreResult(blob=blob, patches=patches, ranges=ranges)
    except InvalidResponse as exc:
        return Failure("invalid_response", exc, True, cause=exc.__cause__)


def _raise(outcome: Any) -> Any:
    if isinstance(outcome, Failure):
        raise outcome.error from outcome.cause
    return outcome


def parse_store_response(body: bytes) -> StoreResult:
    """Parse a 200 ``PUT /v1/blobs`` body; raise StoreFailed / InvalidResponse etc."""
    result: StoreResult = _raise(store_outcome(200, {}, body))
    return result


def parse_quilt_store_response(body: bytes) -> QuiltStoreResult:
    """Parse a 200 ``PUT /v1/quilts`` body; raise a typed error when it failed."""
    result: QuiltStoreResult = _raise(quilt_store_outcome(200, {}, body))
    return result


# -- reads ----------------------------------------------------------------------


def read_outcome(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    expected_length: int | None = None,
    now: float | None = None,
) -> bytes | Failure:
    """An aggregator answer -> the body bytes or a :class:`Failure`.

    The body is checked against ``Content-Length`` (and ``expected_length`` for
    byte ranges); a mismatch is a retryable ``truncated`` failure.
    """
    if status not in (200, 206):
        return failure_for_status(status, headers, body, "aggregator", now=now)
    if (short := _length_failure(headers, body)) is not None:
        return short
    if expected_length is not None and len(body) != expected_length:
        return Failure("truncated", InvalidResponse(
            f"asked for {expected_length} bytes, aggregator sent {len(body)}"), True)
    return body


def parse_patch_list(body: bytes) -> list[QuiltPatch]:
    """Parse ``GET /v1/quilts/{id}/patches`` (snake_case ``patch_id``)."""
    data = _decode_json(body)
    if not isinstance(data, list):
        raise InvalidResponse("quilt patch list is not a JSON array")
    patches: list[QuiltPatch] = []
    for item in data:
        try:
            entry = _PatchEntry.model_validate(item)
        except ValidationError as exc:
            raise InvalidResponse(f"unexpected patch entry: {_validation_hint(exc)}") from exc
        if not is_patch_id(entry.patch_id):
            raise InvalidResponse(f"malformed quilt patch id {_preview(entry.patch_id)}")
        tags = {
            str(k): v if isinstance(v, str) else json.dumps(v) for k, v in entry.tags.items()
        }
        patches.append(QuiltPatch(identifier=entry.identifier, patch_id=entry.patch_id, tags=tags))
    return patches
