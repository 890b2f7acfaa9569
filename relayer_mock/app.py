"""The ASGI app: Walrus publisher + aggregator routes, fault injection, admin routes.

``create_app(data_dir, ...)`` returns a Starlette app; serve it with uvicorn
(``python -m relayer_mock``, :class:`relayer_mock.server.RelayerServer`) or mount it in-process
(``httpx.ASGITransport``, :class:`relayer_mock.embedded.EmbeddedRelayer`). All durable state is
in ``data_dir`` (see :mod:`relayer_mock.store`); fault settings belong to the app instance.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import os
import random
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from . import cost
from .auth import Claims, PublisherAuth
from .faults import FaultConfig, FaultDecision, FaultInjector, FaultKind, RouteClass
from .ids import base58_encode, blob_id_for, parse_quilt_patch_id
from .params import (
    PathError,
    PublisherQuery,
    QueryError,
    RangeHeaderError,
    parse_byte_range_query,
    parse_concat_query,
    parse_publisher_query,
    parse_range_header,
    parse_read_options,
    path_blob_id,
    path_object_id,
    path_patch_id,
)
from .quilt import (
    MAX_PATCHES,
    METADATA_FIELD,
    PatchInput,
    PatchLayout,
    QuiltError,
    write_quilt,
)
from .responses import (
    MSG_AGGREGATOR_OVERLOADED,
    MSG_INSUFFICIENT_CONFIRMATIONS,
    MSG_MARKED_INVALID,
    MSG_PUBLISHER_OVERLOADED,
    api_error,
    bad_path,
    bad_query,
    blob_not_found,
    body_too_large,
    forbidden_blob,
    internal_error,
    json_response,
    malformed,
    plain,
    quilt_patch_not_found,
    read_headers,
)
from .store import (
    BlobBlocked,
    BlobInfo,
    BlobUnavailable,
    PatchRecord,
    StagedBlob,
    Store,
    StoreOutcome,
)

MiB = 1024 * 1024
DEFAULT_MAX_BLOB_SIZE = 10 * MiB  # publisher --max-body-size default, 10,240 KiB
DEFAULT_MAX_QUILT_SIZE = 100 * MiB  # publisher --max-quilt-body-size default, 102,400 KiB
MAX_EPOCHS_AHEAD = 53
# Attribute / tag names an aggregator copies into response headers by default.
ALLOWED_HEADERS = frozenset({
    "content-type", "authorization", "content-disposition", "content-encoding",
    "content-language", "content-location", "link",
})
FAILURE_PHASES = ("register", "store", "certify")


class SimulatedDisconnect(httpx.RemoteProtocolError):
    """Raised by the app to drop a connection mid-response.

    Under uvicorn the socket is closed after part of the body (the client sees
    ``httpx.RemoteProtocolError``); through ``httpx.ASGITransport`` the exception itself reaches
    the client, and it is an ``httpx.RemoteProtocolError`` too.
    """


class BodyTooLarge(Exception):
    pass


@dataclass(frozen=True)
class RelayerSettings:
    """Static settings of one app instance."""

    max_blob_size: int = DEFAULT_MAX_BLOB_SIZE
    max_quilt_size: int = DEFAULT_MAX_QUILT_SIZE
    storage_price: int = cost.DEFAULT_STORAGE_PRICE
    write_price: int = cost.DEFAULT_WRITE_PRICE
    max_epochs_ahead: int = MAX_EPOCHS_AHEAD
    aggregator_max_blob_size: int | None = None
    publisher_max_concurrent: int | None = None
    aggregator_max_concurrent: int | None = None
    allow_quilt_patch_tags_in_response: bool = False

    def public_dict(self) -> dict[str, Any]:
        return {
            "maxBlobSize": self.max_blob_size,
            "maxQuiltSize": self.max_quilt_size,
            "storagePrice": self.storage_price,
            "writePrice": self.write_price,
            "maxEpochsAhead": self.max_epochs_ahead,
            "aggregatorMaxBlobSize": self.aggregator_max_blob_size,
            "publisherMaxConcurrent": self.publisher_max_concurrent,
            "aggregatorMaxConcurrent": self.aggregator_max_concurrent,
            "maxQuiltPatches": MAX_PATCHES,
        }


@dataclass
class Ctx:
    """Per-request bookkeeping: the fault decision and counters flushed at the end."""

    name: str
    decision: FaultDecision
    counters: Counter[str] = field(default_factory=Counter)

    def fault(self, kind: FaultKind) -> None:
        self.counters[f"faults.{kind.value}"] += 1
        self.counters[f"faults_by_route.{self.name}.{kind.value}"] += 1


_NO_FAULT = FaultDecision(None, random.Random(0), 0.0)
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


def _limited_receive(receive: Receive, limit: int, seen: list[int]) -> Receive:
    async def wrapped() -> Message:
        message = await receive()
        if message["type"] == "http.request":
            seen[0] += len(message.get("body", b""))
            if seen[0] > limit:
                raise BodyTooLarge
        return message

    return wrapped


async def _drain(receive: Receive, already: int, cap: int) -> None:
    """Read and discard the rest of an oversized body (up to ``cap`` bytes), so the client
    gets to read our 413 instead of failing on a reset while still sending."""
    total = already
    while total <= cap:
        message = await receive()
        if message["type"] != "http.request":
            return
        total += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _latin1_form_scope(scope: Scope) -> Scope:
    """A scope whose multipart charset is Latin-1, so that Starlette's decoding of field names
    and non-file values is lossless (``str.encode("latin-1")`` gives the raw bytes back)."""
    headers = [
        (key, value + b"; charset=latin-1") if key.lower() == b"content-type" else (key, value)
        for key, value in scope["headers"]
    ]
    return {**scope, "headers": headers}


def _field_name(raw_name: str) -> str:
    try:
        return raw_name.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError) as exc:
        raise ValueError("a form field name is not valid UTF-8") from exc


class Relayer:
    """Route handlers around one :class:`Store` and one :class:`FaultInjector`."""

    def __init__(self, store: Store, injector: FaultInjector, settings: RelayerSettings,
                 auth: PublisherAuth | None = None) -> None:
        self.store = store
        self.injector = injector
        self.settings = settings
        self.auth = auth
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

    async def _pre_fault(self, ctx: Ctx, *, quilt: bool = False,
                         blob_id: str | None = None) -> Response | None:
        """Faults that replace the whole response (or just delay it)."""
        kind = ctx.decision.kind
        if kind is None or kind not in _PRE_KINDS:
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

    # -- publisher --------------------------------------------------------------------------

    async def _read_body(self, request: Request, limit: int) -> bytes:
        declared = request.headers.get("content-length")
        receive = request.receive
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _drain(receive, 0, 2 * limit + MiB)
            raise BodyTooLarge
        seen = [0]
        limited = Request(request.scope, _limited_receive(receive, limit, seen))
        chunks = []
        try:
            async for chunk in limited.stream():
                chunks.append(chunk)
        except BodyTooLarge:
            await _drain(receive, seen[0], 2 * limit + MiB)
            raise
        return b"".join(chunks)

    async def _authorize(self, request: Request, query: PublisherQuery) -> Claims | Response | None:
        if self.auth is None:
            return None
        auth = self.auth
        return await run_in_threadpool(
            auth.verify, request.headers.get("authorization"), query.epochs, query.send_object_to
        )

    def _check_store_query(self, query: PublisherQuery) -> Response | None:
        if query.deletable and query.permanent:
            return api_error(
                "INVALID_ARGUMENT", "INVALID_BLOB_PERSISTENCE",
                "the blob cannot be defined as both deletable and permanent",
            )
        if query.epochs == 0 or query.epochs > self.settings.max_epochs_ahead:
            # The chain rejects these; the daemon reports wallet/chain errors as 500.
            return internal_error(
                f"invalid number of epochs ahead: {query.epochs} (must be between 1 and "
                f"{self.settings.max_epochs_ahead})"
            )
        return None

    def _blob_store_result(self, outcome: StoreOutcome, query: PublisherQuery) -> dict[str, Any]:
        obj = outcome.obj
        if outcome.kind == "alreadyCertified":
            return {
                "alreadyCertified": {
                    "blobId": outcome.blob_id,
                    "event": {"txDigest": obj.tx_digest, "eventSeq": obj.event_seq},
                    "endEpoch": obj.end_epoch,
                }
            }
        created: dict[str, Any] = {
            "blobObject": {
                "id": obj.object_id,
                "registeredEpoch": obj.registered_epoch,
                "blobId": obj.blob_id,
                "size": outcome.size,
                "encodingType": "RS2",
                "certifiedEpoch": obj.certified_epoch,
                "storage": {
                    "id": obj.storage_id,
                    "startEpoch": obj.start_epoch,
                    "endEpoch": obj.end_epoch,
                    "storageSize": obj.storage_size,
                },
                "deletable": obj.deletable,
            },
            "resourceOperation": {
                "registerFromScratch": {
                    "encodedLength": outcome.encoded_length,
                    "epochsAhead": outcome.epochs_ahead,
                }
            },
            "cost": cost.store_cost(
                outcome.size, outcome.epochs_ahead,
                storage_price=self.settings.storage_price, write_price=self.settings.write_price,
            ),
        }
        if obj.shared_object_id is not None:
            created["sharedBlobObject"] = obj.shared_object_id
        return {"newlyCreated": created}

    def _store(self, staged: StagedBlob, query: PublisherQuery,
               quilt: list[PatchLayout] | None = None) -> StoreOutcome:
        return self.store.store(
            staged,
            encoded_length=cost.encoded_length(staged.size),
            epochs=query.epochs,
            permanent=query.permanent,
            force=query.force,
            send_object_to=query.send_object_to,
            share=query.share,
            quilt=quilt,
        )

    async def put_blob(self, request: Request, ctx: Ctx) -> Response:
        try:
            query = parse_publisher_query(request.query_params.multi_items())
        except QueryError as exc:
            return bad_query(str(exc))
        claims = await self._authorize(request, query)
        if isinstance(claims, Response):
            return claims
        try:
            body = await self._read_body(request, self.settings.max_blob_size)
        except BodyTooLarge:
            return body_too_large()
        if claims is not None and (too_big := claims.check_size(len(body))) is not None:
            return too_big
        rejected = self._check_store_query(query)
        if rejected is not None:
            return rejected
        hint = blob_id_for(body) if ctx.decision.kind is FaultKind.STORE_ERROR else None
        fault = await self._pre_fault(ctx, blob_id=hint)
        if fault is not None:
            return fault
        staged = await run_in_threadpool(self.store.stage_bytes, body)
        try:
            outcome = await run_in_threadpool(self._store, staged, query)
        except BlobBlocked:
            return forbidden_blob()
        ctx.counters[f"stores.blob.{outcome.kind}"] += 1
        return self._finish(ctx, json_response(self._blob_store_result(outcome, query)))

    async def _parse_quilt_form(self, request: Request) -> tuple[FormData, list[PatchInput]]:
        limit = self.settings.max_quilt_size
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _drain(request.receive, 0, 2 * limit + MiB)
            raise BodyTooLarge
        seen = [0]
        limited = Request(
            _latin1_form_scope(request.scope), _limited_receive(request.receive, limit, seen)
        )
        try:
            form = await limited.form(
                max_files=math.inf, max_fields=math.inf, max_part_size=limit
            )
        except BodyTooLarge:
            await _drain(request.receive, seen[0], 2 * limit + MiB)
            raise
        try:
            metadata: dict[str, dict[str, str]] = {}
            patches: list[PatchInput] = []
            for raw_name, value in form.multi_items():
                name = _field_name(raw_name)
                if name == METADATA_FIELD:
                    raw = (
                        await value.read() if isinstance(value, UploadFile)
                        else value.encode("latin-1")
                    )
                    metadata.update(_parse_metadata(raw, metadata))
                elif isinstance(value, UploadFile):
                    await value.seek(0)
                    patches.append(PatchInput(name, value.file, value.size or 0))
                else:
                    data = value.encode("latin-1")
                    patches.append(PatchInput(name, data, len(data)))
            for patch in patches:
                patch.tags = dict(metadata.get(patch.identifier, {}))
        except BaseException:
            await form.close()
            raise
        return form, patches

    def _build_quilt(self, patches: list[PatchInput]) -> tuple[StagedBlob, list[PatchLayout]]:
        tmp = self.store.new_tmp_path()
        try:
            with open(tmp, "wb") as handle:
                quilt_id, size, layout = write_quilt(patches, handle)
                self.store.sync_file(handle)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return StagedBlob(blob_id=quilt_id, size=size, tmp_path=Path(tmp)), layout

    async def put_quilt(self, request: Request, ctx: Ctx) -> Response:
        try:
            query = parse_publisher_query(request.query_params.multi_items())
        except QueryError as exc:
            return bad_query(str(exc))
        claims = await self._authorize(request, query)
        if isinstance(claims, Response):
            return claims
        content_type = request.headers.get("content-type", "")
        if not content_type.lower().startswith("multipart/form-data"):
            return malformed(
                "failed to parse multipart form: Invalid `boundary` for "
                "`multipart/form-data` request"
            )
        try:
            form, patches = await self._parse_quilt_form(request)
        except BodyTooLarge:
            return body_too_large()
        except HTTPException as exc:
            return malformed(f"failed to parse multipart form: {exc.detail}")
        except ValueError as exc:
            return malformed(f"failed to parse multipart form: {exc}")
        try:
            if not patches:
                return malformed("no files provided in multipart form")
            rejected = self._check_store_query(query)
            if rejected is not None:
                return rejected
            try:
                staged, layout = await run_in_threadpool(self._build_quilt, patches)
            except QuiltError as exc:
                return malformed(f"failed to construct quilt: {exc}")
        finally:
            await form.close()
        if claims is not None and (too_big := claims.check_size(staged.size)) is not None:
            self.store.discard(staged)
            return too_big
        fault = await self._pre_fault(ctx, quilt=True, blob_id=staged.blob_id)
        if fault is not None:
            self.store.discard(staged)
            return fault
        try:
            outcome = await run_in_threadpool(self._store, staged, query, layout)
        except BlobBlocked:
            return forbidden_blob()
        ctx.counters[f"stores.quilt.{outcome.kind}"] += 1
        body = {
            "blobStoreResult": self._blob_store_result(outcome, query),
            "storedQuiltBlobs": [
                {"identifier": p.identifier, "quiltPatchId": p.patch_id, "range": [p.start, p.end]}
                for p in layout
            ],
        }
        return self._finish(ctx, json_response(body))

    # -- aggregator -------------------------------------------------------------------------

    async def _available(self, blob_id: str) -> BlobInfo | Response:
        try:
            info = await run_in_threadpool(self.store.get_blob, blob_id)
        except BlobBlocked:
            return forbidden_blob()
        except BlobUnavailable:
            return blob_not_found()
        limit = self.settings.aggregator_max_blob_size
        if limit is not None and info.size > limit:
            return api_error(
                "SIZE_EXCEEDED", "BLOB_TOO_LARGE",
                f"the blob size exceeds the maximum allowed size: {limit}",
            )
        return info

    async def _serve_blob(self, request: Request, ctx: Ctx, blob_id: str) -> Response:
        try:
            strict, skip = parse_read_options(request.query_params.multi_items())
        except QueryError as exc:
            return bad_query(str(exc))
        if strict and skip:
            return api_error(
                "INVALID_ARGUMENT", "INVALID_CONSISTENCY_CHECK",
                "the strict and skip consistency check flags are mutually exclusive",
            )
        byte_range = None
        range_header = request.headers.get("range")
        if range_header is not None:
            try:
                byte_range = parse_range_header(range_header)
            except RangeHeaderError as exc:
                return _range_error(f"invalid byte range parameters: {exc}")
        fault = await self._pre_fault(ctx)
        if fault is not None:
            return fault
        info = await self._available(blob_id)
        if isinstance(info, Response):
            return info
        try:
            if byte_range is None:
                data = await run_in_threadpool(self.store.read_range, info)
                return await self._content(ctx, request, data, etag=blob_id, exclude=blob_id)
            start, end = byte_range
            if end + 1 > info.size:
                return _range_error(
                    f"invalid byte range parameters: byte range out of bounds: requested "
                    f"{start}-{end + 1}, blob size is {info.size}"
                )
            length = end - start + 1
            data = await run_in_threadpool(self.store.read_range, info, start, length)
        except BlobUnavailable:
            return blob_not_found()
        return await self._content(
            ctx, request, data, etag=blob_id, status_code=206,
            extra_headers={"content-range": f"bytes {start}-{end}/{info.size}"},
            lie_range=(start, length), exclude=blob_id,
        )

    async def get_blob(self, request: Request, ctx: Ctx) -> Response:
        try:
            blob_id = path_blob_id(request.path_params["blob_id"])
        except PathError as exc:
            return bad_path(str(exc))
        return await self._serve_blob(request, ctx, blob_id)

    async def get_by_object_id(self, request: Request, ctx: Ctx) -> Response:
        try:
            object_id = path_object_id(request.path_params["object_id"])
        except PathError as exc:
            return bad_path(str(exc))
        blob_id = await run_in_threadpool(self.store.resolve_object, object_id)
        if blob_id is None:
            try:  # the daemon validates the query before answering 404
                parse_read_options(request.query_params.multi_items())
            except QueryError as exc:
                return bad_query(str(exc))
            fault = await self._pre_fault(ctx)
            return fault if fault is not None else blob_not_found()
        return await self._serve_blob(request, ctx, blob_id)

    async def get_byte_range(self, request: Request, ctx: Ctx) -> Response:
        try:
            blob_id = path_blob_id(request.path_params["blob_id"])
        except PathError as exc:
            return bad_path(str(exc))
        try:
            start, length = parse_byte_range_query(request.query_params.multi_items())
        except QueryError as exc:
            return bad_query(str(exc))
        if length == 0:
            return _byte_range_error("length must be greater than 0")
        if start + length > 2**64 - 1:
            return _byte_range_error("start + length overflows")
        fault = await self._pre_fault(ctx)
        if fault is not None:
            return fault
        info = await self._available(blob_id)
        if isinstance(info, Response):
            return info
        if start + length > info.size:
            return _byte_range_error(
                f"byte range out of bounds: requested {start}-{start + length}, "
                f"blob size is {info.size}"
            )
        try:
            data = await run_in_threadpool(self.store.read_range, info, start, length)
        except BlobUnavailable:
            return blob_not_found()
        return await self._content(
            ctx, request, data, etag=f"{blob_id}-{start}-{length}",
            lie_range=(start, length), exclude=blob_id,
        )

    async def _serve_patch(self, request: Request, ctx: Ctx, quilt_id: str,
                           lookup: Callable[[], PatchRecord | None]) -> Response:
        fault = await self._pre_fault(ctx)
        if fault is not None:
            return fault
        info = await self._available(quilt_id)
        if isinstance(info, Response):
            return info
        patch = await run_in_threadpool(lookup)
        if patch is None or patch.quilt_id != quilt_id:
            return quilt_patch_not_found()
        try:
            data = await run_in_threadpool(self.store.read_range, info, patch.offset, patch.length)
        except BlobUnavailable:
            return blob_not_found()
        extra = {}
        for key, value in patch.tags.items():
            if self.settings.allow_quilt_patch_tags_in_response or key.lower() in ALLOWED_HEADERS:
                if _header_safe(key) and _header_safe(value):
                    extra[key] = value
        if _header_safe(patch.identifier):
            extra["x-quilt-patch-identifier"] = patch.identifier
        return await self._content(ctx, request, data, etag=quilt_id, extra_headers=extra,
                                   exclude=quilt_id)

    async def get_by_patch_id(self, request: Request, ctx: Ctx) -> Response:
        try:
            patch_id = path_patch_id(request.path_params["patch_id"])
        except PathError as exc:
            return bad_path(str(exc))
        quilt_id = parse_quilt_patch_id(patch_id)[0]
        return await self._serve_patch(
            request, ctx, quilt_id, lambda: self.store.get_patch_by_id(patch_id)
        )

    async def get_by_quilt_id(self, request: Request, ctx: Ctx) -> Response:
        try:
            quilt_id = path_blob_id(request.path_params["quilt_id"], "quilt_id")
        except PathError as exc:
            return bad_path(str(exc))
        identifier = request.path_params["identifier"]
        return await self._serve_patch(
            request, ctx, quilt_id, lambda: self.store.get_patch(quilt_id, identifier)
        )

    async def list_patches(self, request: Request, ctx: Ctx) -> Response:
        try:
            quilt_id = path_blob_id(request.path_params["quilt_id"], "quilt_id")
        except PathError as exc:
            return bad_path(str(exc))
        fault = await self._pre_fault(ctx)
        if fault is not None:
            return fault
        info = await self._available(quilt_id)
        if isinstance(info, Response):
            return info
        patches = await run_in_threadpool(self.store.list_patches, quilt_id)
        if not info.is_quilt or not patches:
            return quilt_patch_not_found()
        body = [{"identifier": p.identifier, "patch_id": p.patch_id, "tags": p.tags}
                for p in patches]
        return self._finish(ctx, json_response(body))

    async def stream_blob(self, request: Request, ctx: Ctx) -> Response:
        try:
            blob_id = path_blob_id(request.path_params["blob_id"])
        except PathError as exc:
            return bad_path(str(exc))
        fault = await self._pre_fault(ctx)
        if fault is not None:
            return fault
        info = await self._available(blob_id)
        if isinstance(info, Response):
            return info
        try:
            data = await run_in_threadpool(self.store.read_range, info)
        except BlobUnavailable:
            return blob_not_found()
        return await self._content(
            ctx, request, data, etag=blob_id, extra_headers={"x-walrus-streaming": "true"},
            exclude=blob_id,
        )

    async def concat(self, request: Request, ctx: Ctx) -> Response:
        if request.method == "POST":
            try:
                payload = await request.json()
                ids = [str(i) for i in payload["ids"]]
                strict = bool(payload.get("strict_consistency_check") or False)
                skip = bool(payload.get("skip_consistency_check") or False)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                return plain(f"Failed to deserialize the JSON body into the target type: {exc}",
                             422)
        else:
            try:
                ids, strict, skip = parse_concat_query(request.query_params.multi_items())
            except QueryError as exc:
                return bad_query(str(exc))
        if not ids:
            return plain("at least one blob ID or object ID must be provided", 400)
        if strict and skip:
            return api_error(
                "INVALID_ARGUMENT", "INVALID_CONSISTENCY_CHECK",
                "the strict and skip consistency check flags are mutually exclusive",
            )
        fault = await self._pre_fault(ctx)
        if fault is not None:
            return fault
        parts = []
        for item in ids:
            blob_id = await self._resolve_any(item)
            if isinstance(blob_id, Response):
                return blob_id
            info = await self._available(blob_id)
            if isinstance(info, Response):
                if info.status_code == 404:
                    return api_error("NOT_FOUND", "BLOB_NOT_FOUND", f"blob not found: {blob_id}")
                return info
            try:
                parts.append(await run_in_threadpool(self.store.read_range, info))
            except BlobUnavailable:
                return api_error("NOT_FOUND", "BLOB_NOT_FOUND", f"blob not found: {blob_id}")
        etag = base64.urlsafe_b64encode(
            hashlib.sha256(",".join(ids).encode()).digest()
        ).rstrip(b"=").decode()
        return await self._content(ctx, request, b"".join(parts), etag=etag)

    async def _resolve_any(self, item: str) -> str | Response:
        try:
            return path_blob_id(item)
        except PathError:
            pass
        try:
            object_id = path_object_id(item)
        except PathError:
            return api_error("INVALID_ARGUMENT", "INVALID_ID_FORMAT", f"invalid ID format: {item}")
        blob_id = await run_in_threadpool(self.store.resolve_object, object_id)
        if blob_id is None:
            return api_error(
                "NOT_FOUND", "OBJECT_ID_RESOLUTION_FAILED",
                f"failed to resolve object ID {object_id}: the object does not exist",
            )
        return blob_id

    # -- fixed routes -----------------------------------------------------------------------

    async def status(self, request: Request) -> Response:
        return plain("OK", 200)

    async def api_docs(self, request: Request) -> Response:
        return HTMLResponse(
            "<!DOCTYPE html><html><head><title>Walrus publisher/aggregator (relayer_mock)"
            "</title></head><body><h1>relayer_mock</h1><p>A local Walrus publisher and "
            "aggregator. See docs/relayer-mock.md.</p></body></html>"
        )


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


def _header_safe(text: str) -> bool:
    return bool(text) and text.isascii() and text.isprintable()


def _range_error(message: str) -> Response:
    return api_error("RANGE_NOT_SATISFIABLE", "INVALID_BYTE_RANGE", message)


def _byte_range_error(message: str) -> Response:
    return api_error("INVALID_ARGUMENT", "INVALID_BYTE_RANGE",
                     f"invalid byte range parameters: {message}")


def _parse_metadata(raw: bytes, existing: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """``_metadata``: ``[{"identifier": ..., "tags": {...}}]``; non-string tags stringified."""
    try:
        entries = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"invalid _metadata JSON: {exc}") from exc
    if not isinstance(entries, list):
        raise ValueError("invalid _metadata: expected a JSON array")
    out: dict[str, dict[str, str]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("identifier"), str):
            raise ValueError("invalid _metadata entry: missing field `identifier`")
        tags = entry.get("tags", {})
        if not isinstance(tags, dict):
            raise ValueError("invalid _metadata entry: `tags` must be an object")
        identifier = entry["identifier"]
        if identifier in out or identifier in existing:
            raise ValueError(f"duplicate identifiers found in _metadata: {identifier!r}")
        out[identifier] = {
            str(k): v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
            for k, v in tags.items()
        }
    return out


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
    admin: bool = True,
    cors: bool = True,
) -> Starlette:
    """Build the relayer_mock ASGI app over ``data_dir`` (created if missing).

    Args:
        data_dir: directory holding all durable state; may be shared by several app instances
            and processes at once.
        faults: fault-injection settings (default: none).
        epoch_duration: seconds per epoch for the automatic clock. ``None`` keeps what the
            data dir already has (manual-only on a fresh dir); a number sets it from now on.
        max_blob_size / max_quilt_size: request body limits (413 above them).
        storage_price / write_price: FROST per MiB storage unit (per epoch / per write).
        initial_epoch: the epoch a fresh data dir starts at.
        aggregator_max_blob_size: reads of larger blobs give 403 BLOB_TOO_LARGE (default off).
        publisher_max_concurrent / aggregator_max_concurrent: optional load shedding (plain
            429 like the daemon); off by default.
        fsync: fsync blob files and their directory (turn off for throwaway test dirs).
        jwt_secret / jwt_algorithm: require ``Authorization: Bearer <JWT>`` on the publisher
            routes, like the daemon's ``--jwt-decode-secret`` (see :mod:`relayer_mock.auth`).
        admin: serve the ``/_mock/...`` routes.

    The :class:`Relayer` (store, fault injector, settings) is ``app.state.relayer``.
    """
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
    )
    store = Store(data_dir, initial_epoch=initial_epoch, fsync=fsync)
    if epoch_duration is not None:
        store.set_epoch_duration(epoch_duration)
    auth = None
    if jwt_secret is not None:
        auth = PublisherAuth(jwt_secret, jwt_algorithm, use_jti=store.use_token)
    relayer = Relayer(store, FaultInjector(faults), settings, auth)
    ep = relayer.endpoint
    write, read, read_json = RouteClass.WRITE, RouteClass.READ, RouteClass.READ_JSON
    routes = [
        Route("/status", relayer.status, methods=["GET"]),
        Route("/v1/api", relayer.api_docs, methods=["GET"]),
        Route("/v1/blobs", ep("put_blob", write, relayer.put_blob), methods=["PUT"]),
        Route("/v1/quilts", ep("put_quilt", write, relayer.put_quilt), methods=["PUT"]),
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
    if admin:
        from .admin import admin_routes

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
