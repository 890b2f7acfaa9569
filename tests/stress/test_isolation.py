"""Isolation: 12 agents (10 with keys derived from one master seed, 2 with their own
Ed25519 keys) share one data dir and one relayer.

* every ordered pair of agents (132): each of A's envelopes (fact blobs, quilt
  patches, manifests) opened with B's keys fails with WrongNamespace or
  TamperedBlob; B cannot restore from A's manifest, get A's ids or recall A's facts;
* every byte the relayer keeps (blob files, staging, its SQLite files, and what
  its aggregator routes serve) holds no plaintext (no 8-byte piece of any fact
  text), no namespace or agent name, and no embedding (no float32 or float16
  run of the first 8 dimensions of any stored vector).

A dense pseudo-random embedder is used here instead of HashEmbedder: its sparse
vectors are mostly zeros, and a run of zero bytes proves nothing.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import SecretStr

from tests.stress.helpers import (
    MASTER_HEX,
    census,
    relayer_files,
    settings_for,
    split_blob,
    write_figures,
)
from walrus_mem.config import AgentConfig
from walrus_mem.envelope import open_envelope
from walrus_mem.errors import MemoryNotFound, TamperedBlob, WrongNamespace
from walrus_mem.keys import NamespaceKeys
from walrus_mem.memory import Memory

DERIVED = ["researcher", "planner", "coder", "reviewer", "scribe", "scout", "critic",
           "archivist", "tutor", "concierge"]
INDEPENDENT = {"lone-wolf": "11" * 32, "night-owl": "a7" * 32}
AGENTS = DERIVED + list(INDEPENDENT)
FACTS_PER_AGENT = 12
WINDOW = 8


class DenseEmbedder:
    """Dense unit vectors seeded by the text (every dimension non-zero in practice)."""

    model_id = "stress-dense-64"
    dim = 64

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        rows = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim)
                for t in texts]
        out = np.asarray(rows, dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _facts(agent: str) -> list[str]:
    # Agent-specific wording, but never the agent's name: the name scan must stand alone.
    return [f"Private note {i} of the {len(agent)}-letter agent: meeting code "
            f"{zlib.crc32(f'{agent}{i}'.encode()):08x} at {7 + i} pm, bring the "
            f"{['saffron', 'umber', 'teal', 'ochre'][i % 4]} folder number {i * 37 + 3}."
            for i in range(FACTS_PER_AGENT)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    data_dir = tmp_path_factory.mktemp("isolation") / "data"
    agents = {name: AgentConfig(key=SecretStr(key)) for name, key in INDEPENDENT.items()}
    settings = settings_for(data_dir, agents=agents)
    mem = Memory(settings, embedder=DenseEmbedder(), master_key=MASTER_HEX)
    ids: dict[str, list[str]] = {}
    for agent in AGENTS:
        facts = _facts(agent)
        ids[agent] = [mem.remember(t, namespace=agent).id for t in facts[:4]]
        ids[agent] += [r.id for r in mem.remember_many(facts[4:], namespace=agent).records]
    report = mem.sync()
    assert report.still_queued == 0 and set(report.manifests) == set(AGENTS)
    try:
        yield {"mem": mem, "dir": data_dir, "ids": ids, "manifests": report.manifests}
    finally:
        mem.close()


def test_keys_are_what_the_agents_are_configured_with(world: dict[str, object]) -> None:
    mem = world["mem"]
    assert isinstance(mem, Memory)
    for agent in AGENTS:
        keys = mem.keys_for(agent)
        assert keys.independent == (agent in INDEPENDENT)
    assert len({mem.keys_for(a).fingerprint for a in AGENTS}) == len(AGENTS)


def test_every_ordered_pair_is_isolated(world: dict[str, object]) -> None:
    mem, data_dir, ids = world["mem"], world["dir"], world["ids"]
    manifests = world["manifests"]
    assert isinstance(mem, Memory) and isinstance(data_dir, Path)
    assert isinstance(ids, dict) and isinstance(manifests, dict)
    keys = {a: mem.keys_for(a) for a in AGENTS}
    blobs = {p: b for p, b in relayer_files(data_dir / "relayer").items()
             if p.startswith("blobs/")}
    found = census({p: b for p, b in blobs.items()}, keys.values())
    assert found.unreadable == 0
    owned: dict[str, list[bytes]] = {a: [] for a in AGENTS}
    for data in blobs.values():
        for _, part in split_blob(data):
            owner = [a for a in AGENTS if _opens(keys[a], part)]
            assert len(owner) == 1, "an envelope opened under two agents' keys"
            owned[owner[0]].append(part)
    attempts = 0
    refusals: dict[str, int] = {"WrongNamespace": 0, "TamperedBlob": 0}
    pairs = list(itertools.permutations(AGENTS, 2))
    for a, b in pairs:
        assert owned[a], f"{a} has no envelopes"
        for part in owned[a]:
            attempts += 1
            with pytest.raises((WrongNamespace, TamperedBlob)) as raised:
                open_envelope(keys[b], part)
            refusals[type(raised.value).__name__] += 1
        with pytest.raises(WrongNamespace):
            mem.restore(b, manifest_blob_id=manifests[a])
        with pytest.raises(MemoryNotFound):
            mem.get(ids[a][0], namespace=b)
        hits = mem.recall(_facts(a)[0], namespace=b, k=10, min_score=0)
        assert not {h.id for h in hits} & set(ids[a])
    write_figures("isolation", {
        "agents": len(AGENTS),
        "derived_key_agents": len(DERIVED),
        "independent_key_agents": len(INDEPENDENT),
        "ordered_pairs_tested": len(pairs),
        "cross_open_attempts": attempts,
        "cross_open_refused": refusals,
        "envelopes_on_relayer": sum(len(v) for v in owned.values()),
        "blobs_on_relayer": len(blobs),
        "quilts_on_relayer": found.quilts,
    })


def _opens(keys: NamespaceKeys, part: bytes) -> bool:
    try:
        open_envelope(keys, part)
    except (WrongNamespace, TamperedBlob):
        return False
    return True


def _needles(mem: Memory) -> tuple[set[bytes], set[bytes], set[bytes]]:
    """8-byte windows of every fact text; agent names; 8-dimension vector prefixes."""
    texts = [t for a in AGENTS for t in _facts(a)]
    windows = {t.encode()[i : i + WINDOW] for t in texts
               for i in range(len(t.encode()) - WINDOW + 1)}
    names = {a.encode() for a in AGENTS} | {a.replace("-", "_").encode() for a in AGENTS}
    vectors: set[bytes] = set()
    for ns, key in mem._catalog.query("SELECT namespace, key FROM memories"):
        (vector,) = mem._catalog.vectors_by_keys(ns, [int(key)]).values()
        f16 = vector.astype("<f2")  # as stored (catalog and index precision)
        vectors.add(f16[:8].tobytes())
        vectors.add(f16[:8].astype("<f4").tobytes())
    embedded = DenseEmbedder().embed(texts)  # the embedder's own float32 output
    vectors |= {row[:8].astype("<f4").tobytes() for row in embedded}
    return windows, names, vectors


def _scan(files: dict[str, bytes], windows: set[bytes], names: set[bytes],
          vectors: set[bytes]) -> tuple[list[object], list[object], list[object]]:
    plaintext, found_names, found_vectors = [], [], []
    for path, data in files.items():
        for i in range(len(data) - WINDOW + 1):
            if data[i : i + WINDOW] in windows:
                plaintext.append((path, data[i : i + 24]))
                break
        found_names += [(path, n) for n in names if n in data]
        found_vectors += [(path, n.hex()) for n in vectors if n in data]
    return plaintext, found_names, found_vectors


def test_relayer_bytes_hold_no_plaintext_names_or_embeddings(world: dict[str, object]) -> None:
    mem, data_dir = world["mem"], world["dir"]
    assert isinstance(mem, Memory) and isinstance(data_dir, Path)
    files = relayer_files(data_dir / "relayer")
    served = _served_blobs(mem)
    assert served and all(any(s == f for f in files.values()) for s in served)
    windows, names, vectors = _needles(mem)
    assert len(vectors) > 2 * FACTS_PER_AGENT * len(AGENTS)

    plaintext, found_names, found_vectors = _scan(files, windows, names, vectors)
    assert plaintext == []
    assert found_names == []
    assert found_vectors == []

    # Positive control: the same scan finds all three in the local catalog, which
    # holds texts, namespace names and float16 vectors in the clear.
    mem._catalog.scrub()  # checkpoint: the rows are in the main file
    catalog = {"catalog": (data_dir / "catalog.sqlite3").read_bytes()}
    control = _scan(catalog, windows, names, vectors)
    assert all(control), "the scanner cannot see what it is looking for"
    write_figures("isolation", {
        "relayer_files_scanned": len(files),
        "relayer_bytes_scanned": sum(len(d) for d in files.values()),
        "plaintext_windows_searched": len(windows),
        "names_searched": len(names),
        "vector_prefixes_searched": len(vectors),
        "plaintext_found": 0,
        "names_found": 0,
        "embeddings_found": 0,
        "positive_control_in_catalog": {"plaintext": len(control[0]), "names": len(control[1]),
                                        "vectors": len(control[2])},
    })


def _served_blobs(mem: Memory) -> list[bytes]:
    """Every blob as the relayer's aggregator route serves it (listed by the admin route)."""
    relayer = mem._get_backend().embedded
    assert relayer is not None
    with relayer.client() as client:
        listing = client.get("/_mock/blobs").json()["blobs"]
        return [client.get(f"/v1/blobs/{b['blobId']}").content for b in listing]
