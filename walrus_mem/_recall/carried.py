"""Vectors that travel sealed (issue 28): a fact's embedding inside its envelope.

A memory's vector is a pure function of its text and the model, so the machine that
computed it seals it into the fact (``"vec"``, docs/envelope-format.md) and a restore
or pull on another machine inserts it as it is, instead of re-embedding the text. The
vector goes as the index stores it (little-endian float16, raw bytes after the
envelope's JSON; base64 inside the JSON in facts sealed before), with the model id and a
digest of the model's files: a reader uses it only when both, and the dimension, equal
its own embedder's; otherwise it re-embeds (and says so). It is inside the AEAD like
the text: storage sees nothing of it (only the size bucket, which every fact of the
model shares).

An embedder names its weights by a ``weights_digest`` attribute (a string). One
without it (a custom embedder) seals no vector: nothing could tell its vectors from
another build's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import nacl.bindings
import nacl.exceptions
import numpy as np
import numpy.typing as npt

from ..envelope import HEADER_SIZE, SIGNATURE_SIZE, VERSION_ATTACHED, open_own_copy
from ..errors import EnvelopeError, WalrusMemError
from ..keys import NamespaceKeys

__all__ = ["FIELD", "SealedVectors", "VectorIdentity", "carried_bytes", "carried_vector",
           "identity", "mismatch", "vector_field", "weights_digest_of"]

log = logging.getLogger(__name__)

FIELD: Final = "vec"
DTYPE: Final = "f16"
_DIGEST_CACHE: Final = "weights-digests.json"
_SKIPPED_FILES: Final = frozenset({"README.md", ".gitattributes"})
_V2_MIN: Final = HEADER_SIZE + 4 + 256 + 16 + SIGNATURE_SIZE  # the smallest version 2


@dataclass(frozen=True)
class VectorIdentity:
    """What makes two machines' vectors of one text the same: model, its files, dim."""

    model: str
    weights: str
    dim: int


def identity(embedder: object) -> VectorIdentity | None:
    """The embedder's vector identity, or None when it names no weights digest."""
    digest = getattr(embedder, "weights_digest", None)
    model = getattr(embedder, "model_id", None)
    if not isinstance(digest, str) or not digest or not isinstance(model, str):
        return None
    try:
        dim = int(getattr(embedder, "dim"))  # noqa: B009 (a property: may load the model)
    except (TypeError, ValueError, AttributeError):
        return None
    return VectorIdentity(model, digest, dim)


def vector_field(ident: VectorIdentity, vector: npt.NDArray[Any] | bytes) -> dict[str, Any]:
    """The ``vec`` object of a fact record: ``vector`` as float16 (an f32 array, or the
    float16 bytes the catalog stores), its ``data`` as raw bytes: the envelope carries
    them after the padded JSON (version 2), 768 bytes for 384 values where base64 in
    the JSON took 1,024 and doubled a short fact's bucket."""
    raw = vector if isinstance(vector, bytes) else np.asarray(vector, dtype="<f2").tobytes()
    if len(raw) != 2 * ident.dim:
        raise ValueError(f"vector of {len(raw)} bytes for dim {ident.dim}")
    return {"model": ident.model, "weights": ident.weights, "dim": ident.dim, "dtype": DTYPE,
            "data": bytes(raw)}


def carried_vector(record: Mapping[str, Any], ident: VectorIdentity | None) -> bytes | None:
    """The float16 bytes of the vector ``record`` carries, when it was made by the same
    model (id, weights digest, dim) as ``ident`` and is well formed; else None (the
    caller re-embeds). Never raises: a bad ``vec`` is only a missed shortcut."""
    vec = record.get(FIELD)
    if ident is None or not isinstance(vec, Mapping):
        return None
    if (vec.get("model") != ident.model or vec.get("weights") != ident.weights
            or vec.get("dim") != ident.dim or vec.get("dtype") != DTYPE):
        return None
    data = vec.get("data")
    if isinstance(data, bytes):  # envelope version 2: the raw float16 bytes
        raw = data
    elif isinstance(data, str):  # sealed before: base64 inside the JSON
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return None
    else:
        return None
    if len(raw) != 2 * ident.dim:
        return None
    values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    if not np.isfinite(values).all():
        return None
    if not values.any():  # an embedder never yields the zero vector (check_vectors)
        return None
    return raw


def carried_bytes(record: Mapping[str, Any]) -> bytes | None:
    """The float16 bytes of the vector ``record`` carries, whatever made it (raw, or the
    base64 of facts sealed before); None when it carries none or a malformed one."""
    vec = record.get(FIELD)
    if not isinstance(vec, Mapping) or vec.get("dtype") != DTYPE:
        return None
    data = vec.get("data")
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def _own_attachment(keys: NamespaceKeys, sealed: bytes) -> bytes | None:
    """The vector of a version 2 envelope as ``seal`` writes a fact carrying it (the
    canonical JSON begins ``{"#bytes":[[["vec","data"],A]],``: its only attachment is
    the vector), after the AEAD alone: about 8 µs where parsing the record takes 50.
    None for anything else (the caller opens it the general way). The AEAD
    authenticates the whole plaintext, so its bytes are the sealer's."""
    if len(sealed) < _V2_MIN or sealed[4] != VERSION_ATTACHED:
        return None
    (size,) = struct.unpack(">I", sealed[HEADER_SIZE:HEADER_SIZE + 4])
    header = bytes(sealed[:HEADER_SIZE + 4])
    try:
        plain = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
            bytes(sealed[HEADER_SIZE + 4:-SIGNATURE_SIZE]), header, header[22:46],
            keys.sealing_key)
    except nacl.exceptions.CryptoError:
        return None
    prefix = b'{"#bytes":[[["vec","data"],%d]],' % size
    if size == 0 or len(plain) < 4 + len(prefix) + size or \
            plain[4:4 + len(prefix)] != prefix:
        return None
    return plain[len(plain) - size:]


class SealedVectors:
    """The catalog's source for vectors it does not keep itself (issue 28 item 4): a
    memory's float16 vector read from its own sealed copy, opened with the namespace's
    key of the generation that sealed it (picked by the envelope's fingerprint, current
    first, then a rotation's next one, then older ones). ``derive(namespace,
    generation=None)`` gives a namespace's keys (KeyChain.derive_keys)."""

    def __init__(self, derive: Callable[..., NamespaceKeys]) -> None:
        self._derive = derive
        self._keys: dict[tuple[str, bytes], NamespaceKeys] = {}

    def __call__(self, namespace: str, sealed: bytes) -> bytes | None:
        """The vector ``sealed`` carries, or None (no vector, no key, does not open)."""
        fingerprint = bytes(sealed[6:22])
        keys = self._keys.get((namespace, fingerprint)) or self._find(namespace, fingerprint)
        if keys is None:
            return None
        fast = _own_attachment(keys, sealed)
        if fast is not None:
            return fast
        try:
            return carried_bytes(open_own_copy(keys, sealed))
        except EnvelopeError:
            return None

    def holds_key(self, namespace: str, sealed: bytes) -> bool:
        """Whether a key of ``namespace`` with ``sealed``'s fingerprint is known here (no
        decryption): a caller that opened ``sealed`` itself and took its vector knows
        this source would read the same bytes back (``stored_vector(carried=True)``)."""
        fingerprint = bytes(sealed[6:22])
        return (self._keys.get((namespace, fingerprint))
                or self._find(namespace, fingerprint)) is not None

    def _find(self, namespace: str, fingerprint: bytes) -> NamespaceKeys | None:
        try:
            current = self._derive(namespace)
            tried = [current.generation, current.generation + 1,
                     *range(current.generation - 1, -1, -1)]
            for generation in tried:
                keys = current if generation == current.generation else self._derive(
                    namespace, generation=generation)
                if keys.fingerprint_bytes == fingerprint:
                    self._keys[(namespace, fingerprint)] = keys
                    return keys
        except WalrusMemError as exc:  # no key here for that namespace
            log.debug("no key to read %s's sealed vectors (%s)", namespace, type(exc).__name__)
        return None


def mismatch(record: Mapping[str, Any], ident: VectorIdentity | None) -> str:
    """Why ``record``'s vector cannot be used (for the re-embedding message)."""
    vec = record.get(FIELD)
    if not isinstance(vec, Mapping):
        return "no vector (sealed before vectors travelled, or by an embedder naming no weights)"
    if ident is None:
        return "this Memory's embedder names no weights digest"
    if vec.get("model") != ident.model or vec.get("dim") != ident.dim:
        return f"made by {vec.get('model')} (dim {vec.get('dim')})"
    if vec.get("weights") != ident.weights:
        return f"made by other weights of {ident.model}"
    return "malformed vector"


def _model_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*")
                  if p.is_file() and p.name not in _SKIPPED_FILES
                  and not any(part.startswith(".") for part in p.relative_to(directory).parts))


def weights_digest_of(directory: Path, cache_dir: Path | None = None) -> str:
    """BLAKE2b-128 over a model directory's files (relative path, size and bytes of
    each, sorted; README and dot files left out), cached by the files' sizes and
    mtimes in ``cache_dir`` so only the first call reads the weights."""
    files = _model_files(directory)
    stamp = hashlib.blake2b(digest_size=16)
    for path in files:
        st = path.stat()
        stamp.update(f"{path.relative_to(directory)}\0{st.st_size}\0{st.st_mtime_ns}\0"
                     .encode())
    key = f"{directory.resolve()}:{stamp.hexdigest()}"
    cache = None if cache_dir is None else cache_dir / _DIGEST_CACHE
    known: dict[str, str] = {}
    if cache is not None:
        try:
            loaded = json.loads(cache.read_text())
            known = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) \
                else {}
        except (OSError, ValueError):
            known = {}
        if key in known:
            return known[key]
    digest = hashlib.blake2b(digest_size=16, person=b"walrusmem.model")
    for path in files:
        rel = str(path.relative_to(directory)).encode()
        digest.update(len(rel).to_bytes(4, "big") + rel)
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    value = digest.hexdigest()
    if cache is not None:
        known[key] = value
        try:
            cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(known, sort_keys=True))
            os.replace(tmp, cache)
        except OSError as exc:  # a read-only cache only costs the next process a re-read
            log.debug("weights digest not cached (%s)", type(exc).__name__)
    return value
