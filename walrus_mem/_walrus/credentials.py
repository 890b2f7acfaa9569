"""Publisher credentials fetched per request: a static token, a command, or a callable.

A Walrus publisher with JWT auth accepts each token once (it marks the ``jti`` used
*before* the store runs, so even a failed or load-shed store consumes it). The client
therefore asks a :class:`TokenProvider` for a fresh token before every publisher
request, retries included. Three sources:

* a static token (``publisher_token``): returned every time, for publishers that
  accept reuse (an API gateway key, a long-lived bearer);
* a command (``publisher_token_command``), run with no shell on every request, which
  prints one token on stdout, like kubectl's exec credential plugins and git
  credential helpers;
* any Python callable returning a ``str`` (or ``SecretStr``).

Each is handed the request it authorises (:class:`TokenRequest`: route, the size the
publisher compares a ``size`` / ``max_size`` claim with, epochs, ``send_object_to``), so a
helper can mint exact claims, as Walrus's publisher with ``--jwt-verify-upload`` requires:
the command as ``WALRUS_MEM_TOKEN_*`` environment variables, a callable as its one
argument (a callable taking no argument is called without it).

A provider that fails (non-zero exit, timeout, empty output, an exception) raises
:class:`~walrus_mem.errors.AuthenticationFailed`; the store is not attempted, and the
token or the command's output never appears in the message.
"""

from __future__ import annotations

import inspect
import os
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import SecretStr

from ..errors import AuthenticationFailed, InvalidInput
from .retry import call_time_left

__all__ = ["TokenProvider", "TokenRequest", "command_provider", "static_provider",
           "token_provider"]


@dataclass(frozen=True)
class TokenRequest:
    """The publisher request a token is minted for.

    ``size`` is what the publisher compares a ``size`` / ``max_size`` claim with on the
    route: the body on ``blobs``, the encoded quilt on ``quilts`` (``quilt.data().len()``,
    see :mod:`~walrus_mem._walrus.quilt_size`). ``body_size`` is the HTTP body, which a
    publisher with ``--jwt-verify-upload`` also compares the claim with: on ``quilts`` the
    two differ, so only ``max_size`` (at least :attr:`max_size`) can pass there.
    """

    route: str  # "blobs" or "quilts"
    size: int
    body_size: int
    epochs: int
    send_object_to: str | None
    publisher: str  # the publisher's base URL (no credentials)

    @property
    def max_size(self) -> int:
        """The smallest ``max_size`` claim that passes both size checks."""
        return max(self.size, self.body_size)

    def environment(self) -> dict[str, str]:
        """The ``WALRUS_MEM_TOKEN_*`` variables a token command gets."""
        return {
            "WALRUS_MEM_TOKEN_ROUTE": self.route,
            "WALRUS_MEM_TOKEN_SIZE": str(self.size),
            "WALRUS_MEM_TOKEN_BODY_SIZE": str(self.body_size),
            "WALRUS_MEM_TOKEN_MAX_SIZE": str(self.max_size),
            "WALRUS_MEM_TOKEN_EPOCHS": str(self.epochs),
            "WALRUS_MEM_TOKEN_SEND_OBJECT_TO": self.send_object_to or "",
            "WALRUS_MEM_TOKEN_PUBLISHER": self.publisher,
        }


TokenProvider = Callable[[TokenRequest | None], SecretStr | None]
"""Returns the bearer token for the publisher request described (None: send no header).
Called without a request (outside a store), a command gets no ``WALRUS_MEM_TOKEN_*``
variables and a callable no argument."""

COMMAND_TIMEOUT: Final = 10.0
_MAX_TOKEN: Final = 16 * 1024


def static_provider(token: str | SecretStr | None) -> TokenProvider:
    """The same token for every request (or no header at all when empty)."""
    secret = SecretStr(token) if isinstance(token, str) else token
    if secret is not None and not secret.get_secret_value():
        secret = None

    def provide(request: TokenRequest | None = None) -> SecretStr | None:
        return secret

    return provide


def _argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        argv = shlex.split(command)
    elif isinstance(command, Sequence) and all(isinstance(a, str) for a in command):
        argv = list(command)
    else:
        raise InvalidInput("publisher_token_command must be a string or a list of strings")
    if not argv or not argv[0]:
        raise InvalidInput("publisher_token_command is empty")
    return argv


def command_provider(
    command: str | Sequence[str], *, timeout: float = COMMAND_TIMEOUT
) -> TokenProvider:
    """Run ``command`` (no shell; a string is split like a POSIX shell would) per request,
    with the request's ``WALRUS_MEM_TOKEN_*`` variables added to the environment.

    Its stdout, stripped, is the token. Stderr is not captured into errors either: a
    helper may print secrets there while debugging.
    """
    argv = _argv(command)
    # Not the program's name: the command may come from a ${VAR} whose value (a secret
    # set in the wrong variable) must never be echoed; there is only one such command.
    name = "publisher_token_command"

    def provide(request: TokenRequest | None = None) -> SecretStr:
        left = call_time_left()  # never past the store's own deadline
        seconds = timeout if left is None else max(0.001, min(timeout, left))
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, timeout=seconds, check=False,
                env=None if request is None else {**os.environ, **request.environment()},
            )
        except subprocess.TimeoutExpired:
            raise AuthenticationFailed(
                f"{name} did not finish within {seconds:.3g} s"
            ) from None
        except OSError as exc:
            raise AuthenticationFailed(
                f"{name} cannot run: {exc.strerror or type(exc).__name__}"
            ) from None
        if done.returncode != 0:
            raise AuthenticationFailed(
                f"{name} exited with status {done.returncode}"
            )
        token = done.stdout[:_MAX_TOKEN + 1].decode("utf-8", "replace").strip()
        if not token or len(token) > _MAX_TOKEN or any(c.isspace() for c in token):
            raise AuthenticationFailed(
                f"{name} must print exactly one token on stdout"
            )
        return SecretStr(token)

    return provide


def _takes_request(func: Callable[..., object]) -> bool:
    """Whether ``func`` accepts one positional argument (older callables take none)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # some builtins: call as before requests were passed
        return False
    try:
        signature.bind(None)
    except TypeError:
        return False
    return True


def _from_callable(func: Callable[..., object]) -> TokenProvider:
    with_request = _takes_request(func)

    def provide(request: TokenRequest | None = None) -> SecretStr | None:
        try:
            value = func(request) if with_request and request is not None else func()
        except AuthenticationFailed:
            raise
        except Exception as exc:
            raise AuthenticationFailed(
                f"publisher token callable failed: {type(exc).__name__}"
            ) from None
        if value is None:
            return None
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if not isinstance(value, str) or not value.strip():
            raise AuthenticationFailed("publisher token callable must return a non-empty string")
        return SecretStr(value.strip())

    return provide


def token_provider(
    token: str | SecretStr | Callable[..., object] | None = None,
    command: str | Sequence[str] | None = None,
) -> TokenProvider:
    """One provider from what the user configured; a command wins over a static token."""
    if command is not None and (not isinstance(command, str) or command.strip()):
        return command_provider(command)
    if callable(token):
        return _from_callable(token)
    if not isinstance(token, str | SecretStr | None):
        raise InvalidInput("token must be a string, SecretStr or a callable returning one")
    return static_provider(token)
