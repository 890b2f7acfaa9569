"""``walrus-mem doctor``: what the data dir knows about the network behind its endpoints.

Nothing in the daemon's HTTP answers names the network (docs/walrus.md, "Network
resets and network changes"), so this reads what the catalog recorded: a reset or a
change of network followed (network_reset.py, meta ``network_reset``), store answers
held apart because their epoch went back (``epoch_clock_backwards``) or ran ahead of
what the clock allows (``epoch_clock_ahead``), and the network's identity when one was
configured or reported (``network_identity``). No network I/O: ``sync`` settles what
is suspected.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .doctor_check import Check

__all__ = ["Check", "check_network"]


def _meta(mem: Any, key: str) -> Any:
    try:
        raw = mem.parts.catalog.get_meta(key)
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _ago(at: object) -> str:
    try:
        seconds = max(0.0, time.time() - float(at))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "at an unknown time"
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def check_network(mem: Any) -> list[Check]:
    """One ``network`` check, plus one per thing still to settle (doctor.py makes them
    its Checks)."""
    from .._memory.loss_pending import PENDING_KEY
    from .._memory.network_reset import LOST, RESET_KEY
    from .._walrus.epoch_guard import AHEAD_KEY
    from .._walrus.expiry import BACKWARDS_KEY
    from .._walrus.network_identity import IDENTITY_KEY, describe_identity
    checks: list[Check] = []
    fix = "walrus-mem sync (checks what the network still serves and follows it)"
    held = _meta(mem, BACKWARDS_KEY)
    if isinstance(held, dict) and held.get("seen"):
        epochs = sorted({int(e) for e, *_ in held["seen"]})
        if held.get("kind") == LOST:
            what = (f"the network (epoch {epochs[-1]}) no longer serves blobs this data dir "
                    "stored that must still be live: another network behind the endpoints "
                    "(a redeploy, another system object) or a wipe")
        else:
            what = (f"store answers named epoch(s) {epochs}, below epoch {held.get('newest')} "
                    "seen before: the network was wiped or its epochs reset (or a publisher "
                    "lies)")
        checks.append(Check("network reset", "warn", what + "; not followed yet", fix))
    for (key,) in mem.parts.catalog.query("SELECT key FROM meta WHERE key LIKE ? ORDER BY key",
                                          (f"{PENDING_KEY}:%",)):
        pending = _meta(mem, str(key))  # loss_pending.py: a loss seen once, not followed
        if isinstance(pending, dict) and "at" in pending:
            checks.append(Check(
                "network loss", "warn",
                f"blobs of {key.split(':', 1)[1]!r} answered 404 on every aggregator "
                f"{_ago(pending['at'])} (a lost network, or an aggregator that lies or is "
                "stuck); not followed until a sync at least network_loss_confirm_after "
                "seconds later sees it again; manifests wait", fix))
    ahead = _meta(mem, AHEAD_KEY)
    if isinstance(ahead, dict) and ahead:
        epochs = sorted(int(e) for e in ahead)
        newest = mem.epoch_clock.reading().newest_seen
        checks.append(Check(
            "network change", "warn",
            f"store answers named epoch(s) {epochs}, ahead of what the epoch clock allows "
            f"(newest epoch seen {newest}): another network behind the endpoints, or a "
            "lying publisher; the clock does not follow them until sync has checked",
            fix))
    record = _meta(mem, RESET_KEY)
    identity = _meta(mem, IDENTITY_KEY)
    ident = describe_identity(identity) if isinstance(identity, dict) else ""
    if isinstance(record, dict):
        kind = ("another network behind the endpoints (its epochs did not go back; the "
                "blobs this data dir stored were gone)" if record.get("kind") == LOST
                else "a wipe or an epoch reset (its epochs went back)")
        lost = record.get("lost_blobs")
        lost_text = f", {lost} lost blob(s)" if isinstance(lost, int) else ""
        owed = record.get("owed") or []
        detail = (f"followed {kind} {_ago(record.get('at'))}: epochs {record.get('from')} -> "
                  f"{record.get('to')}{lost_text}; the epoch clock follows the new network")
        if owed:
            checks.append(Check("network", "warn",
                                f"{detail}; memories of {', '.join(map(str, owed))} the network "
                                "lost are not stored again yet", fix))
        else:
            checks.append(Check("network", "ok", f"{detail}; every lost memory stored again"
                                + (f"; {ident}" if ident else "")))
    else:
        checks.append(Check("network", "ok", "no wipe, epoch reset or change of network seen; "
                            + (ident or "the system object is not known (walrus_system_object "
                               "or network_metrics_url would name it)")))
    mismatch = identity.get("mismatch") if isinstance(identity, dict) else None
    if mismatch:
        checks.append(Check("network identity", "fail", str(mismatch),
                            "point the endpoints at the network named by "
                            "walrus_system_object, or change that setting"))
    return checks
