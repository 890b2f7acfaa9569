"""Wire shapes: the AIP-193 JSON error envelope, axum's plain-text rejections, read headers."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

DAEMON_DOMAIN = "daemon.walrus.space"
CACHE_CONTROL = "public, max-age=86400, stale-while-revalidate=3600"
TEXT_PLAIN = "text/plain; charset=utf-8"

STATUS_CODES: dict[str, int] = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "SIZE_EXCEEDED": 403,
    "NOT_FOUND": 404,
    "RANGE_NOT_SATISFIABLE": 416,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE_FOR_LEGAL_REASONS": 451,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}

MSG_BLOB_NOT_FOUND = (
    "the requested blob ID does not exist on Walrus, ensure that it was entered correctly"
)
MSG_QUILT_PATCH_NOT_FOUND = "the requested quilt patch does not exist on Walrus"
MSG_INSUFFICIENT_CONFIRMATIONS = (
    "the service timed-out while waiting for confirmations, please try again"
)
MSG_MARKED_INVALID = "the blob was marked invalid, which is likely a system error, please report it"
MSG_PUBLISHER_OVERLOADED = "the publisher is receiving too many requests; please try again later"
MSG_AGGREGATOR_OVERLOADED = "the aggregator is receiving too many requests; please try again later"
MSG_BODY_TOO_LARGE = "Failed to buffer the request body: length limit exceeded"


def dumps(value: Any) -> bytes:
    """Compact JSON like serde_json (insertion order kept, no spaces)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def json_response(
    value: Any, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(dumps(value), status_code=status_code, headers=dict(headers or {}),
                    media_type="application/json")


def error_envelope(
    status: str,
    reason: str,
    message: str,
    *,
    domain: str = DAEMON_DOMAIN,
    debug_detail: str | None = None,
) -> dict[str, Any]:
    details: list[dict[str, Any]] = [
        {"@type": "ErrorInfo", "reason": reason, "domain": domain, "metadata": {}}
    ]
    if debug_detail is not None:
        details.append({"@type": "DebugInfo", "stackEntries": [], "detail": debug_detail})
    return {
        "error": {
            "status": status,
            "code": STATUS_CODES[status],
            "message": message,
            "details": details,
        }
    }


def api_error(
    status: str,
    reason: str,
    message: str,
    *,
    domain: str = DAEMON_DOMAIN,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A handler error: JSON envelope with the HTTP code of ``status``."""
    return json_response(
        error_envelope(status, reason, message, domain=domain), STATUS_CODES[status], headers
    )


def internal_error(message: str, headers: Mapping[str, str] | None = None, *,
                   domain: str = DAEMON_DOMAIN) -> Response:
    """Daemon ``Internal(anyhow)`` errors: reason INTERNAL_ERROR, a TraceID, and the domain
    of the error type that wraps it (``daemon.walrus.space`` for the route errors,
    ``auth.publisher.walrus.space`` for PublisherAuthError), not ``global``: the
    ``#[rest_api_error(delegate)]`` variant delegates status, reason and details to
    anyhow's RestApiError impl, but the derive's ``domain()`` is always the enum's own
    (MystenLabs/walrus 3c1cacc, crates/walrus-proc-macros/src/derive_api_errors.rs
    ``domain_method``; common/api.rs ``to_response``). ``message`` is the underlying error
    text (the enum's Display, ``#[error(transparent)]``)."""
    body = error_envelope(
        "INTERNAL",
        "INTERNAL_ERROR",
        message,
        domain=domain,
        debug_detail=f"TraceID: {secrets.token_hex(16)}",
    )
    return json_response(body, 500, headers)


def blob_not_found() -> Response:
    return api_error("NOT_FOUND", "BLOB_NOT_FOUND", MSG_BLOB_NOT_FOUND)


def quilt_patch_not_found() -> Response:
    return api_error("NOT_FOUND", "QUILT_PATCH_NOT_FOUND", MSG_QUILT_PATCH_NOT_FOUND)


def forbidden_blob(message: str = "the requested metadata is blocked") -> Response:
    return api_error("UNAVAILABLE_FOR_LEGAL_REASONS", "FORBIDDEN_BLOB", message)


def malformed(message: str) -> Response:
    return api_error(
        "INVALID_ARGUMENT", "MALFORMED_REQUEST", f"the request is malformed: {message}"
    )


def plain(text: str, status_code: int, headers: Mapping[str, str] | None = None) -> Response:
    """axum framework rejections and load shedding: plain text, not JSON."""
    return Response(text, status_code=status_code, headers=dict(headers or {}),
                    media_type=TEXT_PLAIN)


def bad_query(detail: str) -> Response:
    return plain(f"Failed to deserialize query string: {detail}", 400)


def bad_path(detail: str) -> Response:
    return plain(f"Invalid URL: {detail}", 400)


def body_too_large() -> Response:
    return plain(MSG_BODY_TOO_LARGE, 413)


def read_headers(request: Request, etag: str) -> dict[str, str]:
    """Success headers of aggregator reads, including the Accept/Content-Type mirroring."""
    headers = {
        "x-content-type-options": "nosniff",
        "cache-control": CACHE_CONTROL,
        "etag": etag,
    }
    accept = request.headers.get("accept")
    content_type = request.headers.get("content-type")
    if accept is not None and "*" not in accept:
        headers["content-type"] = accept
    elif request.method == "GET" and content_type is not None:
        headers["content-type"] = content_type
    return headers
