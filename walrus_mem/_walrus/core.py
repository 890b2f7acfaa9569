"""The sans-I/O core of the Walrus clients: configuration, counters, request building and
the operation state machines (stores with publisher failover, reads with aggregator
failover, read-back). :mod:`walrus_mem.walrus` drives them with httpx; see its docstring
and docs/walrus.md for the behaviour.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar
from urllib.parse import quote, urlsplit

import httpx
from pydantic import SecretStr

from ..errors import (
    AggregatorUnavailable,
    AuthenticationFailed,
    BlobNotFound,
    BodyTooLarge,
    ForbiddenBlob,
    InvalidInput,
    InvalidResponse,
    PublisherUnavailable,
    StorageError,
    VerificationFailed,
)
from .bounded_io import Bounded
from .credentials import TokenProvider, token_provider
from .endpoints import EndpointHealth
from .responses import (
    Failure,
    QuiltPatch,
    QuiltStoreResult,
    Side,
    StoreResult,
    parse_patch_list,
    quilt_store_outcome,
    read_outcome,
    store_outcome,
    validate_blob_id,
    validate_patch_id,
)
from .retry import Deadline, RetryPolicy, call_deadline, call_time_left
from .url_secrets import redact_userinfo, split_userinfo

__all__ = [
    "MAX_BLOB_BODY",
    "MAX_EPOCHS",
    "MAX_QUILT_BODY",
    "MAX_QUILT_PATCHES",
    "ClientStats",
    "VerifyCallback",
]

logger = logging.getLogger("walrus_mem.walrus")  # one logger for the client, as documented

MAX_BLOB_BODY: Final = 10 * 1024 * 1024  # publisher default --max-body-size (10,240 KiB)
MAX_QUILT_BODY: Final = 100 * 1024 * 1024  # --max-quilt-body-size
MAX_QUILT_PATCHES: Final = 666  # QuiltV1 with 1000 shards
MAX_EPOCHS: Final = 53
MAX_TAG_BYTES: Final = 64 * 1024
STORE_ANSWER_CAP: Final = 64 * 1024  # a blob store answer is ~1 KiB
READ_SLACK: Final = 4 * 1024  # allowed over an expected read size (padding, framing)
_JSON_CAP: Final = 64 * 1024  # /status, error bodies of known-size reads
RECENT_STORE_TTL: Final = 60.0
_STATUS_TIMEOUT: Final = 5.0
_QUILT_500_LIMIT: Final = 3  # 500s from one aggregator on a quilt route before it is final
USER_AGENT: Final = "walrus-mem"
_RESERVED_FIELD: Final = "_metadata"

T = TypeVar("T")
VerifyCallback = Callable[[bytes], object]


# -- stats ---------------------------------------------------------------------


@dataclass
class ClientStats:
    """Counters of what the client did and saw (thread-safe increments).

    ``faults`` counts every unsuccessful answer by kind (``http_503``,
    ``truncated``, ``store_error``, ``verification``, ``transport_ReadError`` ...),
    whether it led to a retry, a failover or the final error. ``retry_reasons``
    counts, by the same kinds, the failures that were followed by a backoff
    sleep and another attempt (``retries`` is their total). ``failovers``
    counts moves to the next aggregator after a failed read.
    """

    requests: int = 0
    retries: int = 0
    failovers: int = 0
    verification_failures: int = 0
    deadline_exhaustions: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    retry_reasons: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def _fault(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] += 1

    def _retry(self, kind: str) -> None:
        with self._lock:
            self.retries += 1
            self.retry_reasons[kind] += 1

    def snapshot(self) -> dict[str, Any]:
        """A plain-dict copy, e.g. for ``json.dumps`` or a benchmark report."""
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "failovers": self.failovers,
                "verification_failures": self.verification_failures,
                "deadline_exhaustions": self.deadline_exhaustions,
                "faults": dict(self.faults),
                "retry_reasons": dict(self.retry_reasons),
            }


# -- sans-I/O actions ------------------------------------------------------------


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


def _agrees_blob(result: StoreResult, body: bytes) -> StoreResult | Failure:
    """A store answer must describe the bytes that were sent."""
    if result.size is not None and result.size != len(body):
        return Failure("store_mismatch", InvalidResponse(
            f"publisher reports a blob of {result.size:,} bytes for {len(body):,} sent",
            reason="STORE_MISMATCH"), True)
    return result


def _agrees_quilt(result: QuiltStoreResult) -> QuiltStoreResult | Failure:
    """Each patch id starts with its quilt's blob id (Walrus's QuiltPatchId layout)."""
    quilt_id = result.quilt_id
    for identifier, patch_id in result.patches.items():
        if not patch_id.startswith(quilt_id) or len(patch_id) != 50:
            return Failure("store_mismatch", InvalidResponse(
                f"publisher answered patch id {patch_id[:60]!r} for {identifier[:40]!r}, "
                f"which is not a patch of quilt {quilt_id}", reason="STORE_MISMATCH"), True)
    return result


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


# -- the shared core ---------------------------------------------------------------


class Core:
    """Configuration, counters and the operation state machines."""

    def __init__(
        self,
        publisher_url: str | Sequence[str] | None,
        aggregator_urls: Sequence[str],
        *,
        token: str | SecretStr | Callable[[], object] | None,
        token_command: str | Sequence[str] | None,
        timeout: float,
        publish_deadline: float,
        read_deadline: float,
        epochs: int,
        permanent: bool,
        send_object_to: str | None,
        rng: random.Random | None,
        clock: Callable[[], float],
        retry: RetryPolicy | None,
        max_blob_size: int,
        recent_store_ttl: float,
    ) -> None:
        # base URL -> "Basic ..." from a user:password in it: the URLs kept, logged and
        # shown carry no credentials (url_secrets.py)
        self._basic_auth: dict[str, str] = {}
        if publisher_url is None:
            publishers: tuple[str, ...] = ()
        elif isinstance(publisher_url, str):
            publishers = (self._endpoint(publisher_url, "publisher_url"),)
        else:
            publishers = tuple(self._endpoint(u, "publisher URL") for u in publisher_url)
        self.publisher_urls = tuple(dict.fromkeys(publishers))
        self.publisher_url = self.publisher_urls[0] if self.publisher_urls else None
        if isinstance(aggregator_urls, str):
            raise InvalidInput("aggregator_urls must be a sequence of URLs, not one string")
        self.aggregator_urls = tuple(
            dict.fromkeys(self._endpoint(u, "aggregator URL") for u in aggregator_urls)
        )
        self._tokens: TokenProvider = token_provider(token, token_command)
        self._has_token = token_command is not None or callable(token) or bool(
            token.get_secret_value() if isinstance(token, SecretStr) else token
        )
        self.publisher_health = EndpointHealth(clock)
        self.aggregator_health = EndpointHealth(clock)
        self.timeout = _check_deadline(timeout, 10.0)
        self.publish_deadline = _check_deadline(publish_deadline, 10.0)
        self.read_deadline = _check_deadline(read_deadline, 30.0)
        self.epochs = _check_epochs(epochs)
        self.permanent = bool(permanent)
        self.send_object_to = _check_address(send_object_to)
        self.rng = rng if rng is not None else random.Random()
        self.clock = clock
        self.policy = retry if retry is not None else RetryPolicy()
        self.max_blob_size = max_blob_size
        self.recent_store_ttl = recent_store_ttl
        self.stats = ClientStats()
        self._recent: dict[str, float] = {}
        self._recent_lock = threading.Lock()

    def describe(self, name: str) -> str:
        token = ", token=**********" if self._has_token else ""
        return (
            f"{name}(publishers={list(self.publisher_urls)!r}, "
            f"aggregators={list(self.aggregator_urls)!r}{token})"
        )

    # -- recently stored blobs (404 right after a store is a cache lag) --

    def remember(self, blob_id: str) -> None:
        now = self.clock()
        with self._recent_lock:
            if len(self._recent) > 10_000:
                self._recent = {k: t for k, t in self._recent.items() if t > now}
            self._recent[blob_id] = now + self.recent_store_ttl

    def recently_stored(self, blob_id: str) -> bool:
        with self._recent_lock:
            until = self._recent.get(blob_id)
        return until is not None and until > self.clock()

    def forget_stored(self, blob_id: str) -> None:
        with self._recent_lock:
            self._recent.pop(blob_id, None)

    # -- request building --

    def _timeout(self, deadline: Deadline) -> float:
        return max(0.001, min(self.timeout, deadline.remaining()))

    def _endpoint(self, url: str, what: str) -> str:
        base, basic = split_userinfo(_check_url(url, what))
        if basic is not None:
            self._basic_auth[base] = basic
        return base

    def _auth(self, base: str, headers: dict[str, str] | None = None) -> dict[str, str] | None:
        """``headers`` plus the basic auth of ``base``'s URL, if it had a user:password
        (it replaces a bearer token, as httpx did with the credentials in the URL)."""
        basic = self._basic_auth.get(base)
        return headers if basic is None else {**(headers or {}), "Authorization": basic}

    def _publisher_headers(self, base: str) -> dict[str, str] | None:
        """Fresh per request (retries included): JWT publishers accept a token once."""
        token = self._tokens()
        if token is None:
            return self._auth(base)
        return self._auth(base, {"Authorization": f"Bearer {token.get_secret_value()}"})

    def _store_params(self, epochs: int | None, permanent: bool | None) -> dict[str, str]:
        params = {"epochs": str(_check_epochs(self.epochs if epochs is None else epochs))}
        if self.permanent if permanent is None else permanent:
            params["permanent"] = "true"
        else:
            # A no-op since publisher v1.33 (deletable is the default) but makes
            # older publishers create deletable blobs too.
            params["deletable"] = "true"
        if self.send_object_to is not None:
            params["send_object_to"] = self.send_object_to
        return params

    def _require_publisher(self) -> None:
        if not self.publisher_urls:
            raise PublisherUnavailable(
                "no publisher configured (Mainnet has no public publisher; run your own)"
            )

    # -- operations --

    def store_blob_op(
        self, data: object, epochs: int | None, permanent: bool | None, deadline: float | None
    ) -> Op[StoreResult]:
        body = _as_bytes(data, "blob data")
        if len(body) > self.max_blob_size:
            raise BodyTooLarge(
                f"blob of {len(body):,} bytes is over the publisher limit of "
                f"{self.max_blob_size:,} bytes; batch small facts into a quilt, split large ones"
            )
        self._require_publisher()
        params = self._store_params(epochs, permanent)
        seconds = _check_deadline(deadline, self.publish_deadline)

        def make(base: str, timeout: float, budget: float) -> Send:
            return Send("PUT", base + "/v1/blobs", "publisher", timeout, params=params,
                         headers=self._publisher_headers(base), content=body, budget=budget,
                         max_body=STORE_ANSWER_CAP)

        def interpret(response: httpx.Response) -> StoreResult | Failure:
            outcome = store_outcome(response.status_code, _headers(response), response.content)
            return outcome if isinstance(outcome, Failure) else _agrees_blob(outcome, body)

        result = yield from self._publish(make, interpret, seconds)
        self.remember(result.blob_id)
        return result

    def store_quilt_op(
        self,
        files: Mapping[str, bytes],
        metadata: Mapping[str, Mapping[str, str]] | None,
        epochs: int | None,
        permanent: bool | None,
        deadline: float | None,
    ) -> Op[QuiltStoreResult]:
        if not isinstance(files, Mapping) or not files:
            raise InvalidInput("a quilt needs at least one file (identifier -> bytes)")
        if len(files) > MAX_QUILT_PATCHES:
            raise InvalidInput(f"a quilt holds at most {MAX_QUILT_PATCHES} patches")
        parts = [
            (_check_identifier(name), _as_bytes(blob, f"quilt file {name[:40]!r}"))
            for name, blob in files.items()
        ]
        total = sum(len(blob) for _, blob in parts)
        if total > MAX_QUILT_BODY:
            raise BodyTooLarge(
                f"quilt of {total:,} bytes is over the {MAX_QUILT_BODY:,}-byte limit"
            )
        form = self._quilt_metadata(metadata, {name for name, _ in parts})
        self._require_publisher()
        params = self._store_params(epochs, permanent)
        seconds = _check_deadline(deadline, self.publish_deadline)
        multipart = [(name, (name, blob, "application/octet-stream")) for name, blob in parts]
        identifiers = [name for name, _ in parts]
        # The answer names each identifier (JSON-escaped: up to 6 bytes per byte) and a patch id.
        cap = STORE_ANSWER_CAP + sum(6 * len(n.encode()) + 256 for n in identifiers)

        def make(base: str, timeout: float, budget: float) -> Send:
            return Send("PUT", base + "/v1/quilts", "publisher", timeout, params=params,
                         headers=self._publisher_headers(base), data=form, files=multipart,
                         budget=budget, max_body=cap)

        def interpret(response: httpx.Response) -> QuiltStoreResult | Failure:
            outcome = quilt_store_outcome(
                response.status_code, _headers(response), response.content, identifiers
            )
            return outcome if isinstance(outcome, Failure) else _agrees_quilt(outcome)

        result = yield from self._publish(make, interpret, seconds)
        self.remember(result.quilt_id)
        return result

    @staticmethod
    def _quilt_metadata(
        metadata: Mapping[str, Mapping[str, str]] | None, names: set[str]
    ) -> dict[str, str] | None:
        if not metadata:
            return None
        entries = []
        for identifier, tags in metadata.items():
            if identifier not in names:
                raise InvalidInput(f"metadata for unknown quilt identifier {identifier[:40]!r}")
            if not isinstance(tags, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in tags.items()
            ):
                raise InvalidInput("quilt tags must map strings to strings")
            entries.append({"identifier": identifier, "tags": dict(tags)})
        encoded = json.dumps(entries, ensure_ascii=False, separators=(",", ":"))
        if len(encoded.encode()) > MAX_TAG_BYTES:
            raise InvalidInput("quilt tags are over the 64 KiB limit")
        return {_RESERVED_FIELD: encoded}

    def _publish(
        self,
        make: Callable[[str, float, float], Send],
        interpret: Callable[[httpx.Response], T | Failure],
        seconds: float,
    ) -> Op[T]:
        """Send to the publishers (healthy first) until success, a final error, or the deadline.

        A retryable failure moves on to the next publisher at once; after every
        publisher failed in a round, back off and go round again. A publisher
        that refused the connection ``max_connect_failures`` times in a row, or
        answered like something that is not a publisher, is dropped for this call.
        """
        deadline = Deadline(_within_call(seconds, "publisher"), self.clock)
        active = self.publisher_health.order(self.publisher_urls)
        connect_failures = dict.fromkeys(active, 0)
        round_no = 0
        while True:
            last: Failure | None = None
            for index, base in enumerate(list(active)):
                if index > 0:
                    if deadline.remaining() < self.policy.min_request_time:
                        assert last is not None
                        self._exhausted(last.error, round_no + 1, deadline)
                        raise last.error from last.cause
                    self.stats.add("failovers")
                with call_deadline(deadline.remaining()):  # bounds a token command too
                    send = make(base, self._timeout(deadline), deadline.remaining())
                outcome = yield send
                result = self._interpret(outcome, send, interpret)
                if not isinstance(result, Failure):
                    self.publisher_health.succeeded(base)
                    return result
                self.stats._fault(result.kind)
                if _unhealthy(result):
                    self.publisher_health.failed(base)
                last = result
                if not result.retryable:
                    if result.kind == "http_404" and len(active) > 1:
                        active.remove(base)  # not a publisher: try the others
                        continue
                    raise result.error from result.cause
                connect_failures[base] = connect_failures[base] + 1 if result.connect else 0
                if connect_failures[base] >= self.policy.max_connect_failures:
                    active.remove(base)
            assert last is not None
            if not active:
                last.error.add_note(
                    f"gave up after {self.policy.max_connect_failures} refused connections"
                    if last.connect else "no publisher left to try"
                )
                raise last.error from last.cause
            delay = self.policy.delay(round_no, self.rng, last.retry_after)
            if not deadline.allows(delay, self.policy.min_request_time):
                self._exhausted(last.error, round_no + 1, deadline)
                raise last.error from last.cause
            self.stats._retry(last.kind)
            logger.debug("publisher retry %d in %.3f s after %s", round_no + 1, delay, last.kind)
            yield Sleep(delay)
            round_no += 1

    def _exhausted(self, error: StorageError, attempts: int, deadline: Deadline) -> None:
        self.stats.add("deadline_exhaustions")
        error.add_note(
            f"gave up after {attempts} attempt(s) in {deadline.elapsed():.2f} s "
            f"(deadline {deadline.total:g} s)"
        )

    def _interpret(
        self,
        outcome: Outcome,
        send: Send,
        interpret: Callable[[httpx.Response], T | Failure],
    ) -> T | Failure:
        side: Side = send.side or "aggregator"
        if isinstance(outcome, httpx.RequestError):
            return _transport_failure(outcome, side, send.url)
        if isinstance(outcome, Bounded):
            return _bounded_failure(outcome, side, send)
        if not isinstance(outcome, httpx.Response):  # pragma: no cover - driver bug
            raise TypeError("driver must answer a send with a response or an httpx error")
        result = interpret(outcome)
        return _with_cause(result, outcome) if isinstance(result, Failure) else result

    def read_op(
        self,
        path: str,
        *,
        key: str,
        verify: VerifyCallback | None,
        deadline: float | None,
        expected_length: int | None = None,
        params: dict[str, str] | None = None,
        max_size: int | None = None,
        quilt_route: bool = False,
    ) -> Op[bytes]:
        """GET ``path`` from the aggregators until bytes arrive that verify."""
        cap = _read_cap(max_size if max_size is not None else expected_length,
                        self.max_blob_size)

        def interpret(response: httpx.Response) -> bytes | Failure:
            return read_outcome(response.status_code, _headers(response), response.content,
                                expected_length=expected_length)

        return self._aggregate(path, key, interpret, verify, deadline, params, cap, quilt_route)

    def read_back_op(
        self, data: object, blob_id: str | None, patch_id: str | None, deadline: float | None
    ) -> Op[None]:
        """Read a stored blob/patch back and require byte equality (by SHA-256)."""
        expected = _as_bytes(data, "read-back data")
        if (blob_id is None) == (patch_id is None):
            raise InvalidInput("read_back needs exactly one of blob_id and patch_id")
        digest = hashlib.sha256(expected).digest()

        def same(body: bytes) -> bool:
            return len(body) == len(expected) and hashlib.sha256(body).digest() == digest

        if patch_id is not None:
            path = f"/v1/blobs/by-quilt-patch-id/{validate_patch_id(patch_id)}"
            yield from self.read_op(path, key=patch_id[:43], verify=same, deadline=deadline,
                                    max_size=len(expected), quilt_route=True)
        else:
            assert blob_id is not None
            yield from self.read_op(read_path_blob(blob_id), key=blob_id, verify=same,
                                    deadline=deadline, max_size=len(expected))

    def list_patches_op(self, quilt_id: str, deadline: float | None) -> Op[list[QuiltPatch]]:
        quilt_id = validate_blob_id(quilt_id, "quilt id")

        def interpret(response: httpx.Response) -> list[QuiltPatch] | Failure:
            body = read_outcome(response.status_code, _headers(response), response.content)
            if isinstance(body, Failure):
                return body
            try:
                return parse_patch_list(body)
            except InvalidResponse as exc:
                return Failure("invalid_response", exc, True, cause=exc.__cause__)

        return self._aggregate(f"/v1/quilts/{quilt_id}/patches", quilt_id, interpret, None,
                               deadline, None, self.max_blob_size, True)

    def _aggregate(
        self,
        path: str,
        key: str,
        interpret: Callable[[httpx.Response], T | Failure],
        verify: Callable[[T], object] | None,
        deadline_s: float | None,
        params: dict[str, str] | None,
        cap: int,
        quilt_route: bool = False,
    ) -> Op[T]:
        """Try the aggregators (healthy first); rounds separated by backoff.

        An answer that only says something about *this* aggregator (403
        BLOB_TOO_LARGE, 451, 404, and 500 on a quilt route, which real Walrus
        gives for a non-quilt blob) moves on to the next one; such an aggregator
        is not asked again in this call.
        """
        if not self.aggregator_urls:
            raise AggregatorUnavailable(
                "no aggregator configured (set aggregator_urls; publisher URLs serve reads "
                "only with publisher_serves_reads)"
            )
        deadline = Deadline(_within_call(_check_deadline(deadline_s, self.read_deadline),
                                         "aggregator"), self.clock)
        active = self.aggregator_health.order(self.aggregator_urls)
        connect_failures = dict.fromkeys(active, 0)
        last: Failure | None = None
        last_verify: Failure | None = None
        finals: list[Failure] = []
        quilt_500: Counter[str] = Counter()
        # What each aggregator answered, for the error: the final one alone (often a liar's
        # verification failure) would hide why the others did not serve the read.
        answers: _Answers = _Answers(active)
        round_no = 0
        while True:
            not_found: Failure | None = None
            retry_after: float | None = None
            for index, base in enumerate(list(active)):
                if index > 0:
                    self.stats.add("failovers")
                if round_no > 0 or index > 0:
                    if deadline.remaining() < self.policy.min_request_time:
                        raise self._read_exhausted(last, last_verify, round_no, deadline,
                                                   answers)
                send = Send("GET", base + path, "aggregator", self._timeout(deadline),
                             params=params, headers=self._auth(base), follow_redirects=True,
                             budget=deadline.remaining(), max_body=cap)
                outcome = yield send
                result = self._interpret(outcome, send, interpret)
                if not isinstance(result, Failure) and verify is not None:
                    result = self._verify(result, verify, base)
                if not isinstance(result, Failure):
                    self.aggregator_health.succeeded(base)
                    if round_no or index:
                        logger.debug("read %s served by %s after %d round(s)", key, base, round_no)
                    return result
                if result.kind == "http_404" and self.recently_stored(key):
                    result = Failure("not_found_after_store", result.error, True,
                                     cause=result.cause)
                self.stats._fault(result.kind)
                answers.add(base, result.kind)
                # Consecutive 500s only: a transient 500 between other answers is an
                # overloaded node, not the non-quilt-blob answer.
                quilt_500[base] = quilt_500[base] + 1 \
                    if quilt_route and result.kind == "http_500" else 0
                if quilt_500[base] >= _QUILT_500_LIMIT and not answers.only_liars_besides(
                        base, active):
                        result.error.add_note(
                            f"{_QUILT_500_LIMIT} answers of 500 to a quilt route: real Walrus "
                            "answers so for a blob that is not a quilt"
                        )
                        finals.append(result)
                        active.remove(base)
                        answers.drop(base, f"{_QUILT_500_LIMIT} answers of 500 to a quilt route")
                        continue
                if _unhealthy(result):
                    self.aggregator_health.failed(base)
                if not result.retryable:
                    if isinstance(result.error, BlobNotFound):
                        not_found = result  # ask the others before believing it
                        continue
                    if isinstance(result.error, ForbiddenBlob | BodyTooLarge):
                        finals.append(result)  # this operator's limit or blocklist
                        active.remove(base)
                        answers.drop(base, result.kind)
                        continue
                    raise result.error from result.cause
                if result.kind == "verification":
                    last_verify = result
                last = result
                if result.retry_after is not None:
                    retry_after = max(retry_after or 0.0, result.retry_after)
                connect_failures[base] = connect_failures[base] + 1 if result.connect else 0
                if connect_failures[base] >= self.policy.max_connect_failures \
                        and not answers.only_liars_besides(base, active):
                    active.remove(base)
                    answers.drop(base, f"{connect_failures[base]} failed connections in a row")
            if not_found is not None:
                raise not_found.error from not_found.cause
            if not active:
                if finals and (last is None or not last.connect):
                    chosen = finals[0]
                    if len(self.aggregator_urls) > 1:
                        chosen.error.add_note(
                            f"none of the {len(self.aggregator_urls)} aggregators served it"
                        )
                    raise chosen.error from chosen.cause
                assert last is not None
                last.error.add_note("every aggregator refused the connection")
                raise self._read_exhausted(last, last_verify, round_no, deadline, answers,
                                           note=False)
            delay = self.policy.delay(round_no, self.rng, retry_after)
            if not deadline.allows(delay, self.policy.min_request_time):
                raise self._read_exhausted(last, last_verify, round_no, deadline, answers)
            self.stats._retry(last.kind if last is not None else "unknown")
            logger.debug("read round %d failed (%s); retry in %.3f s", round_no + 1,
                         last.kind if last else "?", delay)
            yield Sleep(delay)
            round_no += 1

    def _verify(self, value: T, verify: Callable[[T], object], base: str) -> T | Failure:
        try:
            verdict = verify(value)
        except Exception as exc:  # any exception means "reject this answer"
            cause: BaseException = exc
        else:
            if verdict is not False:
                return value
            cause = ValueError("verify callback returned False")
        self.stats.add("verification_failures")
        error = VerificationFailed(
            f"content from aggregator {_origin(base)} failed verification: "
            f"{type(cause).__name__}"
        )
        return Failure("verification", error, True, cause=cause)

    def _read_exhausted(
        self,
        last: Failure | None,
        last_verify: Failure | None,
        rounds: int,
        deadline: Deadline,
        answers: _Answers | None = None,
        *,
        note: bool = True,
    ) -> StorageError:
        """The error to raise when reads ran out of time (or of aggregators)."""
        chosen = last_verify if last_verify is not None else last
        if chosen is None:
            error: StorageError = AggregatorUnavailable("read deadline passed before any answer")
        else:
            error = chosen.error
            error.__cause__ = chosen.cause
        if note:
            self._exhausted(error, rounds + 1, deadline)
        if answers is not None and len(self.aggregator_urls) > 1:
            error.add_note(answers.summary())
        return error

    def status_op(self) -> Op[dict[str, bool]]:
        endpoints = [(f"publisher:{url}", url) for url in self.publisher_urls]
        endpoints += [(f"aggregator:{url}", url) for url in self.aggregator_urls]
        reachable: dict[str, bool] = {}
        answered: dict[str, bool] = {}  # a URL in both roles (a daemon) is asked once
        for label, base in endpoints:
            if base not in answered:
                seconds = min(self.timeout, _STATUS_TIMEOUT)  # per distinct endpoint
                outcome = yield Send("GET", base + "/status", None, seconds, budget=seconds,
                                      headers=self._auth(base), max_body=_JSON_CAP)
                answered[base] = isinstance(outcome, httpx.Response) \
                    and outcome.status_code == 200
            reachable[label] = answered[base]
        return reachable


class _Answers:
    """Failed answers per aggregator within one read call, and why any was dropped."""

    def __init__(self, urls: Sequence[str]) -> None:
        self._kinds: dict[str, Counter[str]] = {url: Counter() for url in urls}
        self._dropped: dict[str, str] = {}

    def add(self, url: str, kind: str) -> None:
        self._kinds.setdefault(url, Counter())[kind] += 1

    def only_liars_besides(self, url: str, active: Sequence[str]) -> bool:
        """Whether every other aggregator still asked has failed verification in this call.

        Dropping ``url`` then would leave only endpoints that served wrong bytes, so the
        call could only end in VerificationFailed: keep asking it until the deadline.
        """
        others = [other for other in active if other != url]
        return bool(others) and all(self._kinds[other]["verification"] for other in others)

    def drop(self, url: str, reason: str) -> None:
        self._dropped[url] = reason

    def summary(self) -> str:
        parts = []
        for url, kinds in self._kinds.items():
            counted = ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common()) or "no answer"
            dropped = f" (not asked again in this call: {self._dropped[url]})" \
                if url in self._dropped else ""
            parts.append(f"{_origin(url)}: {counted}{dropped}")
        return "failed answers per aggregator: " + "; ".join(parts)


def _read_cap(expected: int | None, limit: int) -> int:
    """Bytes a read may return: the expected size plus slack, else the blob limit."""
    if expected is None:
        return limit
    if not isinstance(expected, int) or isinstance(expected, bool) or expected < 0:
        raise InvalidInput(f"max_size must be a non-negative integer, got {expected!r}")
    return expected + READ_SLACK


def read_path_blob(blob_id: str) -> str:
    return f"/v1/blobs/{validate_blob_id(blob_id)}"


def check_range(start: int, length: int) -> None:
    for name, value, low in (("start", start, 0), ("length", length, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise InvalidInput(f"byte range {name} must be an integer >= {low}, got {value!r}")


def log_response(send: Send, outcome: Outcome, started: float) -> None:
    if not logger.isEnabledFor(logging.DEBUG):
        return
    ms = (time.perf_counter() - started) * 1000
    path = urlsplit(send.url).path
    what = (
        outcome.status_code if isinstance(outcome, httpx.Response) else type(outcome).__name__
    )
    logger.debug("%s %s%s -> %s in %.1f ms", send.method, _origin(send.url), path, what, ms)


def build(client: httpx.Client | httpx.AsyncClient, send: Send) -> httpx.Request:
    return client.build_request(
        send.method,
        send.url,
        params=send.params,
        headers=send.headers,
        content=send.content,
        data=send.data,
        files=send.files,
        timeout=send.timeout,
    )


# -- the clients -------------------------------------------------------------------


def quilt_identifier_path(quilt_id: str, identifier: str) -> str:
    quilt_id = validate_blob_id(quilt_id, "quilt id")
    if not isinstance(identifier, str) or not identifier:
        raise InvalidInput("quilt identifier must be a non-empty string")
    return f"/v1/blobs/by-quilt-id/{quilt_id}/{quote(identifier, safe='')}"
