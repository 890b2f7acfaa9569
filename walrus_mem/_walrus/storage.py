"""The Walrus backend a :class:`~walrus_mem.Memory` talks to.

* Settings with a publisher / aggregator URL: a :class:`WalrusClient` on them.
* No URL at all (``Settings.embedded``): relayer_mock's :class:`EmbeddedRelayer`
  in-process, backed by ``<data_dir>/relayer`` (no socket, zero set-up).

Besides the client, the backend says what the storage allows beyond the
Walrus HTTP API. Real Walrus has no HTTP delete (a deletable blob is deleted
on-chain by the owner of its Blob object) and no "current epoch" route; the
mock has both under ``/_mock/`` (mock only), which forget and expiry use when
they are there. A relayer_mock served over HTTP answers them only with its admin
token (``Settings.mock_admin_token``); without it the backend is like real Walrus.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from ..config import Settings
from ..walrus import WalrusClient
from .adopt import StoreRequest, command_oracle
from .bounded_io import Bounded, DeadlineTransport, send_sync

__all__ = ["Backend", "open_backend"]

log = logging.getLogger(__name__)

_ADMIN_TIMEOUT = 5.0  # wall clock per admin exchange (bounded_io), not per socket read
_ADMIN_CAP = 64 * 1024  # an epoch number or a delete answer; a server sending more is cut off


class Backend:
    """A Walrus client plus the mock-only extras (delete, epoch) when available."""

    def __init__(
        self,
        client: WalrusClient,
        *,
        embedded: Any = None,
        admin: httpx.Client | None = None,
        owns_client: bool = True,
        admin_token: str | None = None,
    ) -> None:
        self.client = client
        self.embedded = embedded
        self._admin = admin
        self._admin_token = admin_token
        self._owns_client = owns_client
        self._admin_ok: bool | None = True if embedded is not None else None
        self._admin_unreachable = False

    @property
    def is_embedded(self) -> bool:
        return self.embedded is not None

    def _admin_client(self) -> httpx.Client | None:
        """The ``/_mock/`` admin client, probing once whether the server has it."""
        if self._admin_ok is False:
            return None
        if self._admin is None:
            base = self.client.publisher_url or (self.client.aggregator_urls or (None,))[0]
            if base is None:
                self._admin_ok = False
                return None
            headers = ({"Authorization": f"Bearer {self._admin_token}"}
                       if self._admin_token else {})
            self._admin = httpx.Client(base_url=base, timeout=_ADMIN_TIMEOUT, headers=headers,
                                       transport=DeadlineTransport())
        if self._admin_ok is None:
            try:
                response = self._admin_call(self._admin, "GET", "/_mock/epoch")
                self._admin_ok = response.status_code == 200
            except (httpx.HTTPError, Bounded):
                self._admin_ok, self._admin_unreachable = False, True
            else:
                if response.status_code == 401:
                    # relayer_mock without (or with a wrong) mock_admin_token: no delete, no
                    # epoch route, exactly as on real Walrus
                    log.log(logging.WARNING if self._admin_token else logging.INFO,
                            "relayer_mock's admin routes refused %s: forget keeps blobs on "
                            "storage and the expiry clock learns from store answers",
                            "mock_admin_token" if self._admin_token
                            else "a request without mock_admin_token")
        return self._admin if self._admin_ok else None

    @staticmethod
    def _admin_call(admin: httpx.Client, method: str, path: str) -> httpx.Response:
        """One admin exchange, bounded like the client's: the probe goes to a real
        publisher too, which may drip or answer gigabytes."""
        return send_sync(admin, admin.build_request(method, path), budget=_ADMIN_TIMEOUT,
                         max_body=_ADMIN_CAP)

    @property
    def can_delete(self) -> bool:
        return self._admin_client() is not None

    @property
    def delete_unknown(self) -> bool:
        """Whether the server was unreachable when asked if it has a delete route (so
        whether it has one is unknown): a deletion refused for that reason is worth
        retrying (a later process asks again)."""
        return self._admin_client() is None and self._admin_unreachable

    def delete_blob(self, blob_id: str) -> tuple[bool, str]:
        """Delete a deletable blob where the backend allows it: (deleted, explanation)."""
        admin = self._admin_client()
        if admin is None:
            return False, (
                "the Walrus HTTP API has no delete; a deletable blob can only be deleted "
                "on-chain by the owner of its Blob object"
            )
        try:
            response = self._admin_call(admin, "DELETE",
                                        f"/_mock/blobs/{quote(blob_id, safe='')}")
        except (httpx.HTTPError, Bounded) as exc:
            return False, f"delete request failed: {type(exc).__name__}"
        if response.status_code in (200, 204, 404):
            # Gone now: a later 404 for it is the truth, not a just-stored blob's cache lag.
            self.client.forget_stored(blob_id)
            return True, "already gone" if response.status_code == 404 else "deleted"
        return False, f"delete refused with HTTP {response.status_code}: {response.text[:200]}"

    def current_epoch(self) -> int | None:
        """The storage's current epoch when the backend can tell (mock only)."""
        admin = self._admin_client()
        if admin is None:
            return None
        try:
            response = self._admin_call(admin, "GET", "/_mock/epoch")
            data = response.json()
        except (httpx.HTTPError, Bounded, ValueError):
            return None
        if isinstance(data, int):
            return data
        if isinstance(data, dict):
            for key in ("epoch", "current_epoch", "currentEpoch"):
                if isinstance(data.get(key), int):
                    return int(data[key])
        return None

    def close(self) -> None:
        if self._owns_client:
            self.client.close()
        if self._admin is not None:
            self._admin.close()
        if self.embedded is not None:
            self.embedded.close()


def _mock_oracle(request: StoreRequest) -> str | None:
    from relayer_mock import mock_blob_id

    return mock_blob_id(request.body, files=request.files, metadata=request.metadata)


def open_backend(settings: Settings, walrus: WalrusClient | None = None) -> Backend:
    """Build the backend for ``settings`` (or wrap an injected client)."""
    if walrus is not None:
        return Backend(walrus, owns_client=False)
    token = settings.publisher_token
    command = settings.publisher_token_command
    common: dict[str, Any] = {
        "timeout": settings.request_timeout,
        "publish_deadline": settings.publish_deadline,
        "read_deadline": settings.read_deadline,
        "epochs": settings.epochs,
        "permanent": settings.permanent,
        "send_object_to": settings.send_object_to,
    }
    if settings.embedded:
        from relayer_mock.embedded import EmbeddedRelayer

        relayer = EmbeddedRelayer(Path(settings.data_dir) / "relayer")
        base = str(relayer.base_url)
        # the mock's ids are computable (relayer_mock/_ids_oracle.py): lost answers adopt
        client = WalrusClient(base, [base], transport=relayer.transport,
                              blob_id=_mock_oracle, **common)
        admin = httpx.Client(base_url=base, transport=relayer.transport, timeout=_ADMIN_TIMEOUT)
        return Backend(client, embedded=relayer, admin=admin)
    publishers = settings.all_publisher_urls
    # A `walrus publisher` serves no read routes: read from a publisher URL only
    # when the user says it is a daemon serving both roles.
    aggregators = list(settings.aggregator_urls)
    if settings.publisher_serves_reads:
        aggregators += [u for u in publishers if u not in aggregators]
    oracle = command_oracle(settings.blob_id_command) if settings.blob_id_command else None
    client = WalrusClient(publishers, aggregators, token=token,
                          token_command=command or None, blob_id=oracle, **common)
    admin_token = settings.mock_admin_token
    return Backend(client, admin_token=admin_token.get_secret_value() if admin_token else None)
