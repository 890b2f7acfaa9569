"""Which Walrus network the endpoints lead to: the system object, where it can be known.

What the daemon really exposes (MystenLabs/walrus 3c1cacc; docs/walrus.md, "Network resets
and network changes"):
``GET /status`` answers a plain ``OK`` (daemon/routes.rs ``status``), store answers
carry Sui object ids of the Blob and its Storage but no network or system object
(walrus-sui types/move_structs.rs ``Blob``), and no response header names one. The one
place a running publisher or aggregator names its system object is its Prometheus
endpoint (``--metrics-address``, default 127.0.0.1:27182, ``GET /metrics``): the gauge
``walrus_contract_info{system_object="0x…",staking_object="0x…",active_address="…"} 1``
(common/utils.rs ``export_contract_info``, set by cli/runner.rs ``run_daemon_app``).

So the identity is optional: ``walrus_system_object`` (the operator's expectation) and
``network_metrics_url`` (that gauge). The catalog keeps the one last seen (meta
``network_identity``); a different one is a change of network, followed by
network_reset.py like a reset; a metrics answer naming another object than the
configured one is a mismatch doctor fails on (the blobs are not trusted to move).
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any, Final

import httpx

if TYPE_CHECKING:
    from ..config import Settings
    from .expiry import ClockStore

__all__ = ["IDENTITY_KEY", "change_followed", "change_pending", "describe_identity",
           "fetch_contract_info", "observe_identity", "parse_contract_info"]

log = logging.getLogger(__name__)

IDENTITY_KEY: Final = "network_identity"
METRICS_TIMEOUT: Final = 5.0
MAX_METRICS_BYTES: Final = 4 << 20  # a daemon's whole registry is a few hundred KiB
_GAUGE = re.compile(r"^walrus_contract_info\{([^}]*)\}\s+\S+", re.MULTILINE)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_OBJECT = re.compile(r"0x[0-9a-f]{64}")


def parse_contract_info(text: str) -> dict[str, str] | None:
    """The labels of the first ``walrus_contract_info`` sample (Prometheus text format),
    when it names a well-formed system object; else None."""
    for match in _GAUGE.finditer(text):
        labels = dict(_LABEL.findall(match.group(1)))
        system = labels.get("system_object", "").lower()
        if _OBJECT.fullmatch(system):
            staking = labels.get("staking_object", "").lower()
            return {"system_object": system,
                    **({"staking_object": staking} if _OBJECT.fullmatch(staking) else {})}
    return None


def fetch_contract_info(url: str, *, timeout: float = METRICS_TIMEOUT) -> dict[str, str] | None:
    """Read the daemon's metrics endpoint (``url``: its base or the ``/metrics`` path)."""
    target = url if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"
    with httpx.Client(timeout=timeout, follow_redirects=False) as client, \
            client.stream("GET", target) as response:
        response.raise_for_status()
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_METRICS_BYTES:
                raise ValueError(f"metrics answer over {MAX_METRICS_BYTES} bytes")
    return parse_contract_info(body.decode("utf-8", "replace"))


def _load(store: ClockStore) -> dict[str, Any]:
    try:
        value = json.loads(store.get_meta(IDENTITY_KEY) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def observe_identity(store: ClockStore, settings: Settings) -> str | None:
    """Compare the network's system object (configured, or reported by the metrics
    endpoint) with the one the catalog last recorded. Returns the previous system object
    when it changed (the caller follows the change of network), else None. A report
    that contradicts the configured object is recorded as a mismatch (doctor fails)
    and changes nothing. The metrics endpoint not answering leaves things as they are."""
    expected = settings.walrus_system_object
    reported: dict[str, str] | None = None
    if settings.network_metrics_url:
        try:
            reported = fetch_contract_info(settings.network_metrics_url)
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("network_metrics_url did not answer: %s", type(exc).__name__)
    record = _load(store)
    now = time.time()
    if reported is not None and expected is not None \
            and reported["system_object"] != expected:
        record["mismatch"] = (
            f"the publisher's metrics ({settings.network_metrics_url}) name system object "
            f"{reported['system_object']}, walrus_system_object is {expected}: the endpoints "
            "lead to another network than configured")
        record["checked_at"] = now
        store.set_meta(IDENTITY_KEY, json.dumps(record))
        log.error("%s", record["mismatch"])
        return None
    had = record.pop("mismatch", None)
    current = reported["system_object"] if reported is not None else expected
    if current is None:
        if had is not None:
            store.set_meta(IDENTITY_KEY, json.dumps(record))
        return None
    previous = record.get("system_object")
    record.update({"system_object": current, "checked_at": now,
                   "source": "metrics" if reported is not None else "configured"})
    if reported is not None and "staking_object" in reported:
        record["staking_object"] = reported["staking_object"]
    changed = previous is not None and previous != current
    if changed:
        record.update({"previous": previous, "changed_at": now, "follow": True})
        log.warning("the network's system object is now %s (it was %s): another network; "
                    "following it", current, previous)
    store.set_meta(IDENTITY_KEY, json.dumps(record))
    return str(previous) if changed else None


def describe_identity(record: dict[str, Any]) -> str:
    """One line for doctor: the system object and where it was learned."""
    system = record.get("system_object")
    if not system:
        return ""
    text = f"system object {system} ({record.get('source', 'configured')})"
    if record.get("previous"):
        text += f", was {record['previous']} until the change of network"
    return text


def change_pending(store: ClockStore) -> dict[str, Any] | None:
    """The identity record while a change of system object is not followed yet."""
    record = _load(store)
    return record if record.get("follow") else None


def change_followed(store: ClockStore) -> None:
    """network_reset.py followed the change: the lost blobs are being stored again."""
    record = _load(store)
    if record.pop("follow", None):
        store.set_meta(IDENTITY_KEY, json.dumps(record))
