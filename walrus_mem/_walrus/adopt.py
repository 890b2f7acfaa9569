"""Never pay twice: a store whose answer was lost is checked before it is sent again.

A store can reach the publisher and be paid for while its answer never arrives: the
client's deadline passes during a slow store, the connection resets, a gateway answers
504, the body is cut. Sent again, identical bytes register (and pay for) a new
deletable blob: only a covering *permanent* blob answers ``alreadyCertified``.

So after such a failure ("in doubt") the client computes the blob id of what it sent,
with the ``blob_id`` hook (:data:`BlobIdOracle`: ``walrus blob-id`` for real Walrus,
``blob_id_command``; ``relayer_mock.mock_blob_id`` in tests; a blob id needs the RS2
encoding, which has no pure-Python implementation), and before sending again, in the
same call or a later one, asks the aggregators:

* the blob reads back byte for byte (a quilt: its patch list names every identifier
  sent, and one patch reads back): **adopted**, no second PUT. The result says
  ``resource_operation = "adopted"``; its ``end_epoch`` is the epoch of the client's
  last store answer plus the epochs asked (a lower bound when none was seen: renewal
  comes early, nothing expires unnoticed); its cost goes to the ledger as paid;
* 404 from every aggregator (after the window in which a fresh blob may still answer
  404 through a cache): the store did not land; it is sent;
* anything else (503 while the blob is still being stored, aggregators down): cannot
  tell yet; :class:`~walrus_mem.errors.PublisherUnavailable` with reason
  ``STORE_IN_DOUBT``, and the caller keeps the facts queued. After
  :data:`DOUBT_TTL` seconds without an answer the store is sent again.

Without a ``blob_id`` hook, or for quilts when the hook cannot compute a quilt id,
nothing can be checked and a lost answer is re-sent as before. In-doubt stores are
remembered by this client (process), not on disk.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..errors import BlobNotFound, InvalidInput, PublisherUnavailable, StorageError
from .actions import Op
from .cost import StoreCost, encoded_length, report, units_of
from .quilt_size import encoded_quilt_size
from .responses import Failure, QuiltStoreResult, StoreResult, is_blob_id

Core = Any  # walrus_mem/_walrus/core.py's Core (imported there: no import cycle)
__all__ = ["ADOPT_WAIT", "DOUBT_TTL", "BlobIdOracle", "StoreRequest", "check_stored",
           "command_oracle", "dump_doubts", "in_doubt", "load_doubts", "note_in_doubt"]

log = logging.getLogger("walrus_mem.walrus")

ADOPT_WAIT: Final = 10.0
"""Seconds a check may take (longer than a CDN's cached-404 window after a store)."""
DOUBT_TTL: Final = 600.0
"""Seconds an unanswerable check keeps a store from being sent again."""


@dataclass(frozen=True)
class StoreRequest:
    """What a store sends: a blob's bytes, or a quilt's files and tags."""

    route: Literal["blobs", "quilts"]
    body: bytes | None = None
    files: Mapping[str, bytes] | None = None
    metadata: Mapping[str, Mapping[str, str]] | None = None
    epochs: int = 1
    permanent: bool = False

    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.route}:{self.epochs}:{self.permanent}".encode())
        if self.body is not None:
            h.update(hashlib.sha256(self.body).digest())
        files = self.files or {}
        for name in sorted(files):
            h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
            h.update(repr(sorted((self.metadata or {}).get(name, {}).items())).encode())
        return h.hexdigest()


BlobIdOracle = Callable[[StoreRequest], "str | None"]
"""Computes the blob id the network gives a request (None: cannot)."""


@dataclass(frozen=True)
class _Doubt:
    blob_id: str
    since: float


def dump_doubts(doubts: Mapping[str, Any]) -> dict[str, str]:
    """The stores in doubt as JSON-able data (fingerprint -> blob id), to keep on disk:
    a later process (``walrus-mem sync`` after a ``remember`` that timed out) checks
    them too instead of paying again."""
    return {key: d.blob_id for key, d in doubts.items() if isinstance(d, _Doubt)}


def load_doubts(doubts: dict[str, Any], data: Mapping[str, str], since: float) -> None:
    """Add kept stores in doubt (``since``: now, on the client's clock)."""
    for key, blob_id in data.items():
        if isinstance(key, str) and isinstance(blob_id, str) and is_blob_id(blob_id):
            doubts.setdefault(key, _Doubt(blob_id, since))


def in_doubt(failure: Failure) -> bool:
    """A failure after which the store may have landed (and been paid for)."""
    kind = failure.kind
    if failure.connect:  # never reached the publisher
        return False
    return kind.startswith("transport_") or kind in ("deadline", "http_504", "truncated")


def note_in_doubt(core: Core, request: StoreRequest) -> None:
    """Remember ``request`` as in doubt, with its computed blob id when the hook has one."""
    key = request.fingerprint()
    if key in core.in_doubt:
        return
    blob_id = None
    if core.blob_id is not None:
        try:
            blob_id = core.blob_id(request)
        except Exception as exc:  # a hook's failure must not hide the store's
            log.warning("blob_id hook failed: %s", type(exc).__name__)
    if blob_id is None or not is_blob_id(blob_id):
        log.debug("a store lost its answer and its blob id is unknown: it may be re-sent")
        return
    core.in_doubt[key] = _Doubt(blob_id, core.clock())
    core.remember(blob_id)  # a 404 now is a cache's lag, not the truth (reads retry it)


def _adopted(core: Core, blob_id: str, request: StoreRequest) -> StoreResult:
    start = core.epoch_hint or 0
    return StoreResult(blob_id=blob_id, end_epoch=start + request.epochs,
                       newly_created=False, deletable=not request.permanent,
                       resource_operation="adopted")


def check_stored(core: Core, request: StoreRequest,
                 seconds: float) -> Op[StoreResult | QuiltStoreResult | None]:
    """For a request in doubt: the adopted result if it landed, None if it did not (or
    was never in doubt); raises PublisherUnavailable (STORE_IN_DOUBT) if no one can tell."""
    key = request.fingerprint()
    doubt = core.in_doubt.get(key)
    if doubt is None:
        return None
    seconds = max(0.05, min(seconds, ADOPT_WAIT))
    try:
        if request.route == "blobs":
            assert request.body is not None
            yield from core.read_back_op(request.body, doubt.blob_id, None, seconds)
            result: StoreResult | QuiltStoreResult = _adopted(core, doubt.blob_id, request)
            size = len(request.body)
        else:
            files = request.files or {}
            listed = yield from core.list_patches_op(doubt.blob_id, seconds)
            patches = {p.identifier: p.patch_id for p in listed}
            if set(patches) != set(files):  # not the quilt we sent: send it
                core.in_doubt.pop(key, None)
                return None
            name = min(files)
            yield from core.read_back_op(files[name], None, patches[name], seconds)
            result = QuiltStoreResult(blob=_adopted(core, doubt.blob_id, request),
                                      patches=patches)
            size = encoded_quilt_size([(n, len(b)) for n, b in files.items()],
                                      request.metadata)
    except BlobNotFound:  # every aggregator, past the cache window: it did not land
        core.in_doubt.pop(key, None)
        core.forget_stored(doubt.blob_id)
        log.info("store in doubt did not land (%s): sending it", doubt.blob_id)
        return None
    except StorageError as exc:
        if core.clock() - doubt.since < DOUBT_TTL:
            raise PublisherUnavailable(
                f"a store of blob {doubt.blob_id} lost its answer and the aggregators "
                f"cannot tell yet whether it landed ({type(exc).__name__}); not sent again, "
                "to pay once: a later attempt checks again", reason="STORE_IN_DOUBT") from exc
        core.in_doubt.pop(key, None)
        return None
    core.in_doubt.pop(key, None)
    core.stats.add("adopted")
    log.info("store in doubt had landed: adopted blob %s (not sent again)", doubt.blob_id)
    encoded = encoded_length(size)
    report(StoreCost(blob_id=doubt.blob_id, kind=request.route.rstrip("s"),
                     files=len(request.files or {}) or 1,
                     sent_bytes=len(request.body) if request.body is not None
                     else sum(len(b) for b in (request.files or {}).values()),
                     encoded_length=encoded, epochs=request.epochs,
                     units=units_of(encoded) * request.epochs, frost=None,
                     newly_created=True), core.cost_sink)
    return result


_ID_RE: Final = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])")


def command_oracle(command: str | Sequence[str], timeout: float = 60.0) -> BlobIdOracle:
    """A :data:`BlobIdOracle` running ``command FILE`` (no shell) for blobs, e.g.
    ``walrus blob-id --n-shards 1000``: the blob is written to a private temporary file,
    the last 43-character base64url word of the output is the id. Quilts: None (the
    QuiltV1 bytes are built by the publisher)."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise InvalidInput("blob_id_command is empty")

    def oracle(request: StoreRequest) -> str | None:
        if request.route != "blobs" or request.body is None:
            return None
        with tempfile.TemporaryDirectory(prefix="walrus-mem-id-") as tmp:
            path = os.path.join(tmp, "blob")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(request.body)
            try:
                done = subprocess.run([*argv, path], capture_output=True, timeout=timeout,
                                      check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("blob_id_command failed: %s", type(exc).__name__)
                return None
        if done.returncode != 0:
            log.warning("blob_id_command exited %d", done.returncode)
            return None
        found = _ID_RE.findall(done.stdout.decode("utf-8", "replace"))
        return found[-1] if found else None

    return oracle
