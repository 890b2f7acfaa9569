"""Sharing by grant: copies of some memories, sealed for exactly one recipient.

``share`` takes memories of one of your namespaces and publishes **one blob**
holding copies of them, sealed to the recipient's public key:

* recipient key: the recipient namespace's Ed25519 public key (what
  ``walrus-mem keys export-public`` / ``keys new-agent`` print), converted to
  X25519 the standard way (libsodium ``crypto_sign_ed25519_pk_to_curve25519``);
* sealing: a libsodium sealed box (``crypto_box_seal``: an ephemeral X25519
  key, XSalsa20-Poly1305) via PyNaCl's :class:`nacl.public.SealedBox`. Only the
  holder of the recipient's private key opens it, and the sender's own key
  cannot open it again afterwards;
* authenticity: inside the box, the sender's namespace signing key signs the
  payload, which names the sender's public key and the recipient's, so the
  recipient knows who shared and that it was meant for it.

Blob bytes: ``b"WMGRANT1"`` followed by the sealed box. Nothing else is in
clear: not the sender, not the recipient, not the count. The signed JSON carries a
``pad`` of spaces that brings signature + JSON to a size bucket of the envelope
(256 B, 512 B, ... 1 MiB, then whole MiB), so the blob's length tells only the
bucket, as a fact blob's does, not the length of the shared text.

The *grant reference* is ``wmgrant1:<blob id>:<BLAKE2b-256 of the blob, hex>``.
The digest lets the recipient refuse bytes an aggregator swapped. Give the
reference to the recipient over any channel: it is not a secret on its own
(without the recipient's key it opens nothing), but it does say a blob exists.

``accept`` opens the grant with the recipient namespace's key and remembers
the copies in that namespace, sealed again under its own key (with metadata
``shared_from`` = the sender's fingerprint and ``grant`` = the reference). It
is idempotent: accepting the same grant twice stores nothing new.

What revocation can mean on public, immutable storage: docs/keys.md.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

import nacl.exceptions
import nacl.hash
import nacl.public
import nacl.signing
from nacl.encoding import RawEncoder
from pydantic import BaseModel, ConfigDict

from .._walrus.blobio import read_checked
from .._walrus.publish_check import require_read_back, verify_published
from .._walrus.retry import call_deadline
from ..envelope import bucket_size
from ..errors import GrantError, InvalidInput, MalformedKey
from ..keys import NamespaceKeys, fingerprint_of, short_fingerprint
from .inputs import validate_memory_id

if TYPE_CHECKING:
    from ..config import Settings
    from ..models import MemoryRecord, RememberManyResult
    from ..walrus import WalrusClient

__all__ = ["GRANT_MAGIC", "Grant", "GrantHost", "accept", "parse_public_key", "parse_reference",
           "share"]



class GrantHost(Protocol):
    """What sharing and accepting use of a Memory: its public methods only."""

    settings: Settings

    @property
    def walrus(self) -> WalrusClient: ...

    def keys_for(self, namespace: str | None = None) -> NamespaceKeys: ...

    def derive_keys(self, namespace: str, *, generation: int | None = None
                    ) -> NamespaceKeys: ...

    def get(self, memory_id: str, *, namespace: str | None = None,
            verify: bool = False) -> MemoryRecord: ...

    def remember_many(self, items: Sequence[str | bytes | Mapping[str, Any]], *,
                      namespace: str | None = None,
                      idempotency_key: str | None = None) -> RememberManyResult: ...


GRANT_MAGIC: Final = b"WMGRANT1"
REFERENCE_PREFIX: Final = "wmgrant1"
MAX_GRANT_MEMORIES: Final = 1000
_FORMAT: Final = 1
_SIGNATURE: Final = 64  # Ed25519, prepended by SigningKey.sign


class Grant(BaseModel):
    """A published grant: give ``reference`` to the recipient."""

    model_config = ConfigDict(frozen=True)

    reference: str
    blob_id: str
    count: int
    recipient_fingerprint: str
    sender_fingerprint: str
    end_epoch: int | None = None


def parse_public_key(text: str | bytes) -> nacl.signing.VerifyKey:
    """A recipient's Ed25519 public key: 32 bytes, or 64 hex characters, or base64."""
    raw: bytes | None = None
    if isinstance(text, bytes | bytearray):
        raw = bytes(text)
    elif isinstance(text, str):
        s = text.strip()
        try:
            raw = bytes.fromhex(s) if len(s) == 64 else base64.b64decode(
                s + "=" * (-len(s) % 4), altchars=b"-_" if ("-" in s or "_" in s) else None,
                validate=True)
        except (ValueError, binascii.Error):
            raw = None
    if raw is None or len(raw) != 32:
        raise MalformedKey("a recipient public key is 32 bytes: 64 hex characters or base64 "
                           "(walrus-mem keys export-public prints it as verify_key)")
    try:
        key = nacl.signing.VerifyKey(raw)
        key.to_curve25519_public_key()  # refuses points that are not valid Ed25519 keys
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise MalformedKey("the recipient public key is not a valid Ed25519 public key") from None
    return key


def _digest(data: bytes) -> str:
    return bytes(nacl.hash.blake2b(data, digest_size=32, encoder=RawEncoder)).hex()


def parse_reference(reference: str) -> tuple[str, str]:
    """``(blob_id, digest)`` of a grant reference, else :class:`GrantError`."""
    parts = reference.strip().split(":") if isinstance(reference, str) else []
    if len(parts) != 3 or parts[0] != REFERENCE_PREFIX or not parts[1] \
            or len(parts[2]) != 64 or any(c not in "0123456789abcdef" for c in parts[2]):
        raise GrantError(f"not a grant reference: expected {REFERENCE_PREFIX}:<blob id>:<digest>")
    return parts[1], parts[2]


def share(memory: GrantHost, memory_ids: list[str] | tuple[str, ...] | str, *,
          to: str | bytes, namespace: str | None = None) -> Grant:
    """Seal copies of ``memory_ids`` (of ``namespace``) for the holder of ``to`` and
    publish them as one blob. Reading them needs this namespace's key (access check)."""
    recipient = parse_public_key(to)
    ids = [memory_ids] if isinstance(memory_ids, str) else list(memory_ids)
    if not ids or len(ids) > MAX_GRANT_MEMORIES:
        raise InvalidInput(f"share needs 1 to {MAX_GRANT_MEMORIES} memory ids")
    ids = list(dict.fromkeys(validate_memory_id(i) for i in ids))
    keys = memory.keys_for(namespace)
    records = [memory.get(mid, namespace=keys.namespace) for mid in ids]  # checked reads
    payload = {
        "format": _FORMAT,
        "kind": "grant",
        "sender": keys.verify_key.hex(),
        "recipient": bytes(recipient).hex(),
        "at": time.time(),
        "memories": [
            {"id": r.id, "text": r.text, "metadata": r.metadata, "category": r.category,
             "importance": r.importance, "created_at": r.created_at.timestamp()}
            for r in records
        ],
    }
    signed = keys.signing_key.sign(_padded_json(payload))
    box = nacl.public.SealedBox(recipient.to_curve25519_public_key())
    blob = GRANT_MAGIC + box.encrypt(bytes(signed))
    policy = memory.settings.verify_publish
    if policy != "none":
        require_read_back(memory.walrus, f"verify_publish = {policy!r}")
    s = memory.settings  # the store and its read-back, budgeted apart (as fact batches)
    with call_deadline(s.publish_deadline + s.read_back_deadline):
        stored = memory.walrus.store_blob(blob, deadline=s.publish_deadline)
        # never hand out a reference to a blob a lying publisher did not store
        verify_published(memory.walrus, policy, stored, {"grant": blob},
                         deadline=s.read_back_deadline)
    return Grant(
        reference=f"{REFERENCE_PREFIX}:{stored.blob_id}:{_digest(blob)}",
        blob_id=stored.blob_id,
        count=len(records),
        recipient_fingerprint=short_fingerprint(fingerprint_of(bytes(recipient))),
        sender_fingerprint=keys.fingerprint,
        end_epoch=stored.end_epoch,
    )


def _padded_json(payload: dict[str, Any]) -> bytes:
    """The payload's JSON with a ``pad`` of spaces, so that signature + JSON fill a size
    bucket of the envelope (envelope.bucket_size): the blob's length says only the
    bucket, not the shared text's length. Readers ignore ``pad`` (older ones too)."""
    unpadded = len(json.dumps({**payload, "pad": ""}, sort_keys=True).encode("utf-8"))
    spaces = bucket_size(_SIGNATURE + unpadded) - _SIGNATURE - unpadded
    return json.dumps({**payload, "pad": " " * spaces}, sort_keys=True).encode("utf-8")


def open_grant(memory: GrantHost, reference: str, *, namespace: str | None = None
               ) -> dict[str, Any]:
    """Fetch and open a grant with ``namespace``'s key; return its verified payload."""
    blob_id, digest = parse_reference(reference)
    keys = memory.keys_for(namespace)

    def check(data: bytes) -> None:
        if not hmac.compare_digest(_digest(data), digest):
            raise InvalidInput("grant blob does not match its reference")

    data = read_checked(memory.walrus, check, blob_id=blob_id)
    if not data.startswith(GRANT_MAGIC):
        raise GrantError("the referenced blob is not a walrus_mem grant")
    signed: bytes | None = None
    # A grant sealed before a rotation of this namespace is opened by an older generation.
    for generation in range(keys.generation, -1, -1):
        candidate = keys if generation == keys.generation else memory.derive_keys(
            keys.namespace, generation=generation)
        box = nacl.public.SealedBox(candidate.signing_key.to_curve25519_private_key())
        try:
            signed = box.decrypt(data[len(GRANT_MAGIC):])
        except nacl.exceptions.CryptoError:
            continue
        keys = candidate
        break
    if signed is None:
        raise GrantError(
            f"this grant is not sealed to namespace {keys.namespace!r}'s key "
            f"(fingerprint {keys.fingerprint}): only its recipient can open it"
        )
    try:
        body = json.loads(signed[64:])
        sender = nacl.signing.VerifyKey(bytes.fromhex(body["sender"]))
        sender.verify(signed)
    except (ValueError, KeyError, TypeError, nacl.exceptions.CryptoError):
        raise GrantError("the grant's sender signature does not verify") from None
    if not isinstance(body, dict) or body.get("kind") != "grant" \
            or body.get("format") != _FORMAT or not isinstance(body.get("memories"), list):
        raise GrantError("the grant's payload is not a walrus_mem grant (format 1)")
    if body.get("recipient") != keys.verify_key.hex():
        raise GrantError("the grant was signed for another recipient (forwarded?)")
    return body


def accept(memory: GrantHost, reference: str, *, namespace: str | None = None
           ) -> RememberManyResult:
    """Open a grant with ``namespace``'s key and remember its memories there."""
    body = open_grant(memory, reference, namespace=namespace)
    sender_fpr = short_fingerprint(fingerprint_of(bytes.fromhex(body["sender"])))
    items: list[dict[str, Any]] = []
    for m in body["memories"]:
        if not isinstance(m, dict) or not isinstance(m.get("text"), str):
            raise GrantError("the grant holds a malformed memory")
        metadata = dict(m.get("metadata") or {})
        metadata.update({"shared_from": sender_fpr, "grant": reference.strip()})
        item: dict[str, Any] = {"text": m["text"], "metadata": metadata}
        if m.get("category") is not None:
            item["category"] = m["category"]
        if m.get("importance") is not None:
            item["importance"] = m["importance"]
        items.append(item)
    _, digest = parse_reference(reference)
    return memory.remember_many(items, namespace=namespace,
                                idempotency_key=f"grant-{digest[:48]}")
