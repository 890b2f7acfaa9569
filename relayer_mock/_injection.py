"""Fault responses: what an injected fault does to a request or to a successful response."""

from __future__ import annotations

import asyncio
import random

import httpx
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ._context import Ctx, RelayerBase
from ._ids import base58_encode
from ._responses import (
    MSG_AGGREGATOR_OVERLOADED,
    MSG_INSUFFICIENT_CONFIRMATIONS,
    MSG_MARKED_INVALID,
    MSG_PUBLISHER_OVERLOADED,
    api_error,
    internal_error,
    json_response,
    plain,
    read_headers,
)
from ._store_types import BlobBlocked, BlobUnavailable
from .faults import FaultKind

FAILURE_PHASES = ("register", "store", "certify")


class SimulatedDisconnect(httpx.RemoteProtocolError):
    """Raised by the app to drop a connection mid-response.

    Under uvicorn the socket is closed after part of the body (the client sees
    ``httpx.RemoteProtocolError``); through ``httpx.ASGITransport`` the exception itself reaches
    the client, and it is an ``httpx.RemoteProtocolError`` too.
    """


_PRE_KINDS = frozenset({
    FaultKind.HTTP_500, FaultKind.HTTP_503, FaultKind.HTTP_504, FaultKind.HTTP_429,
    FaultKind.LATENCY, FaultKind.STORE_ERROR, FaultKind.MARKED_INVALID,
})


class DroppedResponse(Response):
    """Sends the headers (full Content-Length) and half the body, then kills the connection."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytes(self.body)
        headers = [(k, v) for k, v in self.raw_headers if k.lower() != b"content-length"]
        headers.append((b"content-length", str(max(len(body), 1)).encode()))
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": headers})
        await send({"type": "http.response.body", "body": body[: len(body) // 2],
                    "more_body": True})
        raise SimulatedDisconnect("relayer_mock dropped the connection mid-response")


class FaultResponses(RelayerBase):
    """Turns a request's fault decision into responses."""

    def _held(self, blob_id: str) -> bool:
        try:
            self.store.get_blob(blob_id)
        except (BlobUnavailable, BlobBlocked):
            return False
        return True

    async def _pre_fault(self, ctx: Ctx, *, quilt: bool = False,
                         blob_id: str | None = None) -> Response | None:
        """Faults that replace the whole response (or just delay it)."""
        kind = ctx.decision.kind
        if kind is None or kind not in _PRE_KINDS:
            return None
        if kind is FaultKind.MARKED_INVALID and blob_id is not None and self._held(blob_id):
            # markedInvalid is a property of the blob id on chain: a blob this store already
            # certified is never answered invalid (clients treat that answer as final)
            return None
        ctx.fault(kind)
        rng = ctx.decision.rng
        write = ctx.name in ("put_blob", "put_quilt")
        if kind is FaultKind.LATENCY:
            low, high = self.injector.config.fault_latency_ms
            await asyncio.sleep(rng.uniform(low, high) / 1000.0)
            return None
        if kind is FaultKind.HTTP_500:
            return internal_error("simulated internal error (relayer_mock fault injection)")
        if kind is FaultKind.HTTP_503:
            if write:
                return api_error(
                    "UNAVAILABLE", "PUBLISHER_UNAVAILABLE",
                    "the publisher is temporarily unavailable, please try again later",
                )
            return api_error(
                "UNAVAILABLE", "BLOB_UNAVAILABLE",
                "the requested blob is currently unavailable (not enough slivers could be "
                "retrieved); retry with backoff",
            )
        if kind is FaultKind.HTTP_504:
            return api_error(
                "DEADLINE_EXCEEDED", "INSUFFICIENT_CONFIRMATIONS", MSG_INSUFFICIENT_CONFIRMATIONS
            )
        if kind is FaultKind.HTTP_429:
            headers = {"retry-after": str(self.injector.config.retry_after)}
            variant = self.injector.config.rate_limit_body
            if variant == "mixed":
                variant = rng.choice(("text", "json"))
            if variant == "text":
                return plain(
                    MSG_PUBLISHER_OVERLOADED if write else MSG_AGGREGATOR_OVERLOADED, 429, headers
                )
            return api_error(
                "RESOURCE_EXHAUSTED", "TOO_MANY_REQUESTS",
                "too many requests, please try again later", headers=headers,
            )
        if kind is FaultKind.STORE_ERROR:
            failed = {
                "error": {
                    "blobId": blob_id if rng.random() < 0.5 else None,
                    "failurePhase": rng.choice(FAILURE_PHASES),
                    "errorMsg": "simulated store failure (relayer_mock fault injection)",
                }
            }
            if quilt:
                return json_response({"blobStoreResult": failed, "storedQuiltBlobs": []})
            return json_response(failed)
        if kind is FaultKind.MARKED_INVALID:
            if quilt:  # put_quilt returns any Ok result as 200, markedInvalid included
                event = {"txDigest": _tx_digest(rng), "eventSeq": "0"}
                result = {"markedInvalid": {"blobId": blob_id, "event": event}}
                return json_response({"blobStoreResult": result, "storedQuiltBlobs": []})
            return internal_error(MSG_MARKED_INVALID)
        return None

    def _finish(self, ctx: Ctx, response: Response) -> Response:
        """Apply a ``drop`` fault to a successful response."""
        if ctx.decision.kind is FaultKind.DROP and 200 <= response.status_code < 300:
            ctx.fault(FaultKind.DROP)
            return DroppedResponse(
                bytes(response.body), status_code=response.status_code,
                headers={k.decode("latin-1"): v.decode("latin-1")
                         for k, v in response.raw_headers},
            )
        return response

    async def _content(
        self,
        ctx: Ctx,
        request: Request,
        body: bytes,
        *,
        etag: str,
        status_code: int = 200,
        extra_headers: dict[str, str] | None = None,
        lie_range: tuple[int, int] | None = None,
        exclude: str | None = None,
    ) -> Response:
        """A read success, after the silent read faults (truncate / corrupt / lie)."""
        headers = read_headers(request, etag)
        for key, value in (extra_headers or {}).items():
            headers.setdefault(key.lower(), value)
        kind = ctx.decision.kind
        rng = ctx.decision.rng
        if request.method != "HEAD" and body:
            if kind is FaultKind.TRUNCATE:
                ctx.fault(kind)
                body = body[: rng.randrange(len(body))]
            elif kind is FaultKind.CORRUPT:
                ctx.fault(kind)
                body = _flip(body, rng)
            elif kind is FaultKind.LIE:
                ctx.fault(kind)
                body = await run_in_threadpool(self._lie, body, rng, lie_range, exclude)
        return self._finish(ctx, Response(body, status_code=status_code, headers=headers))

    def _lie(self, body: bytes, rng: random.Random, lie_range: tuple[int, int] | None,
             exclude: str | None) -> bytes:
        other = self.store.random_other_blob(exclude or "", rng)
        fake = b""
        if other is not None:
            try:
                if lie_range is None:
                    fake = self.store.read_range(other)
                else:
                    fake = self.store.read_range(other, lie_range[0], lie_range[1])
            except BlobUnavailable:
                fake = b""
        if not fake or fake == body:
            return _flip(body, rng)
        return fake


def _tx_digest(rng: random.Random) -> str:
    return base58_encode(rng.getrandbits(256).to_bytes(32, "big"))


def _flip(body: bytes, rng: random.Random) -> bytes:
    """Flip 1..8 random bytes (XOR with a non-zero mask): same length, different content."""
    data = bytearray(body)
    for _ in range(min(len(data), rng.randint(1, 8))):
        data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    if bytes(data) == body:  # two flips cancelled out
        data[0] ^= 0xFF
    return bytes(data)

