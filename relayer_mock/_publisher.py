"""Publisher routes: PUT /v1/blobs and PUT /v1/quilts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope

from . import _cost as cost
from ._context import Ctx, MiB
from ._ids import blob_id_for
from ._injection import FaultResponses
from ._params import PublisherQuery, QueryError, parse_publisher_query
from ._quilt import METADATA_FIELD, PatchInput, PatchLayout, QuiltError, write_quilt
from ._quilt_size import encoded_quilt_size
from ._realism import storing
from ._responses import (
    api_error,
    bad_query,
    body_too_large,
    forbidden_blob,
    internal_error,
    json_response,
    malformed,
)
from ._store_types import BlobBlocked, StagedBlob, StoreOutcome
from .auth import Claims
from .faults import FaultKind


class BodyTooLarge(Exception):
    pass


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


class PublisherRoutes(FaultResponses):
    """Store handlers."""

    latency_rng: random.Random

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
        length = request.headers.get("content-length", "")
        return await run_in_threadpool(
            auth.verify, request.headers.get("authorization"), query.epochs,
            query.send_object_to, int(length) if length.isdigit() else None,
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
                "certifiedEpoch": (None if self.settings.nullable_certified_epoch
                                   else obj.certified_epoch),
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
            "cost": cost.storage_units(outcome.encoded_length) * (
                self.settings.storage_price * outcome.epochs_ahead + self.settings.write_price),
        }
        if obj.shared_object_id is not None:
            created["sharedBlobObject"] = obj.shared_object_id
        return {"newlyCreated": created}

    def _store(self, staged: StagedBlob, query: PublisherQuery,
               quilt: list[PatchLayout] | None = None,
               quilt_size: int | None = None) -> StoreOutcome:
        # the quilt the daemon builds is larger than the mock's container (real_quilt_sizes)
        size = quilt_size if quilt_size is not None and self.settings.real_quilt_sizes \
            else staged.size
        return self.store.store(
            staged,
            encoded_length=cost.encoded_length(size),
            epochs=query.epochs,
            permanent=query.permanent,
            force=query.force,
            send_object_to=query.send_object_to,
            share=query.share,
            quilt=quilt,
        )

    async def _store_slowly(self, staged: StagedBlob, query: PublisherQuery,
                            quilt: list[PatchLayout] | None = None,
                            quilt_size: int | None = None) -> StoreOutcome:
        """Store after the configured latency; meanwhile reads of the blob answer 503."""
        delay = self.settings.store_latency.sample(self.latency_rng)
        if delay <= 0:
            return await run_in_threadpool(self._store, staged, query, quilt, quilt_size)
        with storing(self.store.data_dir, staged.blob_id):
            await asyncio.sleep(delay)
            return await run_in_threadpool(self._store, staged, query, quilt, quilt_size)

    async def put_blob(self, request: Request, ctx: Ctx) -> Response:
        try:
            query = parse_publisher_query(request.query_params.multi_items(),
                                          strict=self.settings.strict)
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
        hint = blob_id_for(body) if ctx.decision.kind in (
            FaultKind.STORE_ERROR, FaultKind.MARKED_INVALID) else None
        fault = await self._pre_fault(ctx, blob_id=hint)
        if fault is not None:
            return fault
        staged = await run_in_threadpool(self.store.stage_bytes, body)
        try:
            outcome = await self._store_slowly(staged, query)
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
            query = parse_publisher_query(request.query_params.multi_items(),
                                          strict=self.settings.strict)
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
            # claims are compared with the quilt the daemon would build, not the container
            quilt_size = encoded_quilt_size([(p.identifier, p.length) for p in patches],
                                            {p.identifier: p.tags for p in patches})
        finally:
            await form.close()
        if claims is not None and (too_big := claims.check_size(quilt_size)) is not None:
            self.store.discard(staged)
            return too_big
        fault = await self._pre_fault(ctx, quilt=True, blob_id=staged.blob_id)
        if fault is not None:
            self.store.discard(staged)
            return fault
        try:
            outcome = await self._store_slowly(staged, query, layout, quilt_size)
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
