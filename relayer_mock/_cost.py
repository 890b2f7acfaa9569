"""Encoded length and storage cost, by the RS2 formula for 1000 shards (spec section 7).

Every blob up to 445,556 bytes encodes to 66,034,000 bytes (63 storage units of 1 MiB), so a
1-byte blob costs as much as a 400 KiB one: the reason small facts are batched into quilts.
"""

from __future__ import annotations

N_SHARDS = 1000
PRIMARY_SOURCE_SYMBOLS = 334
SECONDARY_SOURCE_SYMBOLS = 667
SOURCE_SYMBOLS = PRIMARY_SOURCE_SYMBOLS * SECONDARY_SOURCE_SYMBOLS  # 222,778
MAX_SYMBOL_SIZE = 65534
HASH_BYTES = 32
METADATA_BYTES = N_SHARDS * (N_SHARDS * 2 * HASH_BYTES + HASH_BYTES)  # 64,032,000
STORAGE_UNIT = 1024 * 1024
MAX_BLOB_SIZE = SOURCE_SYMBOLS * MAX_SYMBOL_SIZE  # about 13.6 GiB

# FROST per storage unit (1 MiB of encoded length) per epoch, and per unit per write. The
# defaults are the `walrus info` example in the Walrus docs (0.0001 WAL per unit per epoch,
# 20,000 FROST per write); real prices are set on chain and change.
DEFAULT_STORAGE_PRICE = 100_000
DEFAULT_WRITE_PRICE = 20_000


def symbol_size(unencoded_length: int) -> int:
    """Symbol size in bytes: ceil(len / 222778) rounded up to even (RS2 alignment)."""
    if unencoded_length < 0:
        raise ValueError("length must be non-negative")
    size = -(-max(unencoded_length, 1) // SOURCE_SYMBOLS)
    size += size % 2
    if size > MAX_SYMBOL_SIZE:
        raise ValueError(f"blob of {unencoded_length} bytes exceeds the maximum {MAX_BLOB_SIZE}")
    return size


def encoded_length(unencoded_length: int) -> int:
    """Encoded size (metadata + all slivers); also the ``storageSize`` of the storage resource."""
    return METADATA_BYTES + N_SHARDS * (
        PRIMARY_SOURCE_SYMBOLS + SECONDARY_SOURCE_SYMBOLS
    ) * symbol_size(unencoded_length)


def storage_units(encoded: int) -> int:
    return -(-encoded // STORAGE_UNIT)


def store_cost(
    unencoded_length: int,
    epochs: int,
    *,
    storage_price: int = DEFAULT_STORAGE_PRICE,
    write_price: int = DEFAULT_WRITE_PRICE,
) -> int:
    """Cost in FROST of registering and writing a blob for ``epochs`` epochs (gas excluded)."""
    units = storage_units(encoded_length(unencoded_length))
    return units * (storage_price * epochs + write_price)
