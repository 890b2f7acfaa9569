"""Exact-claim tokens (issue 25 item 5): the token command and callable are told the request
they authorise, so a helper mints exact ``epochs``, ``size`` (blobs) / ``max_size`` (quilts)
and ``send_object_to``, and store, quilt, probe and extend all pass a publisher that checks
them (relayer_mock over HTTP: claims against the query, the body and the encoded quilt)."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relayer_mock.auth import encode_token
from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._walrus.quilt_size import encoded_quilt_size
from walrus_mem.errors import AuthenticationFailed
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import TokenRequest, WalrusClient

SECRET = "test-only-exact-claims"
OWNER = "0x" + "ab" * 32

# The example of docs/walrus.md, reading the request from WALRUS_MEM_TOKEN_*.
MINT = textwrap.dedent('''
    import base64, hashlib, hmac, json, os, time, uuid
    env = os.environ
    claims = {"exp": int(time.time()) + 60, "jti": uuid.uuid4().hex,
              "epochs": int(env["WALRUS_MEM_TOKEN_EPOCHS"])}
    if env["WALRUS_MEM_TOKEN_ROUTE"] == "blobs":
        claims["size"] = int(env["WALRUS_MEM_TOKEN_SIZE"])
    else:  # quilts: the body and the encoded quilt differ, only max_size passes both
        claims["max_size"] = int(env["WALRUS_MEM_TOKEN_MAX_SIZE"])
    if env["WALRUS_MEM_TOKEN_SEND_OBJECT_TO"]:
        claims["send_object_to"] = env["WALRUS_MEM_TOKEN_SEND_OBJECT_TO"]
    def b64(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(env["MINT_SECRET"].encode(), f"{head}.{body}".encode(), hashlib.sha256)
    with open(env["MINT_LOG"], "a") as log:
        log.write(json.dumps(claims) + "\\n")
    print(f"{head}.{body}.{b64(sig.digest())}")
''')


@pytest.fixture
def mint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    script = tmp_path / "mint.py"
    script.write_text(MINT)
    log = tmp_path / "minted.jsonl"
    monkeypatch.setenv("MINT_SECRET", SECRET)
    monkeypatch.setenv("MINT_LOG", str(log))
    return shlex.join([sys.executable, str(script)]), log


def test_store_quilt_probe_and_extend_with_exact_claims(
    tmp_path: Path, mint: tuple[str, Path], fake_embedder: HashEmbedder
) -> None:
    command, log = mint
    with RelayerServer(tmp_path / "walrus", fsync=False, jwt_secret=SECRET,
                        jwt_verify_upload=True) as server:
        settings = make_settings(tmp_path / "a", publisher_url=server.url,
                                 aggregator_urls=[server.url], publisher_token_command=command,
                                 epochs=5, send_object_to=OWNER)
        with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as memory:
            single = memory.remember("a single fact")
            many = memory.remember_many([f"batched fact {i}" for i in range(4)])
            report = memory.sync()
            assert report.errors == [] and report.still_queued == 0
            assert memory.probe_epoch() is not None  # epochs=1
            ids = [single.id] + [r.id for r in many.records]
            extended = memory.extend(ids, epochs=3)
            assert extended.failed == [] and set(extended.extended) == set(ids)
    minted = [json.loads(line) for line in log.read_text().splitlines()]
    assert {c["epochs"] for c in minted} >= {1, 3, 5}
    assert any("size" in c for c in minted) and any("max_size" in c for c in minted)
    assert all(c["send_object_to"] == OWNER for c in minted)


def test_a_token_with_wrong_claims_is_refused(tmp_path: Path) -> None:
    def wrong(field: str, value: object):
        def mint(request: TokenRequest) -> str:
            claims = {"exp": 4_000_000_000, "jti": f"{field}-{request.route}",
                      "epochs": request.epochs, "max_size": request.max_size,
                      "send_object_to": request.send_object_to, field: value}
            return encode_token({k: v for k, v in claims.items() if v is not None}, SECRET)
        return mint

    cases = [("epochs", 6, "INVALID_EPOCHS"), ("max_size", 1, "INVALID_SIZE"),
             ("send_object_to", "0x" + "cd" * 32, "INVALID_SEND_OBJECT_TO")]
    with RelayerServer(tmp_path / "walrus", fsync=False, jwt_secret=SECRET,
                        jwt_verify_upload=True) as server:
        for field, value, reason in cases:
            with WalrusClient(server.url, [server.url], token=wrong(field, value), epochs=5,
                              send_object_to=OWNER) as client:
                with pytest.raises(AuthenticationFailed) as blob:
                    client.store_blob(b"fact")
                with pytest.raises(AuthenticationFailed) as quilt:
                    client.store_quilt({"a": b"1", "b": b"2"})
            assert blob.value.reason == quilt.value.reason == reason


def test_an_exact_size_claim_cannot_pass_a_quilt(tmp_path: Path) -> None:
    """As on the daemon: the body and the encoded quilt are both compared with ``size``."""
    def exact(request: TokenRequest) -> str:
        return encode_token({"exp": 4_000_000_000, "jti": f"exact-{request.route}",
                             "size": request.size}, SECRET)

    with RelayerServer(tmp_path / "walrus", fsync=False, jwt_secret=SECRET,
                        jwt_verify_upload=True) as server, \
            WalrusClient(server.url, [server.url], token=exact) as client:
        client.store_blob(b"fact")
        with pytest.raises(AuthenticationFailed) as info:
            client.store_quilt({"a": b"1"})
        assert info.value.reason == "INVALID_SIZE"


def test_callables_get_the_request_or_nothing(tmp_path: Path) -> None:
    seen: list[TokenRequest] = []

    def with_request(request: TokenRequest) -> str:
        seen.append(request)
        return encode_token({"exp": 4_000_000_000, "jti": f"w{len(seen)}"}, SECRET)

    with RelayerServer(tmp_path / "walrus", fsync=False, jwt_secret=SECRET,
                        jwt_verify_upload=True) as server:
        with WalrusClient(server.url, [server.url], token=with_request, epochs=2) as client:
            client.store_blob(b"12345")
            client.store_quilt({"x": b"1", "y": b"22"}, metadata={"x": {"k": "v"}})
        blob, quilt = seen
        assert (blob.route, blob.size, blob.body_size, blob.epochs) == ("blobs", 5, 5, 2)
        assert blob.send_object_to is None and blob.publisher == server.url
        assert quilt.route == "quilts" and quilt.size == encoded_quilt_size(
            [("x", 1), ("y", 2)], {"x": {"k": "v"}}) == 445_556
        assert quilt.body_size > 3 and quilt.max_size == quilt.size
        count = [0]

        def no_argument() -> str:  # the form documented before requests were passed
            count[0] += 1
            return encode_token({"exp": 4_000_000_000, "jti": f"n{count[0]}"}, SECRET)

        with WalrusClient(server.url, [server.url], token=no_argument) as client:
            client.store_blob(b"x")
        assert count[0] == 1


def test_encoded_quilt_size_follows_the_columns() -> None:
    assert encoded_quilt_size([("a", 1)]) == 445_556  # the smallest quilt: 2-byte symbols
    # a patch of 1,000 B takes 2 columns of 668 B (334 rows of 2-byte symbols): 300 fit in
    # 667 columns, 400 do not and the symbols grow to 4 bytes
    assert encoded_quilt_size([(f"p{i:03}", 1000) for i in range(300)]) == 445_556
    assert encoded_quilt_size([(f"p{i:03}", 1000) for i in range(400)]) == 445_556 * 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 300_000)),
                min_size=1, max_size=40))
def test_the_client_and_relayer_mock_size_quilts_alike(patches: list[tuple[str, int]]) -> None:
    # two copies (relayer_mock imports nothing of walrus_mem): they must never drift apart
    from relayer_mock._quilt_size import encoded_quilt_size as mock_size

    assert encoded_quilt_size(patches) == mock_size(patches)
