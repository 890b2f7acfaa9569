"""Fuzzing with larger budgets: parsers of untrusted bytes give typed errors, never crash or hang.

Complements the smaller fuzz tests elsewhere (tests/test_walrus_client_fuzz.py at
300 examples per parser, tests/test_placeholders.py, the envelope round trip)
by running more examples and covering what they do not:

* envelopes: arbitrary bytes, bytes behind a valid header, *mutated* valid
  envelopes (flips, inserts, deletes, duplications, splices of two envelopes),
  and authentic envelopes around arbitrary plaintext;
* manifests: authentic envelopes holding arbitrary or mutated manifest records,
  parsed and fed to ``Memory.restore``;
* Walrus responses: every public parser and outcome function, plus ids,
  ``Retry-After`` values and identifiers;
* configuration: arbitrary and grammar-generated TOML (known keys, agent tables,
  ``${VAR}`` placeholders, deep nesting) through ``Settings.load``, arbitrary
  ``WALRUS_MEM_*`` environments, and ``resolve_placeholders`` on arbitrary trees;
* the LLM-facing surface: ``call_tool`` with arbitrary arguments, and
  ``compile_filters`` with arbitrary JSON.

"Typed" means a :class:`~walrus_mem.errors.WalrusMemError` subclass. Each
example must also finish within the hypothesis deadline (5 s), and each test
within its pytest timeout.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import random
import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nacl.bindings
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.stress.helpers import MASTER_HEX, open_memory, write_figures
from tests.test_walrus_client_fuzz import bodies, headers, json_values, statuses
from walrus_mem._local.placeholders import resolve_placeholders
from walrus_mem._log import manifest as mf
from walrus_mem._recall.filters import compile_filters
from walrus_mem._walrus.responses import (
    Failure,
    parse_error_body,
    parse_patch_list,
    parse_quilt_store_response,
    parse_store_response,
    quilt_store_outcome,
    read_outcome,
    store_outcome,
    validate_blob_id,
    validate_patch_id,
)
from walrus_mem._walrus.retry import parse_retry_after
from walrus_mem.config import Settings
from walrus_mem.envelope import MAGIC, SUITE_ID, VERSION, bucket_size, open_envelope, seal
from walrus_mem.errors import EnvelopeError, InvalidInput, WalrusMemError
from walrus_mem.keys import MasterSeed, NamespaceKeys
from walrus_mem.memory import Memory
from walrus_mem.tools import TOOL_NAMES, call_tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BIG = settings(max_examples=2500, deadline=dt.timedelta(seconds=5),
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.function_scoped_fixture])
MEDIUM = settings(BIG, max_examples=600)
RUNS: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    write_figures("fuzz", {"examples_by_target": dict(sorted(RUNS.items())),
                           "examples_total": sum(RUNS.values())})


KEYS = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "fuzz")
OTHER = NamespaceKeys.derive(MasterSeed.from_hex(MASTER_HEX), "other")
VALID = [
    seal(KEYS, {"id": "a" * 32, "kind": "fact", "text": "short"}),
    seal(KEYS, {"id": "b" * 32, "kind": "fact", "text": "x" * 3000, "metadata": {"k": [1, 2]}}),
    seal(OTHER, {"id": "c" * 32, "kind": "manifest", "entries": []}),
]


def _only_typed(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except WalrusMemError as exc:
        return exc


# -- envelopes -------------------------------------------------------------------------------


@st.composite
def mutated_envelopes(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "dup", "splice",
                                   "truncate", "extend"]))
        n = len(data)
        if n == 0:
            data += draw(st.binary(min_size=1, max_size=64))
            continue
        i = draw(st.integers(0, n - 1))
        j = draw(st.integers(i, min(n, i + 512)))
        if op == "flip":
            data[i] ^= draw(st.integers(1, 255))
        elif op == "set":
            data[i : i + 4] = draw(st.binary(min_size=1, max_size=4))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=64))
        elif op == "delete":
            del data[i : max(j, i + 1)]
        elif op == "dup":
            data[j:j] = data[i:j]
        elif op == "splice":
            other = draw(st.sampled_from(VALID))
            k = draw(st.integers(0, len(other)))
            data = data[:i] + bytearray(other[k:])
        elif op == "truncate":
            del data[i:]
        else:
            data += draw(st.binary(min_size=1, max_size=256))
    return bytes(data)


@BIG
@given(blob=st.one_of(st.binary(max_size=4096),
                      st.binary(max_size=2048).map(lambda b: VALID[0][:46] + b),
                      st.binary(max_size=64).map(lambda b: MAGIC + b)))
def test_open_envelope_on_arbitrary_bytes(blob: bytes) -> None:
    RUNS["envelope: arbitrary bytes"] += 1
    with pytest.raises(EnvelopeError):
        open_envelope(KEYS, blob)


@BIG
@given(blob=mutated_envelopes(), expect=st.sampled_from([None, "a" * 32, "b" * 32]))
def test_open_envelope_on_mutated_envelopes(blob: bytes, expect: str | None) -> None:
    RUNS["envelope: mutated valid envelopes"] += 1
    try:
        record = open_envelope(KEYS, blob, expected_id=expect)
    except EnvelopeError:
        return
    # Only an unmodified envelope of this namespace may open.
    assert blob in VALID[:2]
    assert expect in (None, record["id"])


def _seal_raw(keys: NamespaceKeys, plaintext: bytes) -> bytes:
    """An authentic envelope around arbitrary plaintext (what only a key holder can make)."""
    nonce = os.urandom(24)
    header = MAGIC + bytes([VERSION, SUITE_ID]) + keys.fingerprint_bytes + nonce
    ct = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        plaintext, header, nonce, keys.sealing_key)
    return header + ct + keys.signing_key.sign(header + ct).signature


def _padded(body: bytes) -> bytes:
    size = bucket_size(4 + len(body))
    return struct.pack(">I", len(body)) + body + bytes(size - 4 - len(body))


@MEDIUM
@given(body=st.one_of(st.binary(max_size=2000),
                      json_values.map(lambda v: json.dumps(v).encode()),
                      st.dictionaries(st.text(max_size=8), json_values, max_size=6).map(
                          lambda d: json.dumps({"id": "m", "kind": "fact", **d}).encode())),
       pad=st.booleans())
def test_authentic_envelope_with_arbitrary_plaintext(body: bytes, pad: bool) -> None:
    RUNS["envelope: authentic, arbitrary plaintext"] += 1
    plaintext = _padded(body) if pad else body
    result = _only_typed(open_envelope, KEYS, _seal_raw(KEYS, plaintext))
    if not isinstance(result, WalrusMemError):
        assert isinstance(result, dict)
        assert isinstance(result["id"], str) and isinstance(result["kind"], str)


# -- manifests ---------------------------------------------------------------------------------


ENTRY = {"i": "d" * 32, "v": 1, "b": "B" * 43, "p": None, "e": 7}
ROOT = mf.root_record(manifest_id="manifest-x", seq=3, writer="w" * 16,
                      parents=["B" * 43 + ".2." + "f" * 64], origins=["O" * 43],
                      created_at=1.5e9, model_id="m", dim=64, count=1,
                      entries=[mf.Entry.from_json(ENTRY)], pages=[])
PAGED = dict(ROOT, entries=None, count=2, pages=[{"b": "C" * 43, "p": None, "d": "e" * 64,
                                                  "n": 2}])


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def manifest_records(draw: st.DrawFn) -> dict[str, Any]:
    record = copy.deepcopy(draw(st.sampled_from([ROOT, PAGED])))
    for _ in range(draw(st.integers(0, 4))):
        paths = [p for p in _paths(record) if p]
        path = draw(st.sampled_from(paths))
        parent: Any = record
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return record


@BIG
@given(record=st.one_of(manifest_records(),
                        st.dictionaries(st.text(max_size=10), json_values, max_size=8)))
def test_manifest_parsers_on_arbitrary_records(record: dict[str, Any]) -> None:
    RUNS["manifest: parse_root / parse_page"] += 1
    _only_typed(mf.parse_root, record)
    _only_typed(mf.parse_page, record, "e" * 64)


@pytest.fixture(scope="module")
def restore_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    mem = open_memory(tmp_path_factory.mktemp("fuzz-restore") / "data")
    try:
        yield mem
    finally:
        mem.close()


@MEDIUM
@given(record=manifest_records())
@example(record=dict(ROOT, seq=2**70))  # once an OverflowError from SQLite
@example(record=dict(ROOT, entries=[dict(ENTRY, v=10**30)]))
def test_restore_from_hostile_authentic_manifests(restore_memory: Memory,
                                                   record: dict[str, Any]) -> None:
    """A manifest sealed with the right key but with any content: restore fails typed."""
    RUNS["manifest: Memory.restore"] += 1
    keys = restore_memory.keys_for("fuzz")
    body = dict(record, id=f"manifest-{random.getrandbits(64):x}", kind="manifest")
    sealed = _only_typed(seal, keys, body)
    if isinstance(sealed, WalrusMemError):  # e.g. a NaN: JSON cannot carry it, seal refuses
        return
    blob_id = restore_memory.walrus.store_blob(sealed, deadline=5).blob_id
    seq = record.get("seq")
    seq = seq if isinstance(seq, int) and not isinstance(seq, bool) and 0 < seq < 2**62 else 1
    head = f"{blob_id}.{seq}.{mf.sealed_digest(sealed)}"  # names exactly these bytes
    result = _only_typed(restore_memory.restore, "fuzz", manifest_blob_id=head,
                         allow_stale=True, allow_unrelated=True)
    if not isinstance(result, WalrusMemError):
        assert result.restored == 0  # nothing it lists exists on this relayer


# -- Walrus responses --------------------------------------------------------------------------


identifiers = st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=4, unique=True)


@BIG
@given(status=statuses, hdrs=headers, body=bodies, names=identifiers,
       length=st.one_of(st.none(), st.integers(0, 400)))
def test_every_response_parser(status: int, hdrs: dict[str, str], body: bytes,
                               names: list[str], length: int | None) -> None:
    RUNS["walrus: responses"] += 1
    for outcome in (store_outcome(status, hdrs, body),
                    quilt_store_outcome(status, hdrs, body, names),
                    read_outcome(status, hdrs, body, expected_length=length)):
        if isinstance(outcome, Failure):
            assert isinstance(outcome.error, WalrusMemError)
    for parse in (parse_store_response, parse_quilt_store_response, parse_patch_list):
        _only_typed(parse, body)
    parse_error_body(body, hdrs)


@BIG
@given(value=st.one_of(st.text(max_size=60), st.binary(max_size=60),
                       st.integers(), st.none(), st.floats()))
def test_ids_and_retry_after(value: Any) -> None:
    RUNS["walrus: ids, Retry-After"] += 1
    _only_typed(validate_blob_id, value)
    _only_typed(validate_patch_id, value)
    if isinstance(value, str):
        seconds = parse_retry_after(value)
        assert seconds is None or seconds >= 0


# -- configuration -----------------------------------------------------------------------------


KNOWN_KEYS = ["data_dir", "publisher_url", "aggregator_urls", "publisher_token", "master_key",
              "key_file", "use_keyring", "default_namespace", "epochs", "permanent",
              "send_object_to", "embedding_model", "embedding_batch_size", "max_fact_bytes",
              "publish_deadline", "read_deadline", "request_timeout", "min_score",
              "manifest_every", "config_file", "nonsense"]
AGENT_KEYS = ["namespace", "key", "auto_recall", "auto_capture", "max_recall_results",
              "min_relevance", "min_prompt_length", "capture_max_messages",
              "recall_token_budget", "recall_strategy", "query_gate", "extra"]
ENV = {"SET_VAR": "value", "HEX_VAR": "ab" * 32, "EMPTY_VAR": ""}
toml_scalars = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True).map(repr),
    st.booleans().map(lambda b: str(b).lower()),
    st.text(max_size=30).map(json.dumps),
    st.sampled_from(['"${SET_VAR}"', '"${UNSET_VAR}"', '"${EMPTY_VAR}"', '"$${SET_VAR}"',
                     '"${HEX_VAR}"', '"${"', '"${A-B}"', '"http://127.0.0.1:9"', "[]",
                     '["${SET_VAR}", 1]', "{ a = 1 }", "1979-05-27T07:32:00Z", '"""x"""',
                     "'literal'", "0x1F", "1e400"]),
)


@st.composite
def toml_documents(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        key = draw(st.sampled_from(KNOWN_KEYS))
        lines.append(f"{key} = {draw(toml_scalars)}")
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(["writer", "Bad Name", "x" * 70, "ok-agent", '"q"']))
        lines.append(f"[agents.{name}]")
        for _ in range(draw(st.integers(0, 4))):
            lines.append(f"{draw(st.sampled_from(AGENT_KEYS))} = {draw(toml_scalars)}")
    if draw(st.booleans()):
        depth = draw(st.integers(1, 3000))
        lines.append("deep = " + "[" * depth + "]" * depth)
    if draw(st.booleans()):
        lines.insert(0, "[walrus_mem]")
    text = "\n".join(lines)
    if draw(st.booleans()) and text:  # damage it
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(max_size=5)) + text[i:]
    return text


@BIG
@given(text=st.one_of(toml_documents(), st.text(max_size=400),
                      st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_settings_load_on_any_config_file(tmp_path: Path, text: str) -> None:
    RUNS["config: Settings.load(config file)"] += 1
    path = tmp_path / "walrus-mem.toml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    try:
        result = _only_typed(Settings.load, config_file=path)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert isinstance(result, Settings | WalrusMemError)


@MEDIUM
@given(env=st.dictionaries(
    st.sampled_from([f"WALRUS_MEM_{k.upper()}" for k in KNOWN_KEYS] + ["WALRUS_MEM_AGENTS"]),
    st.one_of(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                      max_size=40),
              st.sampled_from(['{"writer": {"key": "zz"}}', "[1,2]", "{}", "true", "-1",
                               "nan", "http://127.0.0.1:1,,", "1e999",
                               "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000])),
    max_size=5))
def test_settings_load_on_any_environment(tmp_path: Path, env: dict[str, str]) -> None:
    RUNS["config: Settings.load(environment)"] += 1
    saved = dict(os.environ)
    os.environ.update(env)
    os.environ.pop("WALRUS_MEM_CONFIG_FILE", None)
    if "WALRUS_MEM_CONFIG" in os.environ:
        os.environ["WALRUS_MEM_CONFIG"] = str(tmp_path / "missing.toml")
    try:
        result = _only_typed(Settings.load)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert isinstance(result, Settings | WalrusMemError)


@BIG
@given(tree=json_values, environ=st.dictionaries(st.text(max_size=8), st.text(max_size=8),
                                                  max_size=4))
def test_resolve_placeholders_on_any_tree(tree: Any, environ: dict[str, str]) -> None:
    RUNS["config: resolve_placeholders"] += 1
    _only_typed(resolve_placeholders, tree, environ)


# -- the LLM-facing surface ----------------------------------------------------------------------


def _nest(kind: str, depth: int) -> Any:
    """A structure nested ``depth`` levels deep (built iteratively)."""
    value: Any = {"category": "x"} if kind != "list" else 1
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else {"AND": [value]} if kind == "and" \
            else {"NOT": value} if kind == "not" else [value]
    return value


deep = st.builds(_nest, st.sampled_from(["dict", "and", "not", "list"]),
                 st.sampled_from([40, 300, 3000, 20000]))
deep_json = st.builds(lambda kind, depth: json.dumps(_nest(kind, min(depth, 900)))
                      if depth < 900 else "[" * depth + "]" * depth,
                      st.sampled_from(["dict", "list"]), st.sampled_from([40, 300, 3000, 20000]))


@pytest.fixture(scope="module")
def tool_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    mem = open_memory(tmp_path_factory.mktemp("fuzz-tools") / "data")
    mem.remember_many([f"Seed fact number {i} about the garden." for i in range(5)])
    try:
        yield mem
    finally:
        mem.close()


tool_args = st.one_of(
    st.dictionaries(st.sampled_from(["query", "facts", "id", "text", "limit", "offset",
                                     "filters", "categories", "category", "metadata",
                                     "importance", "confirm", "namespace", "min_score", "x"]),
                    json_values, max_size=5),
    st.text(max_size=80), json_values.map(json.dumps), st.none(), deep_json,
    st.builds(lambda d: {"query": "garden", "filters": d}, deep),
    st.builds(lambda d: {"facts": ["A fine fact about the garden."], "metadata": {"x": d}},
              deep),
)


@MEDIUM
@given(name=st.one_of(st.sampled_from(TOOL_NAMES), st.text(max_size=12)), args=tool_args,
       session=st.one_of(st.none(), st.sampled_from(["agent:x:1", "subagent:y", ""]),
                         st.text(max_size=20)))
def test_call_tool_never_raises(tool_memory: Memory, name: str, args: Any,
                                session: str | None) -> None:
    RUNS["tools: call_tool"] += 1
    result = call_tool(tool_memory, name, args, session_key=session)
    assert isinstance(result, dict) and isinstance(result.get("ok"), bool)
    json.dumps(result)


VIEW = {"id": "a" * 32, "text": "t", "category": "rule", "importance": 0.5, "created_at": 1.0,
        "updated_at": 1.0, "expires_at": None, "version": 1, "status": "published",
        "blob_id": None, "quilt_patch_id": None, "end_epoch": None,
        "metadata": {"source": "chat", "n": 3, "tags": ["a", "b"]}}


@BIG
@given(spec=st.one_of(json_values, deep, st.dictionaries(
    st.sampled_from(["category", "source", "n", "tags", "created_at", "AND", "OR", "NOT",
                     "metadata.source", "importance"]),
    st.one_of(json_values, st.dictionaries(
        st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains",
                         "icontains", "$regex", "bogus"]), json_values, max_size=3)),
    max_size=4)))
def test_compile_filters_on_any_json(spec: Any) -> None:
    RUNS["filters: compile_filters"] += 1
    try:
        predicate = compile_filters(spec)
    except InvalidInput:
        return
    if predicate is not None:
        try:
            assert isinstance(predicate(VIEW), bool)
        except InvalidInput:
            pass


@MEDIUM
@given(metadata=st.one_of(deep, st.dictionaries(st.text(max_size=6), json_values, max_size=4)))
def test_remember_with_any_metadata(tool_memory: Memory, metadata: Any) -> None:
    RUNS["memory: remember(metadata=...)"] += 1
    text = f"A garden fact with metadata number {RUNS['memory: remember(metadata=...)']}."
    result = _only_typed(tool_memory.remember, text, metadata=metadata)
    if not isinstance(result, WalrusMemError):
        assert not result.deduplicated
        assert tool_memory.get(result.id).metadata == json.loads(json.dumps(metadata))
