"""The one exception tree of walrus_mem.

Every error the library raises on purpose derives from :class:`WalrusMemError`.
Where an error is also naturally a builtin (bad value, missing key), it inherits
from that builtin too, so ``except ValueError`` keeps working (as in PyNaCl).

Lower-layer errors (httpx, PyNaCl, usearch, sqlite3) are re-raised as one of
these with ``raise ... from exc``. Messages never contain key material.

    WalrusMemError
    ├── ConfigError (ValueError)
    │   ├── PlaceholderError            unset / empty / malformed ${VAR}
    │   ├── InvalidNamespace
    │   └── UnknownAgent               an agent name no config or namespace knows
    ├── KeyMaterialError (ValueError)
    │   ├── MalformedKey               wrong length / encoding
    │   ├── KeyNotFound                no source produced a key
    │   ├── KeyringUnavailable         no usable keyring backend
    │   ├── InsecureKeyFile            group/other can read the key file, or another user owns it
    │   ├── KeyExists                  refusing to overwrite a key
    │   ├── AccessDenied (PermissionError)  configured key is not the namespace's key
    │   └── GrantError                 a grant this key cannot open / not a grant
    ├── EnvelopeError
    │   ├── InvalidEnvelope            not a walrus_mem envelope / truncated / malformed record
    │   ├── UnsupportedVersion         unknown version or suite
    │   ├── WrongNamespace             sealed for another key
    │   ├── TamperedBlob               signature or AEAD check failed
    │   └── BlobMismatch               valid blob, but not the expected memory
    ├── PayloadTooLarge (ValueError)   plaintext or body over a limit
    ├── InvalidInput (ValueError)      empty text, bad filter, bad argument
    │   └── InvalidSessionKey          a session key with no one-to-one namespace
    ├── MemoryNotFound (LookupError)   unknown memory id
    ├── StorageError                   anything on the Walrus wire
    │   ├── PublisherError
    │   │   ├── PublisherUnavailable   network error / 5xx after retries
    │   │   ├── InsufficientConfirmations
    │   │   ├── StoreFailed            200-with-error / markedInvalid
    │   │   └── AuthenticationFailed
    │   ├── AggregatorError
    │   │   └── AggregatorUnavailable
    │   ├── BlobNotFound (LookupError)
    │   ├── ForbiddenBlob              451
    │   ├── RateLimited                429; .retry_after seconds
    │   ├── BodyTooLarge (also PayloadTooLarge)  413 / over the 10 MiB publisher limit
    │   ├── InvalidResponse            a body that does not parse / lies
    │   ├── BadRequest                 400 the server will never accept
    │   ├── VerificationFailed         no aggregator served bytes that verify
    │   └── NetworkResetPending        a wiped network's lost memories not stored again yet
    ├── LocalStoreError
    │   ├── ModelMismatch              index built with another embedding model
    │   ├── IndexCorrupt               unreadable vector index file
    │   ├── CatalogCorrupt             unreadable / inconsistent SQLite catalog
    │   ├── DataDirBusy                repair needs the data dir no other process has open
    │   └── InsecureDataDir            a data/state dir (or a file in it) another user could change
    ├── LogError                       the namespace log refuses (docs/sync.md)
    │   ├── InvalidHead (ValueError)   malformed head reference / bare blob id never seen here
    │   │   └── LegacyManifest         a format-1 manifest id given without allow_legacy
    │   ├── HeadMismatch               bytes served for a head are not the manifest it names
    │   ├── StaleManifest              a head older than one this data dir has seen (rollback)
    │   │   └── StaleDataDir           a rolled-back data dir would reuse its own seq
    │   ├── ForkedHead                 a head sharing no history with this data dir's
    │   ├── RestoreIncomplete          an interrupted restore / pull: resume it first
    │   └── RotationIncomplete         a key rotation's re-sealing is unfinished: finish it first
    ├── EpochUnknown                   the current Walrus epoch cannot be told (expiring)
    ├── EmbeddingError                 model cannot be loaded / produced bad vectors
    │   └── MissingExtra (ImportError)  the embedder chosen needs an extra not installed
    ├── ReadOnlySession (PermissionError)  subagent tried to write
    ├── NamespaceDenied (PermissionError)  a call named a namespace it is not bound to
    └── UnsafeContent (ValueError)     content refused by safety filters
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "AggregatorError",
    "AggregatorUnavailable",
    "AuthenticationFailed",
    "BadRequest",
    "BlobMismatch",
    "BlobNotFound",
    "BodyTooLarge",
    "CatalogCorrupt",
    "ConfigError",
    "DataDirBusy",
    "EmbeddingError",
    "EnvelopeError",
    "EpochUnknown",
    "ForbiddenBlob",
    "ForkedHead",
    "GrantError",
    "HeadMismatch",
    "IndexCorrupt",
    "InsecureDataDir",
    "InsecureKeyFile",
    "InsufficientConfirmations",
    "InvalidEnvelope",
    "InvalidHead",
    "InvalidInput",
    "InvalidNamespace",
    "InvalidResponse",
    "InvalidSessionKey",
    "KeyExists",
    "KeyMaterialError",
    "KeyNotFound",
    "KeyringUnavailable",
    "LegacyManifest",
    "LocalStoreError",
    "LogError",
    "MalformedKey",
    "MemoryNotFound",
    "MissingExtra",
    "ModelMismatch",
    "NamespaceDenied",
    "NetworkResetPending",
    "PayloadTooLarge",
    "PlaceholderError",
    "PublisherError",
    "PublisherUnavailable",
    "RateLimited",
    "ReadOnlySession",
    "RestoreIncomplete",
    "RotationIncomplete",
    "StaleDataDir",
    "StaleManifest",
    "StorageError",
    "StoreFailed",
    "TamperedBlob",
    "UnknownAgent",
    "UnsafeContent",
    "UnsupportedVersion",
    "VerificationFailed",
    "WalrusMemError",
    "WrongNamespace",
]


class WalrusMemError(Exception):
    """Root of every error walrus_mem raises on purpose."""


# -- configuration -----------------------------------------------------------


class ConfigError(WalrusMemError, ValueError):
    """The configuration cannot be parsed or is inconsistent."""


class PlaceholderError(ConfigError):
    """A ``${VAR}`` placeholder is malformed, or names an unset/empty variable.

    ``variable`` holds the variable's *name*; its value is never included.
    """

    def __init__(self, message: str, *, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


class InvalidNamespace(ConfigError):
    """A namespace name breaks the rule: 1-64 chars of [a-z0-9_-], first a letter or digit."""


class UnknownAgent(ConfigError):
    """An agent name that is neither configured nor an existing namespace.

    ``known`` lists the names that would have been accepted.
    """

    def __init__(self, message: str, known: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.known = known


# -- keys --------------------------------------------------------------------


class KeyMaterialError(WalrusMemError, ValueError):
    """A key could not be found, parsed, stored or trusted."""


class MalformedKey(KeyMaterialError):
    """Key material has the wrong length or encoding."""


class KeyNotFound(KeyMaterialError):
    """No key source (argument, config, env, keyring, key file) produced a key."""


class KeyringUnavailable(KeyMaterialError):
    """No usable OS keyring backend (headless machine, or the null backend)."""


class InsecureKeyFile(KeyMaterialError):
    """A key file is readable by group or others; refused like ssh does."""


class KeyExists(KeyMaterialError):
    """Refusing to overwrite an existing key without force."""


class AccessDenied(KeyMaterialError, PermissionError):
    """The configured key is not the key this namespace was created with: no plaintext.

    Local access control between agents of one trusting OS user; separate OS
    users or separate 0700 data dirs are the isolation boundary.
    """


class GrantError(KeyMaterialError):
    """A grant cannot be opened by this namespace's key, or is not a valid grant."""


# -- envelope ----------------------------------------------------------------


class EnvelopeError(WalrusMemError):
    """A sealed blob could not be opened. Never carries partial plaintext."""


class InvalidEnvelope(EnvelopeError):
    """Bytes are not a walrus_mem envelope, are truncated or extended, or an
    authentic envelope holds a malformed record."""


class UnsupportedVersion(EnvelopeError):
    """Envelope version or cipher suite is unknown to this build."""


class WrongNamespace(EnvelopeError):
    """Envelope was sealed under another namespace's key."""


class TamperedBlob(EnvelopeError):
    """Signature or authenticated decryption failed: the bytes were modified."""


class BlobMismatch(EnvelopeError):
    """A valid envelope of this namespace, but for another memory than expected."""


# -- input -------------------------------------------------------------------


class PayloadTooLarge(WalrusMemError, ValueError):
    """A payload exceeds a configured or protocol size limit."""


class InvalidInput(WalrusMemError, ValueError):
    """An argument is empty, malformed or out of range."""


class MemoryNotFound(WalrusMemError, LookupError):
    """No memory with that id in this namespace."""


class UnsafeContent(WalrusMemError, ValueError):
    """Content was refused by the safety filters (secret, injection)."""


class ReadOnlySession(WalrusMemError, PermissionError):
    """A read-only (subagent) session attempted a write."""


class NamespaceDenied(WalrusMemError, PermissionError):
    """A tool call named a namespace other than the one its host bound it to."""


class InvalidSessionKey(InvalidInput):
    """A session key whose agent name cannot be mapped one-to-one to a namespace."""


# -- storage (Walrus wire) ---------------------------------------------------


class StorageError(WalrusMemError):
    """A publisher or aggregator request failed.

    ``status_code`` is the HTTP status when one was received; ``reason`` the
    AIP-193 reason (e.g. ``BLOB_NOT_FOUND``) when the body carried one.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.reason = reason


class PublisherError(StorageError):
    """The publisher refused or failed a store."""


class PublisherUnavailable(PublisherError):
    """The publisher could not be reached or kept failing until the deadline."""


class InsufficientConfirmations(PublisherError):
    """504 INSUFFICIENT_CONFIRMATIONS: storage nodes did not confirm in time."""


class StoreFailed(PublisherError):
    """The store response says it failed (200 with ``error``, or ``markedInvalid``)."""


class AuthenticationFailed(PublisherError):
    """The publisher rejected the bearer token."""


class AggregatorError(StorageError):
    """An aggregator read failed."""


class AggregatorUnavailable(AggregatorError):
    """No aggregator could be reached, or all kept failing until the deadline."""


class BlobNotFound(StorageError, LookupError):
    """The blob (or quilt patch) does not exist or has expired."""


class ForbiddenBlob(StorageError):
    """451: the blob is blocked by the operator."""


class RateLimited(StorageError):
    """429 after retries; ``retry_after`` is the server's hint in seconds, if any."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status_code: int | None = 429,
        reason: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, reason=reason)
        self.retry_after = retry_after


class BodyTooLarge(PayloadTooLarge, StorageError):
    """A body over the publisher/aggregator limit: 413, 403 BLOB_TOO_LARGE, or the
    client's own pre-check (then ``status_code`` is None). Also a PayloadTooLarge."""


class InvalidResponse(StorageError):
    """A response body that does not parse or does not match the request."""


class BadRequest(StorageError, ValueError):
    """A 4xx the server will never accept (malformed request, bad parameters)."""


class VerificationFailed(StorageError):
    """No aggregator returned bytes that passed the caller's verification."""


# -- local store -------------------------------------------------------------


class NetworkResetPending(StorageError):
    """The network was wiped or its epochs reset (network_reset.py) and memories of this
    namespace it lost could not be stored again yet (the publisher or the read-back
    failed): no manifest is published before they are, since it would list them at
    lost locations or leave them out; the next ``sync`` retries (docs/sync.md). Also
    while the head last found served answers 404 and the blobs beside it cannot be read
    at all: a lost network and a lagging aggregator cannot be told apart yet."""


class LocalStoreError(WalrusMemError):
    """The local catalog or vector index is unusable."""


class ModelMismatch(LocalStoreError):
    """The index was built with a different embedding model or dimension."""


class IndexCorrupt(LocalStoreError):
    """The vector index file cannot be read."""


class CatalogCorrupt(LocalStoreError):
    """The SQLite catalog cannot be read or is inconsistent."""


class DataDirBusy(LocalStoreError):
    """Another process has the data dir open (``holders``: its pids and commands), so it
    cannot be repaired now; or a repair holds it, so it cannot be opened."""

    def __init__(self, message: str, holders: list[str] | None = None) -> None:
        super().__init__(message)
        self.holders = list(holders or [])


class InsecureDataDir(LocalStoreError):
    """A data dir or state dir that another user could change: owned by someone else,
    writable by group or others (itself, a parent without the sticky bit, or a file in
    it), or holding a symlink that leaves it. Refused like ssh's StrictModes; ``path``
    is the directory, the message names each problem and its fix."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


# -- namespace log -------------------------------------------------------------


class LogError(WalrusMemError):
    """The namespace log (manifests and head references) refuses an operation."""


class InvalidHead(LogError, ValueError):
    """A malformed head reference, or a bare blob id this data dir has never seen
    (a bare id cannot be checked: pass the full ``<blob id>.<seq>.<digest>``)."""


class LegacyManifest(InvalidHead):
    """A format-1 manifest (from before head references) given without ``allow_legacy``.

    Format 1 binds no digest or seq to the blob id, so a rollback to an older
    manifest of the namespace cannot be detected; ``allow_legacy=True``
    (``--legacy``) restores it anyway, as a root of no history."""


class HeadMismatch(LogError):
    """The bytes served for a head reference are not the manifest it names."""


class StaleManifest(LogError):
    """A manifest older than one this data dir has already seen.

    Raised for a head that is an ancestor of a seen head (pass
    ``allow_stale=True`` to read it anyway), and when an aggregator serves an
    older manifest of the namespace in place of the one a head names (a
    rollback). ``served_seq`` / ``expected_seq`` say which.
    """

    def __init__(self, message: str, *, served_seq: int | None = None,
                 expected_seq: int | None = None) -> None:
        super().__init__(message)
        self.served_seq = served_seq
        self.expected_seq = expected_seq


class StaleDataDir(StaleManifest):
    """This data dir would publish a manifest whose seq its own writer id already used:
    its state is older than a manifest it published (a whole data dir restored from a
    backup, or copied) and that manifest could not be merged first. Publishing would
    fork the namespace under one writer id and drop what the newer manifest holds."""


class ForkedHead(LogError):
    """A head whose history shares no manifest with this data dir's history of the
    namespace (another start of the same namespace); ``allow_unrelated=True`` merges it."""


class RestoreIncomplete(LogError):
    """A restore or pull of this namespace was interrupted: the local state lacks part
    of a head it started to merge, so no manifest is published until ``restore`` resumes."""


class RotationIncomplete(LogError):
    """A key rotation of this namespace began and its re-sealing is unfinished: some of
    its memories are still sealed under the previous generation, so no manifest is
    published until ``walrus-mem keys rotate`` (``Memory.rotate_key``, or ``sync``)
    finishes it (docs/keys.md)."""


class EpochUnknown(WalrusMemError):
    """The epoch clock cannot tell the current Walrus epoch closely enough to say what has
    expired: no store answer seen recently and no known epoch length (see expiry.py).
    Set ``epoch_seconds``, or probe the network (``expiring(probe=True)``)."""


class EmbeddingError(WalrusMemError):
    """The embedding model could not be loaded or returned unusable vectors."""


class MissingExtra(EmbeddingError, ImportError):
    """The embedder chosen needs packages a core install leaves out; ``extra`` names the
    extra that brings them (``pip install 'walrus-mem[torch]'``)."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra
