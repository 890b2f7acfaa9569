"""Aggregator routes: blob, byte-range, object-id, quilt-patch reads and patch listings."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ._context import ALLOWED_HEADERS, Ctx
from ._ids import parse_quilt_patch_id
from ._injection import FaultResponses
from ._params import (
    PathError,
    QueryError,
    RangeHeaderError,
    parse_byte_range_query,
    parse_concat_query,
    parse_range_header,
    parse_read_options,
    path_blob_id,
    path_object_id,
    path_patch_id,
)
from ._realism import being_stored, fresh
from ._responses import (
    api_error,
    bad_path,
    bad_query,
    blob_not_found,
    forbidden_blob,
    internal_error,
    json_response,
    plain,
    quilt_patch_not_found,
)
from ._store_types import BlobBlocked, BlobInfo, BlobUnavailable, PatchRecord


def blob_unavailable() -> Response:
    return api_error(
        "UNAVAILABLE", "BLOB_UNAVAILABLE",
        "the requested blob is currently unavailable (not enough slivers could be "
        "retrieved); retry with backoff",
    )


def not_a_quilt() -> Response:
    """The daemon turns every quilt error but "patch not found" into Internal (500)."""
    return internal_error("failed to read the quilt: the blob is not a valid quilt")


class AggregatorRoutes(FaultResponses):
    """Read handlers."""

    async def _available(self, blob_id: str) -> BlobInfo | Response:
        local = self.settings.operator_blocklist
        if blob_id in local or "*" in local:
            return forbidden_blob()  # this operator's own blocklist (--blocklist-path)
        try:
            info = await run_in_threadpool(self.store.get_blob, blob_id)
        except BlobBlocked:
            return forbidden_blob()
        except BlobUnavailable:
            if being_stored(self.store.data_dir, blob_id):
                return blob_unavailable()  # registered, not yet certified
            if self.settings.unavailable_after_expiry and await run_in_threadpool(
                self.store.just_expired, blob_id
            ):
                return blob_unavailable()  # mid-expiry: slivers being dropped
            return blob_not_found()
        if fresh(info.first_stored_at, self.settings.not_found_after_store):
            return blob_not_found()  # a CDN still serving its cached 404
        limit = self.settings.aggregator_max_blob_size
        if limit is not None and info.size > limit:
            return api_error(
                "SIZE_EXCEEDED", "BLOB_TOO_LARGE",
                f"the blob size exceeds the maximum allowed size: {limit}",
            )
        return info

    async def _open_blob(self, ctx: Ctx, blob_id: str) -> BlobInfo | Response:
        """The prologue of every read once the request parsed: an injected fault (a
        flaky daemon fails before it looks anything up), then the blob's availability."""
        fault = await self._pre_fault(ctx)
        if fault is not None:
            return fault
        return await self._available(blob_id)

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
        info = await self._open_blob(ctx, blob_id)
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
        info = await self._open_blob(ctx, blob_id)
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
        info = await self._open_blob(ctx, quilt_id)
        if isinstance(info, Response):
            return info
        if not info.is_quilt and self.settings.strict:
            return not_a_quilt()
        try:  # the patch is found in the quilt's file: gone meanwhile, the blob is
            patch = await run_in_threadpool(lookup)
            if patch is None or patch.quilt_id != quilt_id:
                return quilt_patch_not_found()
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
        if self.settings.profile is not None and _unescaped_slash(request):
            return Response(b"", status_code=404)  # the daemon's route has one segment
        return await self._serve_patch(
            request, ctx, quilt_id, lambda: self.store.get_patch(quilt_id, identifier)
        )

    async def list_patches(self, request: Request, ctx: Ctx) -> Response:
        try:
            quilt_id = path_blob_id(request.path_params["quilt_id"], "quilt_id")
        except PathError as exc:
            return bad_path(str(exc))
        info = await self._open_blob(ctx, quilt_id)
        if isinstance(info, Response):
            return info
        if not info.is_quilt and self.settings.strict:
            return not_a_quilt()
        try:
            patches = await run_in_threadpool(self.store.list_patches, quilt_id)
        except BlobUnavailable:
            return blob_not_found()
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
        info = await self._open_blob(ctx, blob_id)
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


def _header_safe(text: str) -> bool:
    return bool(text) and text.isascii() and text.isprintable()


def _range_error(message: str) -> Response:
    return api_error("RANGE_NOT_SATISFIABLE", "INVALID_BYTE_RANGE", message)


def _byte_range_error(message: str) -> Response:
    return api_error("INVALID_ARGUMENT", "INVALID_BYTE_RANGE",
                     f"invalid byte range parameters: {message}")


def _unescaped_slash(request: Request) -> bool:
    """Whether the identifier of a by-quilt-id path holds a ``/`` as sent (not ``%2F``):
    the daemon's route ``/v1/blobs/by-quilt-id/{quilt_id}/{identifier}`` takes one path
    segment, so such a request matches no route there (an empty 404); an escaped ``/`` is
    decoded into the identifier."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    rest = raw.split(b"/by-quilt-id/", 1)[-1]
    return rest.count(b"/") > 1
