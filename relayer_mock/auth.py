"""Optional publisher authentication: ``Authorization: Bearer <JWT>`` like the daemon's
``--jwt-decode-secret`` mode (HS256/384/512, verified with the standard library's HMAC).

Claims: ``exp`` and ``jti`` are required; ``iat``, ``send_object_to``, ``epochs`` or
``max_epochs``, ``size`` or ``max_size`` are optional. Each ``jti`` is accepted once (the replay
cache lives in the data dir, so it holds across processes).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from ._ids import normalize_sui_address
from ._responses import api_error, plain

AUTH_DOMAIN = "auth.publisher.walrus.space"
_ALGORITHMS = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def encode_token(claims: dict[str, Any], secret: str, algorithm: str = "HS256") -> str:
    """Make a token the mock accepts (for tests and local tooling)."""

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": algorithm, "typ": "JWT"}, separators=(",", ":")).encode())
    payload = b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(),
                         _ALGORITHMS[algorithm]).digest()
    return f"{header}.{payload}.{b64(signature)}"


def _error(reason: str) -> Response:
    status, message = {
        "INVALID_SIGNATURE": ("UNAUTHENTICATED", "the token signature is invalid"),
        "EXPIRED_SIGNATURE": ("DEADLINE_EXCEEDED", "the token has expired"),
        "TOKEN_ALREADY_USED": ("RESOURCE_EXHAUSTED", "the token has already been used"),
    }.get(reason, ("FAILED_PRECONDITION", f"the token is not valid for this request ({reason})"))
    return api_error(status, reason, message, domain=AUTH_DOMAIN)


@dataclass(frozen=True)
class Claims:
    jti: str
    exp: float
    size: int | None = None
    max_size: int | None = None

    def check_size(self, size: int) -> Response | None:
        if self.max_size is not None and size > self.max_size:
            return _error("INVALID_SIZE")
        if self.size is not None and size != self.size:
            return _error("INVALID_SIZE")
        return None


class PublisherAuth:
    """Verifies bearer tokens on publisher routes."""

    def __init__(self, secret: str, algorithm: str = "HS256",
                 use_jti: Callable[[str, float], bool] | None = None,
                 clock: Callable[[], float] = time.time, verify_upload: bool = False) -> None:
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"unsupported JWT algorithm {algorithm!r}")
        self._secret = secret.encode()
        self._algorithm = algorithm
        self._use_jti = use_jti
        self._clock = clock
        # the daemon's --jwt-verify-upload: epochs / size / send_object_to claims are
        # compared with the request only with it (off by default there too)
        self.verify_upload = verify_upload

    def __repr__(self) -> str:
        return f"PublisherAuth(algorithm={self._algorithm!r})"

    def verify(self, authorization: str | None, epochs: int,
               send_object_to: str | None, body_size: int | None = None) -> Claims | Response:
        """Check the token against the request; returns the claims or an error response.

        ``body_size`` (the Content-Length) is checked against ``size`` / ``max_size`` like
        the daemon's ``--jwt-verify-upload`` auth layer does with the body's size hint; the
        route checks them again with what it stores (on quilts the encoded quilt, so an
        exact ``size`` can pass only on blobs)."""
        if authorization is None or not authorization.lower().startswith("bearer "):
            return plain("Header of type `authorization` was missing", 400)
        token = authorization[len("bearer "):].strip()
        try:
            header_b64, payload_b64, signature_b64 = token.split(".")
            header = json.loads(_b64decode(header_b64))
            claims = json.loads(_b64decode(payload_b64))
            signature = _b64decode(signature_b64)
        except (ValueError, binascii.Error):
            return _error("INVALID_TOKEN")
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return _error("INVALID_TOKEN")
        if header.get("alg") != self._algorithm:
            return _error("INVALID_SIGNATURE")
        expected = hmac.new(self._secret, f"{header_b64}.{payload_b64}".encode(),
                            _ALGORITHMS[self._algorithm]).digest()
        if not hmac.compare_digest(expected, signature):
            return _error("INVALID_SIGNATURE")
        now = self._clock()
        exp, jti = claims.get("exp"), claims.get("jti")
        if not isinstance(exp, int | float) or not isinstance(jti, str) or not jti:
            return _error("INVALID_TOKEN")
        if exp <= now:
            return _error("EXPIRED_SIGNATURE")
        iat = claims.get("iat")
        if iat is not None and (not isinstance(iat, int | float) or iat > now + 60):
            return _error("INVALID_TIMESTAMP")
        if not self.verify_upload:  # signature, expiry and single use only
            if self._use_jti is not None and not self._use_jti(jti, float(exp)):
                return _error("TOKEN_ALREADY_USED")
            return Claims(jti=jti, exp=float(exp))
        if "epochs" in claims and "max_epochs" in claims:
            return _error("INCONSISTENT_TOKEN")
        if "size" in claims and "max_size" in claims:
            return _error("INCONSISTENT_TOKEN")
        if "epochs" in claims and claims["epochs"] != epochs:
            return _error("INVALID_EPOCHS")
        if "max_epochs" in claims and not (
            isinstance(claims["max_epochs"], int) and epochs <= claims["max_epochs"]
        ):
            return _error("INVALID_EPOCHS")
        if claims.get("send_object_to") is not None:
            try:
                wanted = normalize_sui_address(str(claims["send_object_to"]))
            except ValueError:
                return _error("INVALID_TOKEN")
            if wanted != send_object_to:
                return _error("INVALID_SEND_OBJECT_TO")
        size, max_size = claims.get("size"), claims.get("max_size")
        if (size is not None and not isinstance(size, int)) or (
            max_size is not None and not isinstance(max_size, int)
        ):
            return _error("INVALID_TOKEN")
        verified = Claims(jti=jti, exp=float(exp), size=size, max_size=max_size)
        if body_size is not None and (refused := verified.check_size(body_size)) is not None:
            return refused  # before the jti is spent: the daemon gives it back then
        if self._use_jti is not None and not self._use_jti(jti, float(exp)):
            return _error("TOKEN_ALREADY_USED")
        return verified
