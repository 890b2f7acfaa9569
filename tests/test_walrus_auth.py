"""Per-request publisher tokens: a token command whose every token works exactly once.

The mock runs with JWT auth (each ``jti`` accepted once, marked used before the store
runs, like the daemon) and injects 5xx/429 on stores, so every retry needs a fresh token.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from relayer_mock.faults import FaultConfig
from relayer_mock.server import RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem._walrus.credentials import command_provider, token_provider
from walrus_mem.errors import AuthenticationFailed, InvalidInput
from walrus_mem.memory import Memory
from walrus_mem.testing import HashEmbedder
from walrus_mem.walrus import WalrusClient

SECRET = "test-only-jwt-secret"

MINT = textwrap.dedent('''
    import base64, hashlib, hmac, json, os, time, uuid
    def b64(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    jti = uuid.uuid4().hex
    claims = b64(json.dumps({"exp": time.time() + 600, "jti": jti}).encode())
    signature = hmac.new(os.environ["MINT_SECRET"].encode(), f"{header}.{claims}".encode(),
                         hashlib.sha256).digest()
    with open(os.environ["MINT_LOG"], "a") as log:
        log.write(jti + "\\n")
    print(f"{header}.{claims}.{b64(signature)}")
''')


@pytest.fixture
def mint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    script = tmp_path / "mint.py"
    script.write_text(MINT)
    log = tmp_path / "minted.log"
    monkeypatch.setenv("MINT_SECRET", SECRET)
    monkeypatch.setenv("MINT_LOG", str(log))
    return shlex.join([sys.executable, str(script)]), log


def _counters(server: RelayerServer) -> dict[str, int]:
    with server.client() as admin:
        counters: dict[str, int] = admin.get("/_mock/stats").json()["counters"]
    return counters


def test_every_token_works_once_through_the_whole_lifecycle(
    tmp_path: Path, mint: tuple[str, Path], fake_embedder: HashEmbedder
) -> None:
    command, log = mint
    faults = FaultConfig(probabilities={"500": 0.2, "503": 0.1, "429": 0.2}, scope="writes",
                         seed=11)
    with RelayerServer(tmp_path / "walrus", fsync=False, jwt_secret=SECRET,
                       faults=faults) as server:
        settings = make_settings(tmp_path / "a", publisher_url=server.url,
                                 aggregator_urls=[server.url], publisher_token_command=command,
                                 publish_deadline=8.0)
        with Memory(settings, embedder=fake_embedder, master_key=MASTER_HEX) as memory:
            singles = [memory.remember(f"single fact number {i}") for i in range(3)]
            many = memory.remember_many([f"batched fact number {i}" for i in range(5)])
            report = memory.sync()
            assert report.errors == [] and report.still_queued == 0
            head = report.manifests["default"]
            ids = [r.id for r in singles] + [r.id for r in many.records]
            assert {memory.get(i).status for i in ids} == {"published"}
            extended = memory.extend(ids, epochs=3)
            assert extended.failed == [] and set(extended.extended) == set(ids)
            head = memory.stats().manifest_blob_id or head
        fresh = make_settings(tmp_path / "b", publisher_url=server.url,
                              aggregator_urls=[server.url], publisher_token_command=command)
        with Memory(fresh, embedder=fake_embedder, master_key=MASTER_HEX) as restored:
            result = restored.restore("default", head)
            assert result.failed == [] and result.restored == len(ids)
        counters = _counters(server)
    minted = log.read_text().split()
    stores = counters.get("requests.put_blob", 0) + counters.get("requests.put_quilt", 0)
    injected = sum(v for k, v in counters.items() if k.startswith("faults.") and "." not in
                   k[len("faults."):])
    print(f"\ntokens minted {len(minted)}, store requests {stores}, injected faults {injected}")
    assert len(minted) == len(set(minted)) == stores  # one fresh token per request
    assert injected > 0  # retries happened, each with its own token
    assert not any("TOKEN_ALREADY_USED" in k for k in counters)


def test_a_static_token_is_spent_by_the_first_store(tmp_path: Path,
                                                    fake_embedder: HashEmbedder) -> None:
    """What the token command fixes: a single-use JWT sent on every request fails the second."""
    from relayer_mock.auth import encode_token

    token = encode_token({"exp": 4_000_000_000, "jti": "only-once"}, SECRET)
    with RelayerServer(tmp_path / "walrus", fsync=False, jwt_secret=SECRET) as server, \
            WalrusClient(server.url, [server.url], token=token) as client:
        client.store_blob(b"first")
        with pytest.raises(AuthenticationFailed) as info:
            client.store_blob(b"second")
        assert info.value.reason == "TOKEN_ALREADY_USED"
        assert "publisher_token_command" in str(info.value)  # tells the user the fix
        assert client.stats.retries == 0  # an auth failure is never retried blindly
        assert token not in str(info.value) and token not in repr(client)


def test_callable_token_is_called_per_request(tmp_path: Path) -> None:
    from relayer_mock.auth import encode_token

    issued: list[str] = []

    def fresh() -> str:
        issued.append(encode_token({"exp": 4_000_000_000, "jti": f"jti-{len(issued)}"}, SECRET))
        return issued[-1]

    faults = FaultConfig.only("503", 0.5, seed=3, scope="writes")
    with RelayerServer(tmp_path / "walrus", fsync=False, jwt_secret=SECRET,
                       faults=faults) as server, \
            WalrusClient(server.url, [server.url], token=fresh) as client:
        for i in range(4):
            client.store_blob(f"blob {i}".encode())
        assert client.stats.retries > 0
        assert len(issued) == client.stats.requests


@pytest.mark.parametrize("script, expected", [
    ("import sys; sys.exit(3)", "exited with status 3"),
    ("print('two tokens')", "exactly one token"),
    ("print('')", "exactly one token"),
    ("import time; time.sleep(5)", "did not finish"),
])
def test_token_command_failures_are_typed(tmp_path: Path, script: str, expected: str) -> None:
    path = tmp_path / "helper.py"
    path.write_text(script)
    provide = command_provider([sys.executable, str(path)], timeout=0.5)
    with pytest.raises(AuthenticationFailed, match=expected):
        provide()


def test_a_hanging_token_command_ends_within_the_store_deadline(tmp_path: Path) -> None:
    """The command's own 10 s timeout is cut to what is left of the store's deadline."""
    path = tmp_path / "helper.py"
    path.write_text("import time; time.sleep(30)")
    with WalrusClient("http://127.0.0.1:9", ["http://127.0.0.1:9"],
                      token_command=[sys.executable, str(path)]) as client:
        with pytest.raises(AuthenticationFailed, match="did not finish") as info:
            client.store_blob(b"fact", deadline=0.5)
    assert "within 10 s" not in str(info.value), str(info.value)


def test_token_command_output_never_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "helper.py"
    path.write_text("import sys; print('s3cr3t-value and more'); sys.exit(0)")
    with pytest.raises(AuthenticationFailed) as info:
        command_provider([sys.executable, str(path)])()
    assert "s3cr3t" not in str(info.value)
    missing = command_provider(["/nonexistent/walrus-token-helper"])
    with pytest.raises(AuthenticationFailed, match="cannot run"):
        missing()


def test_token_provider_precedence_and_bad_input() -> None:
    assert token_provider("static")() == SecretStr("static")
    assert token_provider(None)() is None and token_provider("")() is None
    assert token_provider("ignored", [sys.executable, "-c", "print('cmd')"])() == \
        SecretStr("cmd")
    calls: list[Any] = []
    provider = token_provider(lambda: calls.append(1) or "t")
    provider()
    provider()
    assert len(calls) == 2
    with pytest.raises(AuthenticationFailed, match="callable failed: RuntimeError"):
        token_provider(lambda: (_ for _ in ()).throw(RuntimeError("leak me")))()
    with pytest.raises(InvalidInput):
        token_provider(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        command_provider([])
