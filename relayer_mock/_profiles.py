"""``--profile testnet|mainnet``: defaults that answer as the public networks do.

What a profile sets (each still overridable by its own option / create_app argument):

* ``max_request_bytes`` 10 MiB: "most public aggregators and publishers limit requests
  to 10 MiB" (Walrus docs, network reference); a plain-text 413 above it;
* ``store_latency``: a store runs up to three Sui transactions (reserve, register,
  certify) and a fan-out of slivers to 1000 shards, so seconds, with a long tail; drawn
  from a log-normal distribution (median 2.5 s on Testnet, 4 s on Mainnet, sigma 0.5:
  about 1 in 20 stores over 5.7 s / 9 s). These medians are assumptions of the mock (no
  measured distribution is published), chosen so a 10 s client deadline is sometimes
  too short and Walrus's guidance of 30 s or more is not;
* ``not_found_after_store`` 3 s: a CDN-fronted aggregator may serve a cached 404 right
  after a blob is certified (``reading-blobs-after-upload.mdx``);
* ``real_quilt_sizes``: a quilt's ``storageSize``, ``encodedLength`` and ``cost`` come
  from the QuiltV1 blob the daemon builds (never under 445,556 bytes: every patch takes
  whole columns of a 334 x 667 symbol matrix), not from the mock's compact container;
* ``nullable_certified_epoch``: ``certifiedEpoch`` is ``null`` in store answers, as the
  docs' quilt example and the public publisher (MystenLabs/MemWal#523) show.
* identifiers of ``/v1/blobs/by-quilt-id/{quilt}/{identifier}`` are one path segment, as
  the daemon's route has it: ``%2F`` is part of the identifier, a bare ``/`` is an empty 404
  (_aggregator.py, whenever a profile is set).

``time_scale`` (create_app / ``--time-scale``) multiplies the latency and the 404 window:
the end-to-end tests run each profile at 1/20 of its times.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["PROFILES", "profile_settings"]

MiB: Final = 1024 * 1024

PROFILES: Final[dict[str, dict[str, Any]]] = {
    "testnet": {
        "max_request_bytes": 10 * MiB,
        "store_latency": "lognormal:2500:0.5",
        "not_found_after_store": 3.0,
        "real_quilt_sizes": True,
        "nullable_certified_epoch": True,
    },
    "mainnet": {
        "max_request_bytes": 10 * MiB,
        "store_latency": "lognormal:4000:0.5",
        "not_found_after_store": 3.0,
        "real_quilt_sizes": True,
        "nullable_certified_epoch": True,
    },
}


def profile_settings(name: str, time_scale: float = 1.0) -> dict[str, Any]:
    """The create_app arguments of profile ``name``, times scaled by ``time_scale``."""
    try:
        values = dict(PROFILES[name])
    except KeyError:
        raise ValueError(f"unknown profile {name!r} (testnet or mainnet)") from None
    if not time_scale > 0:
        raise ValueError("time_scale must be > 0")
    kind, median, sigma = str(values["store_latency"]).split(":")
    values["store_latency"] = f"{kind}:{float(median) * time_scale:g}:{sigma}"
    values["not_found_after_store"] = values["not_found_after_store"] * time_scale
    return values
