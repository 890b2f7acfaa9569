"""In-process relayer: the Walrus API without a socket, for the embedded default mode.

    relayer = EmbeddedRelayer(data_dir)
    with httpx.Client(transport=relayer.transport, base_url=relayer.base_url) as client:
        client.put("/v1/blobs", content=b"hello")

``transport`` is a synchronous ``httpx.BaseTransport``: it runs the ASGI app on a private event
loop in a daemon thread and hands each request over with ``run_coroutine_threadsafe`` (safe for
any number of caller threads). ``async_transport`` is an ``httpx.ASGITransport`` for async
callers, running the app on the caller's own loop. Several embedded relayers (in one or many
processes) may share a data dir.

Its ``/_mock/`` admin routes are open by default: no socket serves the app, so only this
process can call them. Given ``admin_token`` or ``jwt_secret``, they need the token
(``admin_token``; :meth:`EmbeddedRelayer.client` sends it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from pathlib import Path
from typing import Any

import httpx

from ._admin_auth import ADMIN_TOKEN_HEADER
from ._local_copies import local_copies, local_copy
from .app import create_app
from .faults import FaultConfig

EMBEDDED_BASE_URL = "http://relayer.embedded"


class _ASGIAsyncTransport(httpx.ASGITransport):
    """ASGITransport that reports app crashes as transport errors, like a real socket would."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except httpx.TransportError:
            raise
        except Exception as exc:  # the app crashed mid-response: the peer "closed" on us
            raise httpx.RemoteProtocolError(
                f"relayer_mock app failed: {type(exc).__name__}", request=request
            ) from exc


class _LoopThread:
    """A private asyncio loop in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._stopped: asyncio.Event | None = None
        ready = threading.Event()

        async def main() -> None:
            self._stopped = asyncio.Event()
            ready.set()
            await self._stopped.wait()
            # Let in-flight requests finish their cleanup (counters, temp files) before the
            # loop and its worker threads go away.
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(main())
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()

        self.thread = threading.Thread(target=run, name=name, daemon=True)
        self.thread.start()
        ready.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if self.thread.is_alive() and self._stopped is not None:
            self.loop.call_soon_threadsafe(self._stopped.set)
            self.thread.join(timeout)


class SyncASGITransport(httpx.BaseTransport):
    """Synchronous httpx transport that runs an ASGI app on a background event loop."""

    def __init__(self, app: Any, loop_thread: _LoopThread) -> None:
        self._asgi = _ASGIAsyncTransport(app=app)
        self._loop_thread = loop_thread

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        headers = [
            (k, v) for k, v in request.headers.raw
            if k.lower() not in (b"content-length", b"transfer-encoding")
        ]
        if body or request.method in ("POST", "PUT", "PATCH"):
            headers.append((b"content-length", str(len(body)).encode()))
        forwarded = httpx.Request(
            request.method, request.url, headers=headers, content=body,
            extensions=request.extensions,
        )

        async def call() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            response = await self._asgi.handle_async_request(forwarded)
            content = await response.aread()
            return response.status_code, response.headers.raw, content

        coroutine = call()
        try:
            if not self._loop_thread.thread.is_alive():
                raise RuntimeError("loop stopped")
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop_thread.loop)
        except RuntimeError as exc:
            coroutine.close()
            raise httpx.ConnectError("embedded relayer is closed", request=request) from exc
        timeout = (request.extensions.get("timeout") or {}).get("read")
        try:
            status, raw_headers, content = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise httpx.ReadTimeout("embedded relayer timed out", request=request) from exc
        except concurrent.futures.CancelledError as exc:
            raise httpx.ReadError("embedded relayer closed mid-request", request=request) from exc
        except httpx.TransportError as exc:
            exc.request = request
            raise
        return httpx.Response(status, headers=raw_headers, content=content, request=request)


class EmbeddedRelayer:
    """The relayer_mock app in-process, with sync and async httpx transports.

    Args:
        data_dir: durable state (shared safely with other relayers on the same dir).
        faults: fault injection; none by default in embedded mode.
        admin_token: make the admin routes require this token (with ``jwt_secret`` and
            no token, a random one); read it back from :attr:`admin_token`.
        **app_kwargs: passed to :func:`relayer_mock.app.create_app`.
    """

    base_url = EMBEDDED_BASE_URL

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        faults: FaultConfig | None = None,
        admin_token: str | None = None,
        **app_kwargs: Any,
    ) -> None:
        self.data_dir = data_dir
        app_kwargs.setdefault(
            "open_admin", admin_token is None and app_kwargs.get("jwt_secret") is None
        )
        self.app = create_app(data_dir, faults=faults, admin_token=admin_token, **app_kwargs)
        self.admin_token: str | None = self.app.state.relayer.admin_token
        self._loop_thread = _LoopThread("relayer-mock-embedded")
        self.transport: httpx.BaseTransport = SyncASGITransport(self.app, self._loop_thread)
        self.async_transport: httpx.AsyncBaseTransport = _ASGIAsyncTransport(app=self.app)
        self._closed = False

    @property
    def relayer(self) -> Any:
        """The :class:`relayer_mock.app.Relayer` (store, fault injector, settings)."""
        return self.app.state.relayer

    @property
    def admin_headers(self) -> dict[str, str]:
        """The header carrying the admin token (none when the routes are open)."""
        return {ADMIN_TOKEN_HEADER: self.admin_token} if self.admin_token else {}

    def local_copy(self, blob_id: str, patch_id: str | None = None) -> bytes | None:
        """Stored bytes (a blob, or a quilt's patch) read in-process, live or expired; None
        if gone (:func:`relayer_mock._local_copies.local_copy`)."""
        return local_copy(self.relayer.store, blob_id, patch_id)

    def client(self, **kwargs: Any) -> httpx.Client:
        """A sync ``httpx.Client`` bound to this relayer (sending the admin token, if any)."""
        headers = {**self.admin_headers, **kwargs.pop("headers", {})}
        return httpx.Client(transport=self.transport, base_url=self.base_url, headers=headers,
                            **kwargs)

    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        headers = {**self.admin_headers, **kwargs.pop("headers", {})}
        return httpx.AsyncClient(
            transport=self.async_transport, base_url=self.base_url, headers=headers, **kwargs
        )

    def close(self) -> None:
        """Stop the background loop and close the store's connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._loop_thread.stop()
        self.relayer.store.close()

    def __enter__(self) -> EmbeddedRelayer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedRelayer(data_dir={str(self.data_dir)!r})"


class LocalCopies:
    """Reads of what an embedded relayer's folder holds, without the app or its thread.

    ``read(blob_id, patch_id)`` returns the stored bytes of a blob or of one quilt patch
    (live or expired: files stay until deleted), or None when they are gone. Nothing is
    created: a folder without the relayer's index reads as empty. The owner of the folder
    checks the bytes (they are plain files anyone with access to the folder can change).
    """

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self._store: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> Any:
        with self._lock:
            if self._store is None and not self._closed:
                if not (self.data_dir / "index.sqlite3").is_file():
                    return None
                from ._store import Store

                self._store = Store(self.data_dir)
            return self._store

    def read(self, blob_id: str, patch_id: str | None = None) -> bytes | None:
        store = self._open()
        if store is None:
            return None
        try:
            return local_copy(store, blob_id, patch_id)
        except RuntimeError:  # closed meanwhile
            return None

    def read_many(self, blob_id: str, patch_ids: list[str]) -> dict[str, bytes]:
        """Many patches of one quilt, its file read once (patch id -> bytes, those found)."""
        store = self._open()
        if store is None:
            return {}
        try:
            return local_copies(store, blob_id, patch_ids)
        except RuntimeError:
            return {}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._store is not None:
                self._store.close()
                self._store = None

    def __repr__(self) -> str:
        return f"LocalCopies(data_dir={str(self.data_dir)!r})"
