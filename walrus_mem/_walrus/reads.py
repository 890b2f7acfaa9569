"""The read path of the Walrus core: GET from the aggregators until bytes arrive that verify.

:class:`Reads` is a mixin of :class:`~walrus_mem._walrus.core.Core`: reads fail over
between aggregators (healthy first), retry in rounds separated by backoff, and say in
the final error what each aggregator answered.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

import httpx

from ..errors import (
    AggregatorUnavailable,
    BlobNotFound,
    BodyTooLarge,
    ForbiddenBlob,
    InvalidInput,
    InvalidResponse,
    StorageError,
    VerificationFailed,
)
from .actions import Op, Outcome, Send, Sleep, _headers, _origin, _unhealthy
from .checks import _as_bytes, _check_deadline, _within_call
from .endpoints import EndpointHealth
from .responses import (
    Failure,
    QuiltPatch,
    parse_patch_list,
    read_outcome,
    validate_blob_id,
    validate_patch_id,
)
from .retry import Deadline, RetryPolicy
from .stats import ClientStats

__all__ = ["Reads", "VerifyCallback", "check_range", "read_path_blob"]

logger = logging.getLogger("walrus_mem.walrus")  # one logger for the client, as documented

READ_SLACK: Final = 4 * 1024  # allowed over an expected read size (padding, framing)
_QUILT_500_LIMIT: Final = 3  # 500s from one aggregator on a quilt route before it is final

T = TypeVar("T")
VerifyCallback = Callable[[bytes], object]


class Reads:
    """The read operations of :class:`~walrus_mem._walrus.core.Core`.

    Declares (for mypy only) the configuration and helpers Core defines and the reads
    use, so this module needs no import of core.py.
    """

    aggregator_urls: tuple[str, ...]
    aggregator_health: EndpointHealth
    read_deadline: float
    max_blob_size: int
    clock: Callable[[], float]
    rng: random.Random
    policy: RetryPolicy
    stats: ClientStats

    if TYPE_CHECKING:
        def recently_stored(self, blob_id: str) -> bool: ...

        def _timeout(self, deadline: Deadline) -> float: ...

        def _auth(
            self, base: str, headers: dict[str, str] | None = None
        ) -> dict[str, str] | None: ...

        def _interpret(
            self,
            outcome: Outcome,
            send: Send,
            interpret: Callable[[httpx.Response], T | Failure],
        ) -> T | Failure: ...

        def _exhausted(self, error: StorageError, attempts: int, deadline: Deadline) -> None: ...

    def read_op(
        self,
        path: str,
        *,
        key: str,
        verify: VerifyCallback | None,
        deadline: float | None,
        expected_length: int | None = None,
        params: dict[str, str] | None = None,
        max_size: int | None = None,
        quilt_route: bool = False,
    ) -> Op[bytes]:
        """GET ``path`` from the aggregators until bytes arrive that verify."""
        cap = _read_cap(max_size if max_size is not None else expected_length,
                        self.max_blob_size)

        def interpret(response: httpx.Response) -> bytes | Failure:
            return read_outcome(response.status_code, _headers(response), response.content,
                                expected_length=expected_length)

        return self._aggregate(path, key, interpret, verify, deadline, params, cap, quilt_route)

    def read_back_op(
        self, data: object, blob_id: str | None, patch_id: str | None, deadline: float | None
    ) -> Op[None]:
        """Read a stored blob/patch back and require byte equality (by SHA-256)."""
        expected = _as_bytes(data, "read-back data")
        if (blob_id is None) == (patch_id is None):
            raise InvalidInput("read_back needs exactly one of blob_id and patch_id")
        digest = hashlib.sha256(expected).digest()

        def same(body: bytes) -> bool:
            return len(body) == len(expected) and hashlib.sha256(body).digest() == digest

        if patch_id is not None:
            path = f"/v1/blobs/by-quilt-patch-id/{validate_patch_id(patch_id)}"
            yield from self.read_op(path, key=patch_id[:43], verify=same, deadline=deadline,
                                    max_size=len(expected), quilt_route=True)
        else:
            assert blob_id is not None
            yield from self.read_op(read_path_blob(blob_id), key=blob_id, verify=same,
                                    deadline=deadline, max_size=len(expected))

    def list_patches_op(self, quilt_id: str, deadline: float | None) -> Op[list[QuiltPatch]]:
        quilt_id = validate_blob_id(quilt_id, "quilt id")

        def interpret(response: httpx.Response) -> list[QuiltPatch] | Failure:
            body = read_outcome(response.status_code, _headers(response), response.content)
            if isinstance(body, Failure):
                return body
            try:
                return parse_patch_list(body)
            except InvalidResponse as exc:
                return Failure("invalid_response", exc, True, cause=exc.__cause__)

        return self._aggregate(f"/v1/quilts/{quilt_id}/patches", quilt_id, interpret, None,
                               deadline, None, self.max_blob_size, True)

    def _aggregate(
        self,
        path: str,
        key: str,
        interpret: Callable[[httpx.Response], T | Failure],
        verify: Callable[[T], object] | None,
        deadline_s: float | None,
        params: dict[str, str] | None,
        cap: int,
        quilt_route: bool = False,
    ) -> Op[T]:
        """Try the aggregators (healthy first); rounds separated by backoff.

        An answer that only says something about *this* aggregator (403
        BLOB_TOO_LARGE, 451, 404, and 500 on a quilt route, which real Walrus
        gives for a non-quilt blob) moves on to the next one; such an aggregator
        is not asked again in this call.
        """
        if not self.aggregator_urls:
            raise AggregatorUnavailable(
                "no aggregator configured (set aggregator_urls; publisher URLs serve reads "
                "only with publisher_serves_reads)"
            )
        deadline = Deadline(_within_call(_check_deadline(deadline_s, self.read_deadline),
                                         "aggregator"), self.clock)
        active = self.aggregator_health.order(self.aggregator_urls)
        connect_failures = dict.fromkeys(active, 0)
        last: Failure | None = None
        last_verify: Failure | None = None
        finals: list[Failure] = []
        quilt_500: Counter[str] = Counter()
        # What each aggregator answered, for the error: the final one alone (often a liar's
        # verification failure) would hide why the others did not serve the read.
        answers: _Answers = _Answers(active)
        round_no = 0
        while True:
            not_found: Failure | None = None
            retry_after: float | None = None
            for index, base in enumerate(list(active)):
                if index > 0:
                    self.stats.add("failovers")
                if round_no > 0 or index > 0:
                    if deadline.remaining() < self.policy.min_request_time:
                        raise self._read_exhausted(last, last_verify, round_no, deadline,
                                                   answers)
                send = Send("GET", base + path, "aggregator", self._timeout(deadline),
                             params=params, headers=self._auth(base), follow_redirects=True,
                             budget=deadline.remaining(), max_body=cap)
                outcome = yield send
                result = self._interpret(outcome, send, interpret)
                if not isinstance(result, Failure) and verify is not None:
                    result = self._verify(result, verify, base)
                if not isinstance(result, Failure):
                    self.aggregator_health.succeeded(base)
                    if round_no or index:
                        logger.debug("read %s served by %s after %d round(s)", key, base, round_no)
                    return result
                if result.kind == "http_404" and self.recently_stored(key):
                    result = Failure("not_found_after_store", result.error, True,
                                     cause=result.cause)
                self.stats._fault(result.kind)
                answers.add(base, result.kind)
                # Consecutive 500s only: a transient 500 between other answers is an
                # overloaded node, not the non-quilt-blob answer.
                quilt_500[base] = quilt_500[base] + 1 \
                    if quilt_route and result.kind == "http_500" else 0
                if quilt_500[base] >= _QUILT_500_LIMIT and not answers.only_liars_besides(
                        base, active):
                        result.error.add_note(
                            f"{_QUILT_500_LIMIT} answers of 500 to a quilt route: real Walrus "
                            "answers so for a blob that is not a quilt"
                        )
                        finals.append(result)
                        active.remove(base)
                        answers.drop(base, f"{_QUILT_500_LIMIT} answers of 500 to a quilt route")
                        continue
                if _unhealthy(result):
                    self.aggregator_health.failed(base)
                if not result.retryable:
                    if isinstance(result.error, BlobNotFound):
                        not_found = result  # ask the others before believing it
                        continue
                    if isinstance(result.error, ForbiddenBlob | BodyTooLarge):
                        finals.append(result)  # this operator's limit or blocklist
                        active.remove(base)
                        answers.drop(base, result.kind)
                        continue
                    raise result.error from result.cause
                if result.kind == "verification":
                    last_verify = result
                last = result
                if result.retry_after is not None:
                    retry_after = max(retry_after or 0.0, result.retry_after)
                connect_failures[base] = connect_failures[base] + 1 if result.connect else 0
                if connect_failures[base] >= self.policy.max_connect_failures \
                        and not answers.only_liars_besides(base, active):
                    active.remove(base)
                    answers.drop(base, f"{connect_failures[base]} failed connections in a row")
            if not_found is not None:
                raise not_found.error from not_found.cause
            if not active:
                if finals and (last is None or not last.connect):
                    chosen = finals[0]
                    if len(self.aggregator_urls) > 1:
                        chosen.error.add_note(
                            f"none of the {len(self.aggregator_urls)} aggregators served it"
                        )
                    raise chosen.error from chosen.cause
                assert last is not None
                last.error.add_note("every aggregator refused the connection")
                raise self._read_exhausted(last, last_verify, round_no, deadline, answers,
                                           note=False)
            delay = self.policy.delay(round_no, self.rng, retry_after)
            if not deadline.allows(delay, self.policy.min_request_time):
                raise self._read_exhausted(last, last_verify, round_no, deadline, answers)
            self.stats._retry(last.kind if last is not None else "unknown")
            logger.debug("read round %d failed (%s); retry in %.3f s", round_no + 1,
                         last.kind if last else "?", delay)
            yield Sleep(delay)
            round_no += 1

    def _verify(self, value: T, verify: Callable[[T], object], base: str) -> T | Failure:
        try:
            verdict = verify(value)
        except Exception as exc:  # any exception means "reject this answer"
            cause: BaseException = exc
        else:
            if verdict is not False:
                return value
            cause = ValueError("verify callback returned False")
        self.stats.add("verification_failures")
        error = VerificationFailed(
            f"content from aggregator {_origin(base)} failed verification: "
            f"{type(cause).__name__}"
        )
        return Failure("verification", error, True, cause=cause)

    def _read_exhausted(
        self,
        last: Failure | None,
        last_verify: Failure | None,
        rounds: int,
        deadline: Deadline,
        answers: _Answers | None = None,
        *,
        note: bool = True,
    ) -> StorageError:
        """The error to raise when reads ran out of time (or of aggregators)."""
        chosen = last_verify if last_verify is not None else last
        if chosen is None:
            error: StorageError = AggregatorUnavailable("read deadline passed before any answer")
        else:
            error = chosen.error
            error.__cause__ = chosen.cause
        if note:
            self._exhausted(error, rounds + 1, deadline)
        if answers is not None and len(self.aggregator_urls) > 1:
            error.add_note(answers.summary())
        return error


class _Answers:
    """Failed answers per aggregator within one read call, and why any was dropped."""

    def __init__(self, urls: Sequence[str]) -> None:
        self._kinds: dict[str, Counter[str]] = {url: Counter() for url in urls}
        self._dropped: dict[str, str] = {}

    def add(self, url: str, kind: str) -> None:
        self._kinds.setdefault(url, Counter())[kind] += 1

    def only_liars_besides(self, url: str, active: Sequence[str]) -> bool:
        """Whether every other aggregator still asked has failed verification in this call.

        Dropping ``url`` then would leave only endpoints that served wrong bytes, so the
        call could only end in VerificationFailed: keep asking it until the deadline.
        """
        others = [other for other in active if other != url]
        return bool(others) and all(self._kinds[other]["verification"] for other in others)

    def drop(self, url: str, reason: str) -> None:
        self._dropped[url] = reason

    def summary(self) -> str:
        parts = []
        for url, kinds in self._kinds.items():
            counted = ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common()) or "no answer"
            dropped = f" (not asked again in this call: {self._dropped[url]})" \
                if url in self._dropped else ""
            parts.append(f"{_origin(url)}: {counted}{dropped}")
        return "failed answers per aggregator: " + "; ".join(parts)


def _read_cap(expected: int | None, limit: int) -> int:
    """Bytes a read may return: the expected size plus slack, else the blob limit."""
    if expected is None:
        return limit
    if not isinstance(expected, int) or isinstance(expected, bool) or expected < 0:
        raise InvalidInput(f"max_size must be a non-negative integer, got {expected!r}")
    return expected + READ_SLACK


def read_path_blob(blob_id: str) -> str:
    return f"/v1/blobs/{validate_blob_id(blob_id)}"


def check_range(start: int, length: int) -> None:
    for name, value, low in (("start", start, 0), ("length", length, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise InvalidInput(f"byte range {name} must be an integer >= {low}, got {value!r}")
