"""HTTP exchanges with a wall-clock deadline and a response size cap.

httpx's timeouts apply per socket operation: a server that sends one byte every
half second never trips a 10 s read timeout, and a call can hang for minutes.
Here every exchange has a *budget* (seconds for the whole exchange, body
included) and a *cap* (bytes of body read before giving up):

* the body is streamed; past the cap the exchange stops at once (memory stays
  bounded whatever the server sends), and a declared ``Content-Length`` over
  the cap is refused before reading;
* async: the exchange runs under ``anyio.fail_after(budget)``, which cancels a
  drip anywhere, headers included;
* sync: :class:`DeadlineTransport` gives httpcore a network backend whose every
  socket read/write/connect timeout is clipped to the time left in the current
  call's budget (a thread-local set around each exchange), so a drip in the
  headers or the body ends within the budget too.

Either way the outcome is a :class:`Bounded` (``kind`` ``too_large`` or
``deadline``) the client turns into a typed, retryable failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx

__all__ = ["Bounded", "DeadlineTransport", "send_async", "send_sync"]

_local = threading.local()


class Bounded(Exception):
    """A response cut off by the client: over its size cap, or past the call's deadline."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _clip(timeout: float | None, error: type[Exception]) -> float | None:
    end: float | None = getattr(_local, "end", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clip(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clip(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(
            ssl_context, server_hostname, _clip(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(
            host, port, _clip(timeout, httpcore.ConnectTimeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(
            path, _clip(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` whose sockets honour the current call's wall-clock budget.

    httpx has no public hook for httpcore's ``network_backend``; the pool's backend
    is wrapped after construction. Should a future httpx lay its pool out
    differently, the transport still works, with per-chunk deadline checks only.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        pool = getattr(self, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, httpcore.NetworkBackend):
            pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]


def _declared_over(response: httpx.Response, cap: int) -> None:
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > cap:
        raise Bounded("too_large", f"Content-Length {int(declared):,} is over the cap")


def _take(chunks: list[bytes], size: int, chunk: bytes, cap: int) -> int:
    size += len(chunk)
    if size > cap:
        raise Bounded("too_large", f"body passed {cap:,} bytes")
    chunks.append(chunk)
    return size


def _buffered(response: httpx.Response, body: bytes) -> httpx.Response:
    """The streamed response with its (decoded) body in memory."""
    headers = [(k, v) for k, v in response.headers.multi_items()
               if k.lower() != "content-encoding"]
    encoded = response.headers.get("content-encoding", "identity").strip().lower()
    if encoded not in ("", "identity"):  # the declared length was of the encoded bytes
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
    return httpx.Response(response.status_code, headers=headers, content=body,
                          request=response.request)


def _late(started: float, budget: float) -> Bounded:
    return Bounded("deadline", f"no complete answer within the call's deadline "
                               f"({time.monotonic() - started:.2f} s of {budget:.2f} s)")


def send_sync(client: httpx.Client, request: httpx.Request, *, budget: float, max_body: int,
              follow_redirects: bool = False) -> httpx.Response:
    """One exchange, streamed, under ``budget`` seconds and ``max_body`` bytes."""
    started = time.monotonic()
    end = started + budget
    outer = getattr(_local, "end", None)
    _local.end = end if outer is None else min(end, outer)
    try:
        try:
            response = client.send(request, stream=True, follow_redirects=follow_redirects)
        except httpx.TimeoutException:
            if time.monotonic() >= end:
                raise _late(started, budget) from None
            raise
        try:
            _declared_over(response, max_body)
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size = _take(chunks, size, chunk, max_body)
                if time.monotonic() > end:
                    raise _late(started, budget)
            return _buffered(response, b"".join(chunks))
        except httpx.TimeoutException:
            if time.monotonic() >= end:
                raise _late(started, budget) from None
            raise
        finally:
            response.close()
    finally:
        _local.end = outer


async def send_async(client: httpx.AsyncClient, request: httpx.Request, *, budget: float,
                     max_body: int, follow_redirects: bool = False) -> httpx.Response:
    """Async twin of :func:`send_sync`; the deadline cancels a drip anywhere."""
    started = time.monotonic()
    try:
        with anyio.fail_after(max(budget, 0.001)):
            response = await client.send(request, stream=True, follow_redirects=follow_redirects)
            try:
                _declared_over(response, max_body)
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size = _take(chunks, size, chunk, max_body)
                return _buffered(response, b"".join(chunks))
            finally:
                await response.aclose()
    except TimeoutError:
        raise _late(started, budget) from None
