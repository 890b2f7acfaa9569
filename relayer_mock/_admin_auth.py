"""The admin token that guards the ``/_mock/`` routes, and who may reach a served relayer.

Loopback is no boundary: every local user, and any web page the developer opens (a plain
``POST`` needs no CORS preflight), can reach ``127.0.0.1``. So every relayer a socket serves
requires the token; only the in-process embedded one, which nothing outside the process can
reach, may leave the routes open.

The token travels as ``Authorization: Bearer <token>`` or in the ``Relayer-Mock-Admin-Token``
header (for clients whose ``Authorization`` carries a publisher JWT). It is compared as a
SHA-256 digest with :func:`hmac.compare_digest`: constant time, and the length leaks nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from starlette.responses import Response

from ._responses import api_error

ADMIN_TOKEN_HEADER = "Relayer-Mock-Admin-Token"
ADMIN_TOKEN_ENV = "RELAYER_MOCK_ADMIN_TOKEN"
ADMIN_TOKEN_FILE = "admin-token"
MIN_TOKEN_LENGTH = 16
_DOMAIN = "relayer-mock.admin"


def new_admin_token() -> str:
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(token: str) -> str:
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"the admin token needs at least {MIN_TOKEN_LENGTH} characters "
                         "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


class AdminAuth:
    """Checks the admin token of a request; never shows it."""

    def __init__(self, token: str) -> None:
        self._digest = hashlib.sha256(check_token(token).encode()).digest()

    def __repr__(self) -> str:
        return "AdminAuth(token=<hidden>)"

    def allows(self, headers: Mapping[str, str]) -> bool:
        offered = [headers.get(ADMIN_TOKEN_HEADER)]
        authorization = headers.get("authorization")
        if authorization is not None and authorization[:7].lower() == "bearer ":
            offered.append(authorization[7:].strip())
        ok = False
        for candidate in offered:  # no early exit: both are compared every time
            if candidate:
                digest = hashlib.sha256(candidate.encode()).digest()
                ok |= hmac.compare_digest(digest, self._digest)
        return ok

    @staticmethod
    def refusal() -> Response:
        # Says nothing about the server (no data dir, no settings) to whoever asks.
        return api_error(
            "UNAUTHENTICATED", "ADMIN_TOKEN_REQUIRED",
            f"the /_mock/ admin routes need the admin token (Authorization: Bearer or "
            f"{ADMIN_TOKEN_HEADER})",
            domain=_DOMAIN, headers={"WWW-Authenticate": 'Bearer realm="relayer_mock admin"'},
        )


def load_or_create_token(data_dir: str | os.PathLike[str]) -> tuple[str, Path]:
    """The token in ``<data_dir>/admin-token``, created (0600) with a random one if missing.

    Kept across restarts and shared by every process on the data dir (a split publisher /
    aggregator deployment, a second instance): whoever can read the data dir can read its
    blobs anyway. Delete the file to get a new token. Refused when it is a link, not a
    regular file, not ours, or readable by others.
    """
    directory = Path(data_dir)
    path = directory / ADMIN_TOKEN_FILE
    for _ in range(3):
        try:
            return _read_token_file(path), path
        except FileNotFoundError:
            pass
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        staged = directory / f".{ADMIN_TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(new_admin_token() + "\n")
                out.flush()
                os.fsync(out.fileno())
            # link(2) never replaces: a process starting at the same moment keeps its token
            # and this one reads it on the next turn.
            with contextlib.suppress(FileExistsError):
                os.link(staged, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staged)
    raise ValueError(f"{path}: could not create the admin token file")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _read_token_file(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if path.is_symlink():
            raise ValueError(f"{path} is a symbolic link: refusing it as the admin token "
                             "file") from None
        raise ValueError(f"{path}: cannot read the admin token file: {exc.strerror}") from None
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise ValueError(f"{path} belongs to another user: refusing its admin token")
        if info.st_mode & 0o077:
            raise ValueError(f"{path} is readable by others (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}); make it 0600 or delete it")
        return check_token(handle.read(4096).strip())
