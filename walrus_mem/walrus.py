"""Walrus publisher/aggregator client: sync :class:`WalrusClient` and :class:`AsyncWalrusClient`.

Both clients run the *same* request logic (:mod:`walrus_mem._walrus.core`). Each
operation is a generator (a small sans-I/O state machine) that yields "send this
request" or "sleep this long" and receives the response or transport error; the
sync client drives it with ``httpx.Client`` and ``time.sleep``, the async one with
``httpx.AsyncClient`` and ``anyio.sleep``, both through :mod:`walrus_mem._walrus.bounded_io`
(a wall-clock budget and a size cap per exchange). Retry, failover, verification and
deadline decisions therefore cannot drift apart between the two.

Behaviour in one paragraph: stores go to the publishers, healthy ones first, with a
fresh bearer token per request, and move to the next publisher (then back off with
full jitter, honouring ``Retry-After``) on 408/429/5xx, transport errors, bodies that
do not parse or do not describe what was sent, and the 200-with-``error`` variant
(storing the same bytes again is safe: Walrus answers with the same blob id). Reads
never go to a publisher; they try the aggregators healthy-first and fail over on
transport errors, 429/5xx, oversized or truncated bodies, content rejected by the
caller's ``verify`` callback, 403 ``BLOB_TOO_LARGE``/451 (one operator's decision),
and 404 for a blob this client stored less than a minute ago (caches may lag
certification); after a full round they back off until the deadline. Auth failures
and a 4xx that cannot succeed (400/401/413/416) are never retried. See docs/walrus.md.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import anyio
import httpx
from pydantic import SecretStr

from ._walrus.actions import Op, Outcome, Send, Sleep
from ._walrus.adopt import BlobIdOracle, StoreRequest
from ._walrus.bounded_io import Bounded, DeadlineTransport, send_async, send_sync
from ._walrus.checks import MAX_BLOB_BODY, MAX_EPOCHS, MAX_QUILT_BODY, MAX_QUILT_PATCHES
from ._walrus.core import (
    RECENT_STORE_TTL,
    USER_AGENT,
    Core,
    build,
    log_response,
    quilt_identifier_path,
)
from ._walrus.cost import CostSink
from ._walrus.credentials import TokenRequest
from ._walrus.reads import VerifyCallback, check_range, read_path_blob
from ._walrus.responses import QuiltPatch, QuiltStoreResult, StoreResult, validate_patch_id
from ._walrus.retry import RetryPolicy
from ._walrus.stats import ClientStats

__all__ = [
    "MAX_BLOB_BODY",
    "MAX_EPOCHS",
    "MAX_QUILT_BODY",
    "MAX_QUILT_PATCHES",
    "AsyncWalrusClient",
    "ClientStats",
    "QuiltPatch",
    "QuiltStoreResult",
    "RetryPolicy",
    "StoreRequest",
    "StoreResult",
    "TokenRequest",
    "VerifyCallback",
    "WalrusClient",
]

T = TypeVar("T")


class _CoreView:
    """What both clients show of their shared :class:`Core` (no I/O, so no sync/async twin)."""

    _core: Core

    def __repr__(self) -> str:
        return self._core.describe(type(self).__name__)

    @property
    def stats(self) -> ClientStats:
        """Counters of requests, retries, failovers and faults seen."""
        return self._core.stats

    def forget_stored(self, blob_id: str) -> None:
        """Stop treating a 404 for ``blob_id`` as cache lag (it was deleted, say).

        A blob this client stored in the last ``recent_store_ttl`` seconds is
        retried on 404 until the read deadline; after the caller deleted it,
        a 404 is the truth and reads fail at once with BlobNotFound.
        """
        self._core.forget_stored(blob_id)

    @property
    def publisher_url(self) -> str | None:
        """The first publisher (None for a read-only client)."""
        return self._core.publisher_url

    @property
    def publisher_urls(self) -> tuple[str, ...]:
        """Every publisher, in configured order (failover goes healthy-first)."""
        return self._core.publisher_urls

    @property
    def request_caps(self) -> dict[str, int]:
        """Request caps learned from 413s, per publisher base URL (bytes; may be seeded)."""
        return self._core.request_caps

    @property
    def request_cap(self) -> int | None:
        """The smallest learned cap of the publishers, None while none is known."""
        return self._core.request_cap

    @property
    def in_doubt(self) -> dict[str, Any]:
        """Stores whose answer was lost, by request fingerprint, still to be checked
        before anything is sent again (walrus_mem/_walrus/adopt.py)."""
        return self._core.in_doubt

    @property
    def cost_sink(self) -> CostSink | None:
        """Called with each successful store's cost (storage units, _walrus/cost.py) when
        no cost scope is open; Memory points it at its catalog's ledger."""
        return self._core.cost_sink

    @cost_sink.setter
    def cost_sink(self, sink: CostSink | None) -> None:
        self._core.cost_sink = sink

    @property
    def aggregator_urls(self) -> tuple[str, ...]:
        return self._core.aggregator_urls


class WalrusClient(_CoreView):
    """Synchronous Walrus client: one publisher, aggregators tried in order.

    **Usage**::

        with WalrusClient("https://publisher.walrus-testnet.walrus.space",
                          ["https://aggregator.walrus-testnet.walrus.space"]) as walrus:
            stored = walrus.store_blob(b"sealed bytes", epochs=5)
            data = walrus.read_blob(stored.blob_id, verify=check)

    Args:
        publisher_url: base URL of a publisher, or None for a read-only client.
        aggregator_urls: base URLs of aggregators, tried in this order.
        token: optional bearer token (JWT) for an authenticated publisher; sent to
            the publisher only, never logged or shown in ``repr``. A callable is asked
            per request and given the request (a :class:`TokenRequest`) if it takes an
            argument; ``token_command`` gets it as ``WALRUS_MEM_TOKEN_*`` variables.
        timeout: per-request timeout in seconds (also clipped to the deadline).
        publish_deadline / read_deadline: total seconds a store / read may take,
            retries included; each call can override it with ``deadline=``.
        epochs / permanent / send_object_to: store defaults.
        transport: an httpx transport used for the publisher and all aggregators.
        sleep / rng / clock: injectable for tests (no real sleeping, seeded jitter).
        retry: backoff policy; max_blob_size: local pre-check of the 10 MiB limit.
        blob_id: computes the blob id of a :class:`StoreRequest` (``walrus blob-id``;
            None when it cannot): a store whose answer was lost is then checked through
            the aggregators and adopted instead of sent (and paid) again
            (walrus_mem/_walrus/adopt.py, docs/walrus.md "Never pay twice").
    """

    def __init__(
        self,
        publisher_url: str | Sequence[str] | None,
        aggregator_urls: Sequence[str],
        *,
        token: str | SecretStr | Callable[..., object] | None = None,
        token_command: str | Sequence[str] | None = None,
        timeout: float = 10.0,
        publish_deadline: float = 30.0,
        read_deadline: float = 30.0,
        epochs: int = 1,
        permanent: bool = False,
        send_object_to: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry: RetryPolicy | None = None,
        max_blob_size: int = MAX_BLOB_BODY,
        recent_store_ttl: float = RECENT_STORE_TTL,
        blob_id: BlobIdOracle | None = None,
    ) -> None:
        self._core = Core(
            publisher_url, aggregator_urls, token=token, token_command=token_command,
            timeout=timeout,
            publish_deadline=publish_deadline, read_deadline=read_deadline, epochs=epochs,
            permanent=permanent, send_object_to=send_object_to, rng=rng, clock=clock,
            retry=retry, max_blob_size=max_blob_size, recent_store_ttl=recent_store_ttl,
            blob_id=blob_id,
        )
        self._sleep = sleep
        self._http = httpx.Client(
            transport=transport if transport is not None else DeadlineTransport(),
            timeout=timeout, headers={"User-Agent": USER_AGENT},
        )

    def _drive(self, op: Op[T]) -> T:
        try:
            action = next(op)
            while True:
                outcome: Outcome = None
                if isinstance(action, Sleep):
                    self._sleep(action.seconds)
                else:
                    outcome = self._send(action)
                action = op.send(outcome)
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            op.close()

    def _send(self, send: Send) -> httpx.Response | httpx.RequestError | Bounded:
        self._core.stats.add("requests")
        started = time.perf_counter()
        outcome: httpx.Response | httpx.RequestError | Bounded
        try:
            outcome = send_sync(self._http, build(self._http, send), budget=send.budget,
                                max_body=send.max_body, follow_redirects=send.follow_redirects)
        except (httpx.RequestError, Bounded) as exc:
            outcome = exc
        log_response(send, outcome, started)
        return outcome

    def store_blob(
        self,
        data: bytes,
        *,
        epochs: int | None = None,
        permanent: bool | None = None,
        deadline: float | None = None,
    ) -> StoreResult:
        """Store ``data`` as one blob (``PUT /v1/blobs``); retried until the deadline.

        Storing the same bytes again is safe and returns the same blob id.
        """
        return self._drive(self._core.store_blob_op(data, epochs, permanent, deadline))

    def store_quilt(
        self,
        files: Mapping[str, bytes],
        *,
        metadata: Mapping[str, Mapping[str, str]] | None = None,
        epochs: int | None = None,
        permanent: bool | None = None,
        deadline: float | None = None,
    ) -> QuiltStoreResult:
        """Store up to 666 small files as one quilt (``PUT /v1/quilts``).

        ``files`` maps identifier -> bytes; ``metadata`` maps identifier -> tags.
        """
        return self._drive(
            self._core.store_quilt_op(files, metadata, epochs, permanent, deadline)
        )

    def read_blob(
        self,
        blob_id: str,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
        max_size: int | None = None,
    ) -> bytes:
        """Read a whole blob. ``verify(bytes)`` raising (or returning False) rejects an answer.

        ``max_size``: the size the caller expects; a longer answer (beyond a few
        KiB of slack) is cut off and treated as a lying aggregator. Default: the
        10 MiB blob limit.
        """
        path = read_path_blob(blob_id)
        return self._drive(self._core.read_op(path, key=blob_id, verify=verify,
                                              deadline=deadline, max_size=max_size))

    def read_back(
        self,
        data: bytes,
        *,
        blob_id: str | None = None,
        patch_id: str | None = None,
        deadline: float | None = None,
    ) -> None:
        """Check that an aggregator serves exactly ``data`` for a stored blob or patch.

        The publish-side check: reads ``blob_id`` (or quilt ``patch_id``) back
        and compares SHA-256 digests, failing over across aggregators. Returns
        None when one served the bytes; raises VerificationFailed when only
        other bytes came back, BlobNotFound when no aggregator has it (after
        the usual just-stored lag retries), or another StorageError.
        """
        self._drive(self._core.read_back_op(data, blob_id, patch_id, deadline))

    def read_byte_range(
        self,
        blob_id: str,
        start: int,
        length: int,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
    ) -> bytes:
        """Read ``length`` bytes from ``start`` (``/v1/blobs/{id}/byte-range``)."""
        check_range(start, length)
        path = read_path_blob(blob_id) + "/byte-range"
        return self._drive(self._core.read_op(
            path, key=blob_id, verify=verify, deadline=deadline, expected_length=length,
            params={"start": str(start), "length": str(length)},
        ))

    def read_quilt_patch(
        self,
        patch_id: str,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
        max_size: int | None = None,
    ) -> bytes:
        """Read one quilt patch by its patch id (``max_size`` as in :meth:`read_blob`)."""
        path = f"/v1/blobs/by-quilt-patch-id/{validate_patch_id(patch_id)}"
        return self._drive(self._core.read_op(path, key=patch_id[:43], verify=verify,
                                              deadline=deadline, quilt_route=True,
                                              max_size=max_size))

    def read_quilt_patch_by_identifier(
        self,
        quilt_id: str,
        identifier: str,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
    ) -> bytes:
        """Read one quilt patch by quilt id and identifier (percent-encoded)."""
        path = quilt_identifier_path(quilt_id, identifier)
        return self._drive(self._core.read_op(path, key=quilt_id, verify=verify,
                                              deadline=deadline, quilt_route=True))

    def list_quilt_patches(
        self, quilt_id: str, *, deadline: float | None = None
    ) -> list[QuiltPatch]:
        """List a quilt's patches (identifier, patch id, tags)."""
        return self._drive(self._core.list_patches_op(quilt_id, deadline))

    def status(self) -> dict[str, bool]:
        """``GET /status`` once per endpoint.

        Returns ``{"publisher:<url>": bool, "aggregator:<url>": bool, ...}``.
        """
        return self._drive(self._core.status_op())

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> WalrusClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncWalrusClient(_CoreView):
    """Asynchronous twin of :class:`WalrusClient` (same arguments, awaitable methods).

    ``transport`` is an ``httpx.AsyncBaseTransport``; ``sleep`` an async callable
    (default ``anyio.sleep``, so it runs under asyncio and trio).
    """

    def __init__(
        self,
        publisher_url: str | Sequence[str] | None,
        aggregator_urls: Sequence[str],
        *,
        token: str | SecretStr | Callable[..., object] | None = None,
        token_command: str | Sequence[str] | None = None,
        timeout: float = 10.0,
        publish_deadline: float = 30.0,
        read_deadline: float = 30.0,
        epochs: int = 1,
        permanent: bool = False,
        send_object_to: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        retry: RetryPolicy | None = None,
        max_blob_size: int = MAX_BLOB_BODY,
        recent_store_ttl: float = RECENT_STORE_TTL,
        blob_id: BlobIdOracle | None = None,
    ) -> None:
        self._core = Core(
            publisher_url, aggregator_urls, token=token, token_command=token_command,
            timeout=timeout,
            publish_deadline=publish_deadline, read_deadline=read_deadline, epochs=epochs,
            permanent=permanent, send_object_to=send_object_to, rng=rng, clock=clock,
            retry=retry, max_blob_size=max_blob_size, recent_store_ttl=recent_store_ttl,
            blob_id=blob_id,
        )
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            transport=transport, timeout=timeout, headers={"User-Agent": USER_AGENT}
        )

    async def _drive(self, op: Op[T]) -> T:
        try:
            action = next(op)
            while True:
                outcome: Outcome = None
                if isinstance(action, Sleep):
                    await self._sleep(action.seconds)
                else:
                    outcome = await self._send(action)
                action = op.send(outcome)
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            op.close()

    async def _send(self, send: Send) -> httpx.Response | httpx.RequestError | Bounded:
        self._core.stats.add("requests")
        started = time.perf_counter()
        outcome: httpx.Response | httpx.RequestError | Bounded
        try:
            outcome = await send_async(self._http, build(self._http, send), budget=send.budget,
                                       max_body=send.max_body,
                                       follow_redirects=send.follow_redirects)
        except (httpx.RequestError, Bounded) as exc:
            outcome = exc
        log_response(send, outcome, started)
        return outcome

    async def store_blob(
        self,
        data: bytes,
        *,
        epochs: int | None = None,
        permanent: bool | None = None,
        deadline: float | None = None,
    ) -> StoreResult:
        """See :meth:`WalrusClient.store_blob`."""
        return await self._drive(self._core.store_blob_op(data, epochs, permanent, deadline))

    async def store_quilt(
        self,
        files: Mapping[str, bytes],
        *,
        metadata: Mapping[str, Mapping[str, str]] | None = None,
        epochs: int | None = None,
        permanent: bool | None = None,
        deadline: float | None = None,
    ) -> QuiltStoreResult:
        """See :meth:`WalrusClient.store_quilt`."""
        return await self._drive(
            self._core.store_quilt_op(files, metadata, epochs, permanent, deadline)
        )

    async def read_blob(
        self,
        blob_id: str,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
        max_size: int | None = None,
    ) -> bytes:
        """See :meth:`WalrusClient.read_blob`."""
        path = read_path_blob(blob_id)
        return await self._drive(self._core.read_op(path, key=blob_id, verify=verify,
                                                    deadline=deadline, max_size=max_size))

    async def read_back(
        self,
        data: bytes,
        *,
        blob_id: str | None = None,
        patch_id: str | None = None,
        deadline: float | None = None,
    ) -> None:
        """See :meth:`WalrusClient.read_back`."""
        await self._drive(self._core.read_back_op(data, blob_id, patch_id, deadline))

    async def read_byte_range(
        self,
        blob_id: str,
        start: int,
        length: int,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
    ) -> bytes:
        """See :meth:`WalrusClient.read_byte_range`."""
        check_range(start, length)
        path = read_path_blob(blob_id) + "/byte-range"
        return await self._drive(self._core.read_op(
            path, key=blob_id, verify=verify, deadline=deadline, expected_length=length,
            params={"start": str(start), "length": str(length)},
        ))

    async def read_quilt_patch(
        self,
        patch_id: str,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
        max_size: int | None = None,
    ) -> bytes:
        """See :meth:`WalrusClient.read_quilt_patch`."""
        path = f"/v1/blobs/by-quilt-patch-id/{validate_patch_id(patch_id)}"
        return await self._drive(self._core.read_op(path, key=patch_id[:43], verify=verify,
                                                    deadline=deadline, quilt_route=True,
                                                    max_size=max_size))

    async def read_quilt_patch_by_identifier(
        self,
        quilt_id: str,
        identifier: str,
        *,
        verify: VerifyCallback | None = None,
        deadline: float | None = None,
    ) -> bytes:
        """See :meth:`WalrusClient.read_quilt_patch_by_identifier`."""
        path = quilt_identifier_path(quilt_id, identifier)
        return await self._drive(self._core.read_op(path, key=quilt_id, verify=verify,
                                                    deadline=deadline, quilt_route=True))

    async def list_quilt_patches(
        self, quilt_id: str, *, deadline: float | None = None
    ) -> list[QuiltPatch]:
        """See :meth:`WalrusClient.list_quilt_patches`."""
        return await self._drive(self._core.list_patches_op(quilt_id, deadline))

    async def status(self) -> dict[str, bool]:
        """See :meth:`WalrusClient.status`."""
        return await self._drive(self._core.status_op())

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._http.aclose()

    async def close(self) -> None:
        """Alias of :meth:`aclose` (the sync client's name, awaitable)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncWalrusClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
