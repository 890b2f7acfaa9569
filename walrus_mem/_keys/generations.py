"""A namespace's key generation, as the catalog's meta table records it.

``keygen:<namespace>`` holds ``{"generation", "rotating", "retired"}``: the generation
in use, the rotation under way (walrus_mem._memory.rotation writes it), and the older
generations with what they sealed. The log reads it (which generation a manifest
needs, whether one may be published yet) below rotation, which writes it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ..errors import LocalStoreError

if TYPE_CHECKING:
    from .._catalog.catalog import Catalog

__all__ = ["MAX_PROBE", "current_generation", "load_state", "meta_key", "reseal_unfinished",
           "rotation_in_progress", "save_state"]

MAX_PROBE: Final = 64  # generations tried when a fresh machine restores a manifest


def meta_key(namespace: str) -> str:
    """The catalog meta key of a namespace's generation record."""
    return f"keygen:{namespace}"


def load_state(catalog: Catalog, namespace: str) -> dict[str, Any]:
    """The namespace's generation record (generation 0, no rotation, if none)."""
    raw = catalog.get_meta(meta_key(namespace))
    if raw is None:
        return {"generation": 0, "rotating": None, "retired": []}
    try:
        state = json.loads(raw)
        int(state["generation"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LocalStoreError(f"key generation record of {namespace!r} is corrupt") from exc
    return dict(state)


def save_state(catalog: Catalog, namespace: str, state: dict[str, Any]) -> None:
    """Write the namespace's generation record (inside the caller's transaction)."""
    catalog.set_meta(meta_key(namespace), json.dumps(state, sort_keys=True))


def current_generation(catalog: Catalog, namespace: str) -> int:
    """The key generation a namespace uses now (0 unless it was rotated)."""
    return int(load_state(catalog, namespace)["generation"])


def rotation_in_progress(catalog: Catalog, namespace: str) -> bool:
    """Whether a rotation of ``namespace`` began and has not completed."""
    return load_state(catalog, namespace).get("rotating") is not None


def reseal_unfinished(catalog: Catalog, namespace: str) -> bool:
    """Whether a rotation of ``namespace`` began and has not re-sealed every memory yet:
    a manifest now would list blobs of the previous generation (_log/publishing.py
    refuses, RotationIncomplete; sync finishes the rotation first)."""
    rotating = load_state(catalog, namespace).get("rotating")
    return rotating is not None and not rotating.get("resealed")
