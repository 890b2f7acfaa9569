"""Mock-only admin and metrics routes under ``/_mock/``. Never fault-injected.

Real Walrus has none of these: blobs are deleted on chain by the owner of the ``Blob`` object
(there is no HTTP delete route) and epochs advance on chain. Each route needs the admin token
unless the app was built open (in-process only; see :mod:`relayer_mock._admin_auth`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._params import PathError, QueryError, parse_bool, parse_uint, path_blob_id, path_object_id
from ._responses import api_error, json_response
from ._store_types import BlobUnavailable, NotDeletable
from .faults import FaultConfig

if TYPE_CHECKING:
    from ._admin_auth import AdminAuth
    from ._context import RelayerSettings
    from ._store import Store
    from .auth import PublisherAuth
    from .faults import FaultInjector

ADMIN_DOMAIN = "relayer-mock.admin"


class AdminHost(Protocol):
    """What the admin routes read of the app's Relayer (declared here: app imports this)."""

    store: Store
    injector: FaultInjector
    settings: RelayerSettings
    auth: PublisherAuth | None
    admin_auth: AdminAuth | None


def _bad(message: str) -> Response:
    return api_error("INVALID_ARGUMENT", "INVALID_ADMIN_REQUEST", message, domain=ADMIN_DOMAIN)


async def _json_body(request: Request) -> Any:
    body = await request.body()
    if not body.strip():
        return {}
    return json.loads(body)


def admin_routes(relayer: AdminHost) -> list[Route]:
    store = relayer.store
    injector = relayer.injector

    async def stats(request: Request) -> Response:
        data = await run_in_threadpool(store.stats)
        data["epoch"] = await run_in_threadpool(store.epoch_info)
        data["faultConfig"] = injector.config.public_dict()
        data["settings"] = relayer.settings.public_dict()
        data["settings"]["publisherAuth"] = relayer.auth is not None
        return json_response(data)

    async def list_blobs(request: Request) -> Response:
        try:
            only_available = parse_bool(
                "available", request.query_params.get("available", "false")
            )
        except QueryError as exc:
            return _bad(str(exc))
        blobs = await run_in_threadpool(
            lambda: store.list_blobs(include_unavailable=not only_available)
        )
        return json_response({"count": len(blobs), "blobs": blobs})

    async def get_blob(request: Request) -> Response:
        try:
            blob_id = path_blob_id(request.path_params["blob_id"])
        except PathError as exc:
            return _bad(str(exc))
        described = await run_in_threadpool(store.describe_blob, blob_id)
        if described is None:
            return api_error("NOT_FOUND", "BLOB_NOT_FOUND", "unknown blob id", domain=ADMIN_DOMAIN)
        return json_response(described)

    async def delete_blob(request: Request) -> Response:
        try:
            blob_id = path_blob_id(request.path_params["blob_id"])
            object_id = request.query_params.get("object_id")
            if object_id is not None:
                object_id = path_object_id(object_id)
        except PathError as exc:
            return _bad(str(exc))
        try:
            result = await run_in_threadpool(store.delete, blob_id, object_id)
        except BlobUnavailable:
            return api_error(
                "NOT_FOUND", "BLOB_NOT_FOUND", "no undeleted Blob object holds this blob id",
                domain=ADMIN_DOMAIN,
            )
        except NotDeletable as exc:
            return api_error(
                "FAILED_PRECONDITION", "BLOB_NOT_DELETABLE",
                f"Blob object {exc.args[0]} is permanent and cannot be deleted before it "
                "expires",
                domain=ADMIN_DOMAIN,
            )
        return json_response(result)

    async def get_faults(request: Request) -> Response:
        return json_response(injector.config.public_dict())

    async def put_faults(request: Request) -> Response:
        try:
            payload = await _json_body(request)
            if request.method == "PATCH":
                merged = injector.config.model_dump()
                merged.update(payload)
                payload = merged
            config = FaultConfig.model_validate(payload)
        except (ValueError, ValidationError) as exc:
            return _bad(f"invalid fault configuration: {exc}")
        injector.configure(config)
        return json_response(config.public_dict())

    async def fault_log(request: Request) -> Response:
        return json_response({"faults": injector.log()})

    async def get_epoch(request: Request) -> Response:
        return json_response(await run_in_threadpool(store.epoch_info))

    async def advance_epoch(request: Request) -> Response:
        try:
            by = parse_uint("by", request.query_params.get("by", "1"), 10**6)
        except QueryError as exc:
            return _bad(str(exc))
        await run_in_threadpool(store.advance_epoch, by)
        return json_response(await run_in_threadpool(store.epoch_info))

    async def put_epoch(request: Request) -> Response:
        try:
            payload = await _json_body(request)
            if "epochDuration" in payload:
                duration = payload["epochDuration"]
                if duration is not None:
                    duration = float(duration)
                await run_in_threadpool(store.set_epoch_duration, duration)
        except (ValueError, TypeError) as exc:
            return _bad(f"invalid epoch settings: {exc}")
        return json_response(await run_in_threadpool(store.epoch_info))

    async def get_blocklist(request: Request) -> Response:
        return json_response({"blocked": await run_in_threadpool(store.blocked)})

    async def set_blocked(request: Request) -> Response:
        try:
            blob_id = path_blob_id(request.path_params["blob_id"])
        except PathError as exc:
            return _bad(str(exc))
        blocked = request.method == "PUT"
        await run_in_threadpool(store.set_blocked, blob_id, blocked)
        return json_response({"blobId": blob_id, "blocked": blocked})

    async def reset(request: Request) -> Response:
        await run_in_threadpool(store.reset)
        return json_response({"reset": True})

    async def info(request: Request) -> Response:
        return json_response({
            "dataDir": str(store.data_dir),
            "publisherAddress": await run_in_threadpool(store.publisher_address),
            "settings": relayer.settings.public_dict(),
        })

    auth = relayer.admin_auth

    def guard(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        if auth is None:
            return handler

        async def checked(request: Request) -> Response:
            if not auth.allows(request.headers):
                return auth.refusal()
            return await handler(request)

        return checked

    routes = [
        Route("/_mock/stats", stats, methods=["GET"]),
        Route("/_mock/info", info, methods=["GET"]),
        Route("/_mock/blobs", list_blobs, methods=["GET"]),
        Route("/_mock/blobs/{blob_id}", get_blob, methods=["GET"]),
        Route("/_mock/blobs/{blob_id}", delete_blob, methods=["DELETE"]),
        Route("/_mock/faults", get_faults, methods=["GET"]),
        Route("/_mock/faults", put_faults, methods=["PUT", "PATCH"]),
        Route("/_mock/faults/log", fault_log, methods=["GET"]),
        Route("/_mock/epoch", get_epoch, methods=["GET"]),
        Route("/_mock/epoch", put_epoch, methods=["PUT"]),
        Route("/_mock/epoch/advance", advance_epoch, methods=["POST"]),
        Route("/_mock/blocklist", get_blocklist, methods=["GET"]),
        Route("/_mock/blocklist/{blob_id}", set_blocked, methods=["PUT", "DELETE"]),
        Route("/_mock/reset", reset, methods=["POST"]),
    ]
    return [Route(r.path, guard(r.endpoint), methods=r.methods) for r in routes]
