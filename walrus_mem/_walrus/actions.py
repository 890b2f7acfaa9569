"""The sans-I/O actions the core yields to its driver, and what a failed answer says.

An operation (:mod:`walrus_mem._walrus.core`, :mod:`walrus_mem._walrus.reads`) is a
generator: it yields a :class:`Send` or a :class:`Sleep` and receives the driver's
:data:`Outcome` (walrus.py drives it with httpx, sync or async). The helpers below turn
an outcome that failed into a typed :class:`~walrus_mem._walrus.responses.Failure`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

import httpx

from ..errors import (
    AggregatorUnavailable,
    AuthenticationFailed,
    InvalidResponse,
    PublisherUnavailable,
    StorageError,
)
from .bounded_io import Bounded
from .checks import MAX_BLOB_BODY
from .responses import Failure, Side

__all__ = ["Op", "Outcome", "Send", "Sleep"]

T = TypeVar("T")


@dataclass(frozen=True)
class Send:
    method: str
    url: str
    side: Side | None  # None: a /status probe
    timeout: float
    params: dict[str, str] | None = None
    headers: dict[str, str] | None = None
    content: bytes | None = None
    data: dict[str, str] | None = None
    files: list[tuple[str, tuple[str, bytes, str]]] | None = None
    follow_redirects: bool = False
    budget: float = 30.0  # wall-clock seconds for the whole exchange, body included
    max_body: int = MAX_BLOB_BODY  # bytes of response body read before giving up


@dataclass(frozen=True)
class Sleep:
    seconds: float


Outcome = httpx.Response | httpx.RequestError | Bounded | None
Op = Generator[Send | Sleep, Outcome, T]


def _transport_failure(exc: httpx.RequestError, side: Side, url: str) -> Failure:
    """Transport problems are retryable, except ones a retry cannot fix."""
    error_type: type[StorageError] = (
        PublisherUnavailable if side == "publisher" else AggregatorUnavailable
    )
    name = type(exc).__name__
    text = str(exc) or name
    message = f"{side} {_origin(url)} unreachable: {name}: {text}"
    if isinstance(exc, httpx.DecodingError):
        return Failure(f"transport_{name}", InvalidResponse(message), True, cause=exc)
    fatal = isinstance(exc, httpx.UnsupportedProtocol | httpx.TooManyRedirects)
    connect = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
    return Failure(f"transport_{name}", error_type(message), not fatal, connect=connect, cause=exc)


def _bounded_failure(cut: Bounded, side: Side, send: Send) -> Failure:
    """A body over its cap or a call past its deadline: retryable elsewhere, typed here."""
    where = f"{side} {_origin(send.url)}"
    if cut.kind == "too_large":
        return Failure("response_too_large", InvalidResponse(
            f"{where} sent more than {send.max_body:,} bytes: {cut}",
            reason="RESPONSE_TOO_LARGE"), True)
    error_type: type[StorageError] = (
        PublisherUnavailable if side == "publisher" else AggregatorUnavailable
    )
    return Failure("deadline", error_type(f"{where}: {cut}", reason="DEADLINE_EXCEEDED"), True)


def _unhealthy(failure: Failure) -> bool:
    """Failures another endpoint may not have: bench this one for a while."""
    kind = failure.kind
    return (
        kind.startswith(("transport_", "http_5"))
        or kind in ("http_429", "http_408", "deadline", "response_too_large", "truncated",
                    "invalid_response", "store_mismatch", "verification")
    ) and not isinstance(failure.error, AuthenticationFailed)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"  # never a user:password


def _headers(response: httpx.Response) -> dict[str, str]:
    return {k.lower(): v for k, v in response.headers.items()}


def _status_cause(response: httpx.Response) -> httpx.HTTPStatusError:
    """An httpx error to chain typed errors from, carrying request and response."""
    return httpx.HTTPStatusError(
        f"HTTP {response.status_code} from {_origin(str(response.request.url))}",
        request=response.request,
        response=response,
    )


def _with_cause(failure: Failure, response: httpx.Response) -> Failure:
    if failure.cause is not None:
        return failure
    return Failure(failure.kind, failure.error, failure.retryable, failure.retry_after,
                   failure.connect, _status_cause(response))
