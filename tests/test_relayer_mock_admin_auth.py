"""relayer_mock's /_mock/ admin routes need its admin token wherever a socket serves them
(issue 23, item 13): without it nobody reachable can delete blobs, switch faults on, reset
the store, list blobs or learn the data dir. Only the in-process embedded relayer, which no
socket serves, keeps them open."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relayer_mock._admin_auth import ADMIN_TOKEN_FILE, ADMIN_TOKEN_HEADER, load_or_create_token
from relayer_mock.app import create_app
from relayer_mock.auth import encode_token
from relayer_mock.cli import main
from relayer_mock.embedded import EmbeddedRelayer
from relayer_mock.server import RelayerProcess, RelayerServer
from tests.helpers_memory import MASTER_HEX, make_settings
from walrus_mem import Memory
from walrus_mem.testing import HashEmbedder

SECRET = "test-only-jwt-secret"
TOKEN = "test-only-admin-token-0123456789"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", fsync=False) as running:
        yield running


def _store(client: httpx.Client, content: bytes = b"precious") -> str:
    stored = client.put("/v1/blobs?epochs=3&deletable=true", content=content).json()
    return str(stored["newlyCreated"]["blobObject"]["blobId"])


def _admin_calls(blob_id: str) -> list[tuple[str, str, dict[str, object]]]:
    """Every admin route, as an outsider would try it."""
    return [
        ("DELETE", f"/_mock/blobs/{blob_id}", {}),
        ("PUT", "/_mock/faults", {"json": {"probabilities": {"500": 1.0}}}),
        ("PATCH", "/_mock/faults", {"json": {"probabilities": {"500": 1.0}}}),
        ("POST", "/_mock/reset", {}),
        ("GET", "/_mock/blobs", {}),
        ("GET", f"/_mock/blobs/{blob_id}", {}),
        ("GET", "/_mock/info", {}),
        ("GET", "/_mock/stats", {}),
        ("GET", "/_mock/faults", {}),
        ("GET", "/_mock/faults/log", {}),
        ("GET", "/_mock/epoch", {}),
        ("PUT", "/_mock/epoch", {"json": {"epochDuration": 1}}),
        ("POST", "/_mock/epoch/advance", {"params": {"by": 9}}),
        ("GET", "/_mock/blocklist", {}),
        ("PUT", f"/_mock/blocklist/{blob_id}", {}),
    ]


def _assert_all_refused(url: str, blob_id: str, headers: dict[str, str],
                        data_dir: Path) -> None:
    with httpx.Client(base_url=url, headers=headers) as outsider:
        for method, path, kwargs in _admin_calls(blob_id):
            response = outsider.request(method, path, **kwargs)  # type: ignore[arg-type]
            assert response.status_code == 401, (method, path, response.text)
            assert str(data_dir) not in response.text
            assert response.headers["www-authenticate"].startswith("Bearer")


def _assert_untouched(server: RelayerServer, blob_id: str) -> None:
    """Nothing the refused calls asked for happened."""
    with server.client() as admin:
        assert admin.get(f"/v1/blobs/{blob_id}").content == b"precious"
        assert admin.get("/_mock/faults").json()["enabled"] is False
        assert admin.get("/_mock/epoch").json()["currentEpoch"] == 1
        assert admin.get("/_mock/blocklist").json()["blocked"] == []
        assert admin.get("/_mock/stats").json()["blobCount"] == 1


def test_no_token_is_refused_on_every_admin_route(server: RelayerServer) -> None:
    with httpx.Client(base_url=server.url) as client:
        blob_id = _store(client)
    _assert_all_refused(server.url, blob_id, {}, server.data_dir)
    _assert_untouched(server, blob_id)


@pytest.mark.parametrize("headers", [
    {"Authorization": "Bearer wrong-token-wrong-token-wrong"},
    {ADMIN_TOKEN_HEADER: "wrong-token-wrong-token-wrong"},
    {"Authorization": "Bearer"},
    {ADMIN_TOKEN_HEADER: ""},
    {"Authorization": "Basic dXNlcjpwYXNz"},
])
def test_a_wrong_token_is_refused(server: RelayerServer, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=server.url) as client:
        blob_id = _store(client)
    _assert_all_refused(server.url, blob_id, headers, server.data_dir)
    _assert_untouched(server, blob_id)


def test_a_prefix_or_extension_of_the_token_is_refused(server: RelayerServer) -> None:
    token = server.admin_token
    assert token is not None
    for wrong in (token[:-1], token + "x", token.upper() if token.upper() != token else "x"):
        response = httpx.get(f"{server.url}/_mock/stats", headers={ADMIN_TOKEN_HEADER: wrong})
        assert response.status_code == 401


def test_the_right_token_works_as_bearer_or_header(server: RelayerServer) -> None:
    token = server.admin_token
    assert token is not None and len(token) >= 32
    with httpx.Client(base_url=server.url) as client:
        blob_id = _store(client)
    bearer = {"Authorization": f"Bearer {token}"}
    info = httpx.get(f"{server.url}/_mock/info", headers=bearer).json()
    assert info["dataDir"] == str(server.data_dir)
    listed = httpx.get(f"{server.url}/_mock/blobs", headers={ADMIN_TOKEN_HEADER: token}).json()
    assert [b["blobId"] for b in listed["blobs"]] == [blob_id]
    with server.client() as admin:
        assert admin.delete(f"/_mock/blobs/{blob_id}").status_code == 200
        assert admin.get(f"/v1/blobs/{blob_id}").status_code == 404
        assert admin.put("/_mock/faults", json={"probabilities": {"500": 1.0}}).status_code == 200
        assert admin.put("/v1/blobs", content=b"x").status_code == 500
        assert admin.put("/_mock/faults", json={}).status_code == 200
        assert admin.post("/_mock/reset").json() == {"reset": True}
        assert admin.get("/_mock/stats").json()["blobCount"] == 0


def test_the_token_is_not_in_the_servers_repr(server: RelayerServer) -> None:
    assert server.admin_token is not None
    assert server.admin_token not in repr(server)
    assert server.admin_token not in repr(server.relayer.__dict__.get("admin_auth"))


def test_a_given_token_is_used_and_a_short_one_refused(tmp_path: Path) -> None:
    with RelayerServer(tmp_path / "w", fsync=False, admin_token=TOKEN) as server:
        assert server.admin_token == TOKEN
        response = httpx.get(f"{server.url}/_mock/epoch",
                             headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200
    with pytest.raises(ValueError, match="16"):
        RelayerServer(tmp_path / "w2", fsync=False, admin_token="short")


def test_a_served_relayer_cannot_be_opened(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="token"):
        RelayerServer(tmp_path / "w", fsync=False, open_admin=True)


def test_without_admin_routes_there_is_no_token(tmp_path: Path) -> None:
    with RelayerServer(tmp_path / "w", fsync=False, admin=False) as server:
        assert server.admin_token is None
        with server.client() as client:
            assert client.get("/_mock/epoch").status_code == 404


# -- --jwt-secret -------------------------------------------------------------------------


def test_jwt_secret_mode_admin_routes_need_the_admin_token(tmp_path: Path) -> None:
    jwt = encode_token({"exp": 4_000_000_000, "jti": "one"}, SECRET)
    with RelayerServer(tmp_path / "w", fsync=False, jwt_secret=SECRET) as server:
        with httpx.Client(base_url=server.url,
                          headers={"Authorization": f"Bearer {jwt}"}) as client:
            blob_id = _store(client)
            # a publisher JWT is no admin credential
            jwt2 = encode_token({"exp": 4_000_000_000, "jti": "two"}, SECRET)
            _assert_all_refused(server.url, blob_id, {"Authorization": f"Bearer {jwt2}"},
                                server.data_dir)
            assert client.get("/_mock/stats").status_code == 401
        _assert_untouched(server, blob_id)
        # the admin token sent beside a publisher JWT: both routes work
        jwt3 = encode_token({"exp": 4_000_000_000, "jti": "three"}, SECRET)
        with server.client(headers={"Authorization": f"Bearer {jwt3}"}) as both:
            assert both.put("/v1/blobs", content=b"with both").status_code == 200
            assert both.get("/_mock/stats").json()["blobCount"] == 2


def test_jwt_secret_embedded_relayer_is_not_open(tmp_path: Path) -> None:
    with EmbeddedRelayer(tmp_path / "r", fsync=False, jwt_secret=SECRET) as relayer:
        assert relayer.admin_token is not None
        with httpx.Client(transport=relayer.transport, base_url=relayer.base_url) as raw:
            assert raw.get("/_mock/stats").status_code == 401
            assert raw.post("/_mock/reset").status_code == 401
        with relayer.client() as admin:
            assert admin.get("/_mock/stats").status_code == 200
    with pytest.raises(ValueError, match="jwt_secret"):
        create_app(tmp_path / "r2", fsync=False, jwt_secret=SECRET, open_admin=True)


# -- in-process apps ----------------------------------------------------------------------


def test_the_embedded_default_stays_open(tmp_path: Path) -> None:
    """Intended: nothing outside this process can reach an app no socket serves, and
    walrus_mem's embedded mode deletes forgotten blobs through these routes."""
    with EmbeddedRelayer(tmp_path / "r", fsync=False) as relayer:
        assert relayer.admin_token is None
        with httpx.Client(transport=relayer.transport, base_url=relayer.base_url) as raw:
            assert raw.get("/_mock/info").status_code == 200


def test_create_app_needs_a_token_by_default(tmp_path: Path) -> None:
    app = create_app(tmp_path / "a", fsync=False)
    token = app.state.relayer.admin_token
    assert token
    transport = httpx.ASGITransport(app=app)

    async def run() -> tuple[int, int]:
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            refused = (await client.get("/_mock/info")).status_code
            allowed = (await client.get("/_mock/info",
                                        headers={ADMIN_TOKEN_HEADER: token})).status_code
            return refused, allowed

    import asyncio

    assert asyncio.run(run()) == (401, 200)
    app.state.relayer.store.close()


# -- binding ------------------------------------------------------------------------------


def test_non_loopback_bind_is_refused_without_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.1"):
        code = main(["--host", host, "--port", "0", "--data-dir", str(tmp_path / "d")])
        assert code != 0
        assert "--allow-remote" in capsys.readouterr().err
    assert not (tmp_path / "d" / ADMIN_TOKEN_FILE).exists()
    with pytest.raises(ValueError, match="allow_remote"):
        RelayerServer(tmp_path / "w", host="0.0.0.0", fsync=False)


def test_non_loopback_bind_with_the_flag_still_needs_the_token(tmp_path: Path) -> None:
    with RelayerProcess(tmp_path / "w",
                        extra_args=["--host", "0.0.0.0", "--allow-remote", "--no-fsync"]) as proc:
        url = proc.url.replace("0.0.0.0", "127.0.0.1")
        assert httpx.get(f"{url}/_mock/info").status_code == 401
        assert httpx.post(f"{url}/_mock/reset").status_code == 401
        ok = httpx.get(f"{url}/_mock/info", headers=proc.admin_headers)
        assert ok.status_code == 200


# -- the CLI's token ----------------------------------------------------------------------


def test_cli_process_writes_a_private_token_file_and_reuses_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "w"
    with open(tmp_path / "stderr.txt", "w") as stderr, \
            RelayerProcess(data_dir, extra_args=["--no-fsync"], stderr=stderr) as proc:
        token_file = data_dir / ADMIN_TOKEN_FILE
        mode = stat.S_IMODE(token_file.stat().st_mode)
        assert mode == 0o600
        token = token_file.read_text().strip()
        assert proc.admin_token == token
        assert httpx.get(f"{proc.url}/_mock/stats").status_code == 401
        assert httpx.get(f"{proc.url}/_mock/stats",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 200
    told = (tmp_path / "stderr.txt").read_text()
    assert str(token_file) in told and token not in told  # where it is, never the token
    # a second process over the same data dir (a split deployment, a restart) shares it
    with RelayerProcess(data_dir, extra_args=["--no-fsync"]) as again:
        assert again.admin_token == token


def test_cli_process_takes_the_token_from_the_environment(tmp_path: Path) -> None:
    with RelayerProcess(tmp_path / "w", admin_token=TOKEN, extra_args=["--no-fsync"]) as proc:
        assert TOKEN not in " ".join(proc.args)  # never on a command line others can read
        assert httpx.get(f"{proc.url}/_mock/epoch",
                         headers={ADMIN_TOKEN_HEADER: TOKEN}).status_code == 200
        assert httpx.get(f"{proc.url}/_mock/epoch").status_code == 401
    assert not (tmp_path / "w" / ADMIN_TOKEN_FILE).exists()


def test_token_file_is_refused_when_others_can_read_it_or_it_is_a_link(tmp_path: Path) -> None:
    token, path = load_or_create_token(tmp_path / "d")
    assert load_or_create_token(tmp_path / "d") == (token, path)
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="0600"):
        load_or_create_token(tmp_path / "d")
    other = tmp_path / "e"
    other.mkdir()
    (tmp_path / "elsewhere").write_text("x" * 40)
    os.chmod(tmp_path / "elsewhere", 0o600)
    (other / ADMIN_TOKEN_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="link"):
        load_or_create_token(other)


# -- walrus_mem over HTTP -----------------------------------------------------------------


def test_walrus_mem_deletes_through_the_admin_routes_only_with_the_token(
    tmp_path: Path, server: RelayerServer
) -> None:
    def memory(data_dir: Path, **kw: object) -> Memory:
        settings = make_settings(data_dir, publisher_url=server.url,
                                 aggregator_urls=server.url, **kw)
        return Memory(settings, embedder=HashEmbedder(64), master_key=MASTER_HEX)

    with memory(tmp_path / "a") as mem:
        kept = mem.remember("a fact kept on storage")
        report = mem.forget(kept.id)
        assert report.deleted_blobs == []  # as on real Walrus: no delete without the token
        assert httpx.get(f"{server.url}/v1/blobs/{kept.blob_id}").status_code == 200
    assert server.admin_token is not None
    with memory(tmp_path / "b", mock_admin_token=server.admin_token) as mem:
        solo = mem.remember("a fact deleted from storage")
        report = mem.forget(solo.id)
        assert report.deleted_blobs == [solo.blob_id]
        assert httpx.get(f"{server.url}/v1/blobs/{solo.blob_id}").status_code == 404
        assert server.admin_token not in repr(mem.settings)
