"""The ASGI app: Walrus publisher + aggregator routes, fault injection, admin routes.

``create_app(data_dir, ...)`` returns a Starlette app; serve it with uvicorn
(``python -m relayer_mock``, :class:`relayer_mock.server.RelayerServer`) or mount it in-process
(``httpx.ASGITransport``, :class:`relayer_mock.embedded.EmbeddedRelayer`). All durable state is
in ``data_dir`` (see :mod:`relayer_mock._store`); fault settings belong to the app instance.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from . import _cost as cost
from ._admin_auth import AdminAuth, check_token, new_admin_token
from ._aggregator import AggregatorRoutes
from ._context import (
    DEFAULT_MAX_BLOB_SIZE,
    DEFAULT_MAX_QUILT_SIZE,
    MAX_EPOCHS_AHEAD,
    Ctx,
    RelayerSettings,
)
from ._injection import SimulatedDisconnect
from ._publisher import PublisherRoutes
from ._realism import StoreLatency
from ._responses import MSG_AGGREGATOR_OVERLOADED, MSG_PUBLISHER_OVERLOADED, plain
from ._store import Store
from .auth import PublisherAuth
from .faults import FaultConfig, FaultDecision, FaultInjector, RouteClass

__all__ = [
    "DEFAULT_MAX_BLOB_SIZE",
    "DEFAULT_MAX_QUILT_SIZE",
    "MAX_EPOCHS_AHEAD",
    "Relayer",
    "RelayerSettings",
    "SimulatedDisconnect",
    "create_app",
]

_NO_FAULT = FaultDecision(None, random.Random(0), 0.0)


class Relayer(PublisherRoutes, AggregatorRoutes):
    """Route handlers around one :class:`Store` and one :class:`FaultInjector`."""

    def __init__(self, store: Store, injector: FaultInjector, settings: RelayerSettings,
                 auth: PublisherAuth | None = None, admin_token: str | None = None) -> None:
        self.store = store
        self.injector = injector
        self.settings = settings
        self.auth = auth
        # None: admin routes open (in-process only) or not served
        self.admin_token = admin_token
        self.admin_auth = AdminAuth(admin_token) if admin_token is not None else None
        seed = injector.config.seed
        self.latency_rng = random.Random(None if seed is None else seed + 1)
        self._inflight = {RouteClass.WRITE: 0, RouteClass.READ: 0}
        self._inflight_lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------------------------

    def endpoint(
        self,
        name: str,
        route_class: RouteClass | None,
        handler: Callable[[Request, Ctx], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            decision = self.injector.decide(route_class, name) if route_class else _NO_FAULT
            ctx = Ctx(name, decision)
            ctx.counters[f"requests.{name}"] += 1
            shed = self._enter(route_class)
            try:
                if shed is not None:
                    response = shed
                else:
                    if decision.latency_s > 0:
                        await asyncio.sleep(decision.latency_s)
                    response = await handler(request, ctx)
                ctx.counters[f"responses.{name}.{response.status_code}"] += 1
                return response
            finally:
                if shed is None:
                    self._leave(route_class)
                await run_in_threadpool(self.store.bump, ctx.counters)

        return run

    def _enter(self, route_class: RouteClass | None) -> Response | None:
        """Optional load shedding (off by default), like the daemon's concurrency limits."""
        if route_class is None:
            return None
        key = RouteClass.WRITE if route_class is RouteClass.WRITE else RouteClass.READ
        limit = (
            self.settings.publisher_max_concurrent
            if key is RouteClass.WRITE
            else self.settings.aggregator_max_concurrent
        )
        with self._inflight_lock:
            if limit is not None and self._inflight[key] >= limit:
                message = (
                    MSG_PUBLISHER_OVERLOADED if key is RouteClass.WRITE
                    else MSG_AGGREGATOR_OVERLOADED
                )
                return plain(message, 429)
            self._inflight[key] += 1
        return None

    def _leave(self, route_class: RouteClass | None) -> None:
        if route_class is None:
            return
        key = RouteClass.WRITE if route_class is RouteClass.WRITE else RouteClass.READ
        with self._inflight_lock:
            self._inflight[key] -= 1

    # -- fixed routes -----------------------------------------------------------------------

    async def status(self, request: Request) -> Response:
        return plain("OK", 200)

    async def api_docs(self, request: Request) -> Response:
        return HTMLResponse(
            "<!DOCTYPE html><html><head><title>Walrus publisher/aggregator (relayer_mock)"
            "</title></head><body><h1>relayer_mock</h1><p>A local Walrus publisher and "
            "aggregator. See docs/relayer-mock.md.</p></body></html>"
        )


async def _empty_404(request: Request, exc: Exception) -> Response:
    return Response(b"", status_code=404)


async def _empty_405(request: Request, exc: Exception) -> Response:
    headers = getattr(exc, "headers", None) or {}
    return Response(b"", status_code=405, headers=dict(headers))


def create_app(
    data_dir: str | os.PathLike[str],
    *,
    faults: FaultConfig | None = None,
    epoch_duration: float | None = None,
    max_blob_size: int = DEFAULT_MAX_BLOB_SIZE,
    max_quilt_size: int = DEFAULT_MAX_QUILT_SIZE,
    max_request_bytes: int | None = None,
    storage_price: int = cost.DEFAULT_STORAGE_PRICE,
    write_price: int = cost.DEFAULT_WRITE_PRICE,
    max_epochs_ahead: int = MAX_EPOCHS_AHEAD,
    initial_epoch: int = 1,
    aggregator_max_blob_size: int | None = None,
    publisher_max_concurrent: int | None = None,
    aggregator_max_concurrent: int | None = None,
    allow_quilt_patch_tags_in_response: bool = False,
    fsync: bool = True,
    jwt_secret: str | None = None,
    jwt_algorithm: str = "HS256",
    jwt_verify_upload: bool = False,
    admin: bool = True,
    admin_token: str | None = None,
    open_admin: bool = False,
    cors: bool = True,
    strict: bool = True,
    role: Literal["publisher", "aggregator", "both"] = "both",
    store_latency: str | StoreLatency | None = None,
    not_found_after_store: float = 0.0,
    operator_blocklist: Iterable[str] = (),
    unavailable_after_expiry: bool = False,
    real_quilt_sizes: bool = False,
    nullable_certified_epoch: bool = False,
    profile: str | None = None,
    time_scale: float = 1.0,
) -> Starlette:
    """Build the relayer_mock ASGI app over ``data_dir`` (created if missing).

    Args:
        data_dir: directory holding all durable state; may be shared by several app instances
            and processes at once.
        faults: fault-injection settings (default: none).
        epoch_duration: seconds per epoch for the automatic clock. ``None`` keeps what the
            data dir already has (manual-only on a fresh dir); a number sets it from now on.
        max_blob_size / max_quilt_size: request body limits (413 above them).
        max_request_bytes: one cap on every publisher request, both routes (a plain-text
            413 like the daemon's body limit), as public publishers have (10 MiB); off by
            default.
        storage_price / write_price: FROST per MiB storage unit (per epoch / per write).
        initial_epoch: the epoch a fresh data dir starts at.
        aggregator_max_blob_size: reads of larger blobs give 403 BLOB_TOO_LARGE (default off).
        publisher_max_concurrent / aggregator_max_concurrent: optional load shedding (plain
            429 like the daemon); off by default.
        fsync: fsync blob files and their directory (turn off for throwaway test dirs).
        jwt_secret / jwt_algorithm: require ``Authorization: Bearer <JWT>`` on the publisher
            routes, like the daemon's ``--jwt-decode-secret`` (see :mod:`relayer_mock.auth`).
        jwt_verify_upload: also compare the token's ``epochs`` / ``max_epochs``, ``size`` /
            ``max_size`` (on quilts: the encoded QuiltV1 size) and ``send_object_to`` with
            the request, like the daemon's ``--jwt-verify-upload`` (off by default).
        admin: serve the ``/_mock/...`` routes.
        admin_token: the token those routes require (``Authorization: Bearer`` or the
            ``Relayer-Mock-Admin-Token`` header; at least 16 characters). ``None``: a random
            one, read it from ``app.state.relayer.admin_token``.
        open_admin: serve them without a token. Only for an app no socket serves (the
            in-process :class:`~relayer_mock.embedded.EmbeddedRelayer`); refused with
            ``jwt_secret`` or ``admin_token``.
        strict: behave like the daemon (default): unknown publisher query parameters and
            short ``send_object_to`` addresses are a 400, quilt routes on a plain blob a 500.
            ``strict=False`` keeps the old lenient behaviour for old callers.
        role: ``publisher`` serves only the store routes (like ``walrus publisher``: reads
            are an empty 404), ``aggregator`` only the read routes, ``both`` (``walrus
            daemon``) all. Several apps over one data dir on separate ports make the
            split deployment.
        store_latency: how long a store takes (:class:`relayer_mock._realism.StoreLatency`:
            ``"200"``, ``"50-400"``, ``"lognormal:300:0.6"``, ``"exp:250"`` ms); reads of a
            blob being stored answer 503 BLOB_UNAVAILABLE meanwhile.
        not_found_after_store: seconds a freshly stored blob still answers 404 (CDN lag).
        operator_blocklist: blob ids this app's reads answer 451 for (``"*"``: all), like
            one operator's ``--blocklist-path``; the ``/_mock/blocklist`` one is shared
            through the data dir.
        unavailable_after_expiry: in the first epoch after a blob expired, reads answer 503
            ``BLOB_UNAVAILABLE`` (mid-expiry) instead of 404; off by default.

        real_quilt_sizes: a quilt's storageSize / encodedLength / cost from the QuiltV1
            blob the daemon builds (at least 445,556 bytes), not the mock's container.
        nullable_certified_epoch: ``certifiedEpoch`` is null in store answers.
        profile: ``"testnet"`` or ``"mainnet"`` (relayer_mock/_profiles.py): defaults as
            the public networks answer, for every argument above left at its default;
            ``time_scale`` scales the profile's store latency and 404 window.

    The :class:`Relayer` (store, fault injector, settings) is ``app.state.relayer``.
    """
    if profile is not None:
        from ._profiles import profile_settings

        given = locals()
        for key, value in profile_settings(profile, time_scale).items():
            if given[key] == _DEFAULTS[key]:  # an explicit argument wins
                given[key] = value
        max_request_bytes = given["max_request_bytes"]
        store_latency = given["store_latency"]
        not_found_after_store = given["not_found_after_store"]
        real_quilt_sizes = given["real_quilt_sizes"]
        nullable_certified_epoch = given["nullable_certified_epoch"]
    if max_request_bytes is not None:
        max_blob_size = min(max_blob_size, max_request_bytes)
        max_quilt_size = min(max_quilt_size, max_request_bytes)
    settings = RelayerSettings(
        max_blob_size=max_blob_size,
        max_quilt_size=max_quilt_size,
        storage_price=storage_price,
        write_price=write_price,
        max_epochs_ahead=max_epochs_ahead,
        aggregator_max_blob_size=aggregator_max_blob_size,
        publisher_max_concurrent=publisher_max_concurrent,
        aggregator_max_concurrent=aggregator_max_concurrent,
        allow_quilt_patch_tags_in_response=allow_quilt_patch_tags_in_response,
        strict=strict,
        role=role,
        store_latency=StoreLatency.parse(store_latency),
        not_found_after_store=float(not_found_after_store),
        operator_blocklist=frozenset(operator_blocklist),
        unavailable_after_expiry=unavailable_after_expiry,
        real_quilt_sizes=real_quilt_sizes,
        nullable_certified_epoch=nullable_certified_epoch,
        profile=profile,
    )
    if role not in ("publisher", "aggregator", "both"):
        raise ValueError(f"role must be publisher, aggregator or both, got {role!r}")
    if not_found_after_store < 0:
        raise ValueError("not_found_after_store must be >= 0")
    if open_admin and (jwt_secret is not None or admin_token is not None):
        raise ValueError("open_admin cannot be combined with jwt_secret or admin_token: "
                         "a relayer that checks tokens never leaves its admin routes open")
    token = None
    if admin and not open_admin:
        token = check_token(admin_token if admin_token is not None else new_admin_token())
    store = Store(data_dir, initial_epoch=initial_epoch, fsync=fsync)
    if epoch_duration is not None:
        store.set_epoch_duration(epoch_duration)
    auth = None
    if jwt_secret is not None:
        auth = PublisherAuth(jwt_secret, jwt_algorithm, use_jti=store.use_token,
                             verify_upload=jwt_verify_upload)
    relayer = Relayer(store, FaultInjector(faults), settings, auth, token)
    ep = relayer.endpoint
    write, read, read_json = RouteClass.WRITE, RouteClass.READ, RouteClass.READ_JSON
    routes = [
        Route("/status", relayer.status, methods=["GET"]),
        Route("/v1/api", relayer.api_docs, methods=["GET"]),
    ]
    if role in ("publisher", "both"):
        routes += [
            Route("/v1/blobs", ep("put_blob", write, relayer.put_blob), methods=["PUT"]),
            Route("/v1/quilts", ep("put_quilt", write, relayer.put_quilt), methods=["PUT"]),
        ]
    reads = [
        Route("/v1/blobs/by-object-id/{object_id}",
              ep("get_by_object_id", read, relayer.get_by_object_id), methods=["GET"]),
        Route("/v1/blobs/by-quilt-patch-id/{patch_id}",
              ep("get_by_quilt_patch_id", read, relayer.get_by_patch_id), methods=["GET"]),
        Route("/v1/blobs/by-quilt-id/{quilt_id}/{identifier:path}",
              ep("get_by_quilt_id", read, relayer.get_by_quilt_id), methods=["GET"]),
        Route("/v1/blobs/{blob_id}/byte-range",
              ep("get_byte_range", read, relayer.get_byte_range), methods=["GET"]),
        Route("/v1/blobs/{blob_id}", ep("get_blob", read, relayer.get_blob), methods=["GET"]),
        Route("/v1/quilts/{quilt_id}/patches",
              ep("list_patches", read_json, relayer.list_patches), methods=["GET"]),
        Route("/v1alpha/blobs/concat", ep("concat", read, relayer.concat),
              methods=["GET", "POST"]),
        Route("/v1alpha/blobs/{blob_id}/stream", ep("stream", read, relayer.stream_blob),
              methods=["GET"]),
    ]
    if role in ("aggregator", "both"):
        routes += reads
    if admin:
        from ._admin import admin_routes

        routes.extend(admin_routes(relayer))
    middleware = []
    if cors:
        middleware.append(Middleware(
            CORSMiddleware, allow_origins=["*"], allow_methods=["*"], allow_headers=["*"],
            max_age=86400,
        ))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={404: _empty_404, 405: _empty_405},
    )
    app.state.relayer = relayer
    return app


_DEFAULTS: dict[str, object] = {
    name: p.default for name, p in __import__("inspect").signature(create_app).parameters.items()
}
