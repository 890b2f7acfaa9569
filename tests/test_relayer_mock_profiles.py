"""Issue 25 item 7: relayer_mock's public-network profiles and its off-by-default
``--jwt-verify-upload`` switch, over HTTP."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from relayer_mock.auth import encode_token
from relayer_mock.server import RelayerServer

MiB = 1024 * 1024


def test_the_testnet_profile_answers_as_the_public_network(tmp_path: Path) -> None:
    with RelayerServer(tmp_path / "w", fsync=False, profile="testnet",
                       time_scale=0.01) as server, httpx.Client(base_url=server.url) as c:
        too_big = c.put("/v1/blobs", content=b"x" * (10 * MiB + 1))
        assert too_big.status_code == 413  # the public publishers' 10 MiB cap
        files = {f"f{i}": (f"f{i}", b"x" * 100) for i in range(3)}
        answer = c.put("/v1/quilts?epochs=2", files=files).json()["blobStoreResult"]
        created = answer["newlyCreated"]
        # a real quilt: never under 445,556 B, so 63 storage units, and its cost so
        assert created["blobObject"]["storage"]["storageSize"] == 66_034_000
        assert created["blobObject"]["certifiedEpoch"] is None  # as the public publisher
        assert created["cost"] == 63 * (100_000 * 2 + 20_000)
    with RelayerServer(tmp_path / "d", fsync=False) as server, \
            httpx.Client(base_url=server.url) as c:  # the default stays as it was
        created = c.put("/v1/blobs", content=b"x").json()["newlyCreated"]
        assert created["blobObject"]["certifiedEpoch"] is not None


def test_token_claims_are_checked_only_with_jwt_verify_upload(tmp_path: Path) -> None:
    def wrong_claims(jti: str) -> dict[str, str]:
        claims = {"exp": int(time.time()) + 600, "jti": jti, "epochs": 9, "size": 1}
        return {"Authorization": f"Bearer {encode_token(claims, 'secret-for-tests')}"}

    with RelayerServer(tmp_path / "a", fsync=False, jwt_secret="secret-for-tests") as server, \
            httpx.Client(base_url=server.url) as c:
        # the daemon without --jwt-verify-upload: signature, expiry, single use only
        assert c.put("/v1/blobs?epochs=1", content=b"abc",
                     headers=wrong_claims("one")).status_code == 200
        assert c.put("/v1/blobs?epochs=1", content=b"abc",
                     headers=wrong_claims("one")).status_code == 429  # jti spent
    with RelayerServer(tmp_path / "b", fsync=False, jwt_secret="secret-for-tests",
                       jwt_verify_upload=True) as server, \
            httpx.Client(base_url=server.url) as c:
        refused = c.put("/v1/blobs?epochs=1", content=b"abc", headers=wrong_claims("two"))
        assert refused.status_code == 400
        assert refused.json()["error"]["details"][0]["reason"] == "INVALID_EPOCHS"


def test_a_by_quilt_id_identifier_is_parsed_as_the_daemon_does(tmp_path: Path) -> None:
    """One path segment: ``a%2Fb`` names the patch ``a/b``; ``a/b`` as sent is no route."""
    with RelayerServer(tmp_path / "w", fsync=False, profile="mainnet",
                       time_scale=0.01) as server, httpx.Client(base_url=server.url) as c:
        files = {"a/b": ("a/b", b"slashed"), "c": ("c", b"plain")}
        quilt = c.put("/v1/quilts", files=files).json()["blobStoreResult"]
        quilt_id = quilt["newlyCreated"]["blobObject"]["blobId"]
        time.sleep(0.1)  # the profile's 404 window after a store (3 s x 0.01)
        escaped = c.get(f"/v1/blobs/by-quilt-id/{quilt_id}/a%2Fb")
        assert escaped.status_code == 200 and escaped.content == b"slashed"
        unescaped = c.get(f"/v1/blobs/by-quilt-id/{quilt_id}/a/b")
        assert unescaped.status_code == 404 and unescaped.content == b""
