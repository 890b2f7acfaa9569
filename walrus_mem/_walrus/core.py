"""The sans-I/O core of the Walrus clients: configuration, request building and the
operation state machines (stores with publisher failover here; reads with aggregator
failover and read-back in the :mod:`~walrus_mem._walrus.reads` mixin; the actions an
operation yields in actions.py, the argument checks in checks.py, the counters in
stats.py). :mod:`walrus_mem.walrus` drives them with httpx; see its docstring and
docs/walrus.md for the behaviour.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar, cast
from urllib.parse import quote, urlsplit

import httpx
from pydantic import SecretStr

from ..errors import BodyTooLarge, InvalidInput, InvalidResponse, PublisherUnavailable, StorageError
from .actions import (
    Op,
    Outcome,
    Send,
    Sleep,
    _bounded_failure,
    _headers,
    _origin,
    _transport_failure,
    _unhealthy,
    _with_cause,
)
from .adopt import BlobIdOracle, StoreRequest, check_stored, in_doubt, note_in_doubt
from .bounded_io import Bounded
from .checks import (
    _RESERVED_FIELD,
    MAX_QUILT_BODY,
    MAX_QUILT_PATCHES,
    MAX_TAG_BYTES,
    _as_bytes,
    _check_address,
    _check_deadline,
    _check_epochs,
    _check_identifier,
    _check_url,
    _within_call,
)
from .cost import CostSink, cost_of, report
from .credentials import TokenProvider, TokenRequest, token_provider
from .endpoints import EndpointHealth
from .quilt_size import encoded_quilt_size
from .reads import Reads
from .responses import (
    Failure,
    QuiltStoreResult,
    Side,
    StoreResult,
    quilt_store_outcome,
    store_outcome,
    validate_blob_id,
)
from .retry import Deadline, RetryPolicy, call_deadline
from .stats import ClientStats
from .url_secrets import split_userinfo

__all__ = ["RECENT_STORE_TTL", "USER_AGENT", "Core", "build", "log_response",
           "quilt_identifier_path"]

logger = logging.getLogger("walrus_mem.walrus")  # one logger for the client, as documented

STORE_ANSWER_CAP: Final = 64 * 1024  # a blob store answer is ~1 KiB
_JSON_CAP: Final = 64 * 1024  # /status, error bodies of known-size reads
RECENT_STORE_TTL: Final = 60.0
_STATUS_TIMEOUT: Final = 5.0
USER_AGENT: Final = "walrus-mem"

T = TypeVar("T")


# -- store answers ---------------------------------------------------------------


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


# -- the shared core ---------------------------------------------------------------


class Core(Reads):
    """Configuration, counters and the operation state machines."""

    def __init__(
        self,
        publisher_url: str | Sequence[str] | None,
        aggregator_urls: Sequence[str],
        *,
        token: str | SecretStr | Callable[..., object] | None,
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
        blob_id: BlobIdOracle | None = None,
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
        # learned per publisher from 413s (base URL -> bytes); Memory keeps them in its catalog
        self.request_caps: dict[str, int] = {}
        # where stores outside a cost scope are recorded (cost.py); Memory sets it on the
        # client it opens
        self.cost_sink: CostSink | None = None
        # never pay twice (adopt.py): stores whose answer was lost, by request fingerprint
        self.blob_id = blob_id
        self.in_doubt: dict[str, Any] = {}
        self.epoch_hint: int | None = None  # the epoch of the last store answer
        self.aggregator_health = EndpointHealth(clock)
        self.timeout = _check_deadline(timeout, 10.0)
        self.publish_deadline = _check_deadline(publish_deadline, 30.0)
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

    def _publisher_headers(
        self, base: str, route: str, params: Mapping[str, str], size: int, body_size: int
    ) -> dict[str, str] | None:
        """Fresh per request (retries included): JWT publishers accept a token once. The
        token source is told the request (its claims can then be exact)."""
        token = self._tokens(TokenRequest(
            route=route, size=size, body_size=body_size, epochs=int(params["epochs"]),
            send_object_to=params.get("send_object_to"), publisher=base))
        if token is None:
            return self._auth(base)
        return self._auth(base, {"Authorization": f"Bearer {token.get_secret_value()}"})

    def _store_params(self, epochs: int | None, permanent: bool | None) -> dict[str, str]:
        params = {"epochs": str(_check_epochs(self.epochs if epochs is None else epochs))}
        # Deletable is the default since publisher v1.33 and `deletable` deprecated since
        # v1.35 (a removal would make it an unknown parameter: a 400): only opt out.
        if self.permanent if permanent is None else permanent:
            params["permanent"] = "true"
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
            headers = self._publisher_headers(base, "blobs", params, len(body), len(body))
            return Send("PUT", base + "/v1/blobs", "publisher", timeout, params=params,
                         headers=headers, content=body, budget=budget,
                         max_body=STORE_ANSWER_CAP)

        def interpret(response: httpx.Response) -> StoreResult | Failure:
            outcome = store_outcome(response.status_code, _headers(response), response.content)
            return outcome if isinstance(outcome, Failure) else _agrees_blob(outcome, body)

        request = StoreRequest("blobs", body=body, epochs=int(params["epochs"]),
                               permanent="permanent" in params)
        adopted = yield from check_stored(self, request, seconds)  # a lost answer before
        if isinstance(adopted, StoreResult):
            return adopted
        result = yield from self._publish(make, interpret, seconds, size=len(body),
                                          request=request)
        self.remember(result.blob_id)
        self._note_epoch(result)
        report(cost_of(result, kind="blob", files=1, sent_bytes=len(body)), self.cost_sink)
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
        # what a token's size claims are compared with: the quilt the publisher builds, and
        # the multipart body (its length does not depend on the random boundary)
        quilt_size = encoded_quilt_size([(n, len(b)) for n, b in parts], metadata)
        body_size = int(httpx.Request("PUT", "http://publisher/", data=form,
                                      files=multipart).headers["Content-Length"])

        def make(base: str, timeout: float, budget: float) -> Send:
            headers = self._publisher_headers(base, "quilts", params, quilt_size, body_size)
            return Send("PUT", base + "/v1/quilts", "publisher", timeout, params=params,
                         headers=headers, data=form, files=multipart,
                         budget=budget, max_body=cap)

        def interpret(response: httpx.Response) -> QuiltStoreResult | Failure:
            outcome = quilt_store_outcome(
                response.status_code, _headers(response), response.content, identifiers
            )
            return outcome if isinstance(outcome, Failure) else _agrees_quilt(outcome)

        request = StoreRequest("quilts", files=dict(parts), metadata=metadata,
                               epochs=int(params["epochs"]), permanent="permanent" in params)
        adopted = yield from check_stored(self, request, seconds)  # a lost answer before
        if isinstance(adopted, QuiltStoreResult):
            return adopted
        result = yield from self._publish(make, interpret, seconds, size=total,
                                          request=request)
        self.remember(result.quilt_id)
        self._note_epoch(result.blob)
        report(cost_of(result.blob, kind="quilt", files=len(parts), sent_bytes=total),
               self.cost_sink)
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
        *,
        size: int = 0,
        request: StoreRequest | None = None,
    ) -> Op[T]:
        """Send to the publishers (healthy first) until success, a final error, or the deadline.

        A 413 for a body of ``size`` bytes teaches that publisher's request cap
        (:meth:`learn_cap`).

        A failure after which the store may have landed (``request`` given: a lost
        answer, adopt.py) is checked through the aggregators before anything is sent
        again, and adopted if it landed.

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
                if request is not None and self.in_doubt:  # never pay twice
                    found = yield from check_stored(self, request, deadline.remaining())
                    if found is not None:
                        return cast(T, found)
                with call_deadline(deadline.remaining()):  # bounds a token command too
                    send = make(base, self._timeout(deadline), deadline.remaining())
                outcome = yield send
                result = self._interpret(outcome, send, interpret)
                if not isinstance(result, Failure):
                    self.publisher_health.succeeded(base)
                    return result
                self.stats._fault(result.kind)
                if request is not None and in_doubt(result):
                    note_in_doubt(self, request)
                if _unhealthy(result):
                    self.publisher_health.failed(base)
                last = result
                if size and result.kind == "http_413":
                    self.learn_cap(base, size)
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

    def _note_epoch(self, result: StoreResult) -> None:
        if result.registered_epoch is not None:
            self.epoch_hint = result.registered_epoch

    def learn_cap(self, base: str, refused: int) -> None:
        """A request of ``refused`` bytes got a 413: that publisher's cap is below it;
        take half (a batch halves; repeated 413s converge in a few steps)."""
        cap = max(refused // 2, 1)
        self.request_caps[base] = min(cap, self.request_caps.get(base, cap))

    @property
    def request_cap(self) -> int | None:
        """The smallest learned request cap of the publishers (any may get a request)."""
        known = [self.request_caps[u] for u in self.publisher_urls if u in self.request_caps]
        return min(known) if known else None

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
