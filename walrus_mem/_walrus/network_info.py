"""The network's current epoch from the Walrus CLI, instead of a paid probe store.

No HTTP route of the daemon tells the epoch (docs/walrus.md, "Network resets and
network changes"). ``walrus info --json`` does, from the Sui chain the CLI's config
names (MystenLabs/walrus 3c1cacc, crates/walrus-service/src/client/responses.rs
``InfoOutput``/``InfoEpochOutput``, camelCase): ``walrus info --json`` prints
``{"epochInfo": {"currentEpoch": N, "startOfCurrentEpoch": ..., "epochDuration":
{"secs": S, "nanos": 0}, "maxEpochsAhead": 53}, "storageInfo": ..., ...}`` and
``walrus info epoch --json`` the ``epochInfo`` object alone. With
``network_info_command`` set (e.g. ``walrus info epoch --json``, run without a shell),
walrus_mem reads the epoch from it where it would otherwise store 32 random bytes for
one epoch (``Epochs.probe_epoch``; 63 storage units each on a paid publisher): the
reset and network-change checks and ``sync``'s epoch probe. A command that fails, times
out or prints something else falls back to the probe store. The CLI must be configured
for the same network as the endpoints (its ``system_object``): the command's answer
is one more sighting for the epoch clock, refused like any other when implausible.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["NetworkInfo", "parse_info", "run_info_command"]

log = logging.getLogger(__name__)

TIMEOUT: Final = 30.0  # seconds: the CLI reads the Sui chain over RPC
MAX_OUTPUT: Final = 1 << 20


@dataclass(frozen=True)
class NetworkInfo:
    """What the CLI says about the network."""

    current_epoch: int
    epoch_seconds: float | None = None
    max_epochs_ahead: int | None = None


def _epoch_info(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    inner = doc.get("epochInfo")
    if isinstance(inner, dict):
        return inner
    return doc if "currentEpoch" in doc else None


def parse_info(text: str) -> NetworkInfo | None:
    """The epoch fields of ``walrus info [epoch] --json`` output (None: not that shape)."""
    try:
        info = _epoch_info(json.loads(text))
    except ValueError:
        return None
    if info is None:
        return None
    epoch = info.get("currentEpoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        return None
    seconds: float | None = None
    duration = info.get("epochDuration")
    if isinstance(duration, dict) and isinstance(duration.get("secs"), int):
        seconds = duration["secs"] + int(duration.get("nanos") or 0) / 1e9
    ahead = info.get("maxEpochsAhead")
    return NetworkInfo(epoch, seconds if seconds and seconds > 0 else None,
                       ahead if isinstance(ahead, int) and not isinstance(ahead, bool) else None)


def run_info_command(command: str | Sequence[str], *,
                     timeout: float = TIMEOUT) -> NetworkInfo | None:
    """Run ``command`` (no shell) and parse its stdout; None when it fails (logged, no
    output in the log: it may name wallets)."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("network_info_command failed: %s", type(exc).__name__)
        return None
    if done.returncode != 0:
        log.warning("network_info_command exited %d", done.returncode)
        return None
    info = parse_info(done.stdout[:MAX_OUTPUT].decode("utf-8", "replace"))
    if info is None:
        log.warning("network_info_command printed no `walrus info --json` epoch")
    return info
