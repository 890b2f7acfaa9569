"""relayer_mock over real loopback HTTP (uvicorn thread and child process), the CLI, and
compatibility with how third-party Walrus clients talk to it."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relayer_mock._ids import parse_quilt_patch_id
from relayer_mock.cli import build_fault_config, default_data_dir, main, parse_size
from relayer_mock.faults import FaultConfig, FaultKind
from relayer_mock.server import RelayerProcess, RelayerServer

MiB = 1024 * 1024

# Examples from the Walrus docs, as quoted in the wire spec (compact JSON, docs key order).
DOCS_NEWLY_CREATED: dict[str, Any] = {"newlyCreated": {"blobObject": {
    "id": "0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50",
    "registeredEpoch": 34, "blobId": "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk", "size": 17,
    "encodingType": "RS2", "certifiedEpoch": 34,
    "storage": {"id": "0x4748cd83217b5ce7aa77e7f1ad6fc5f7f694e26a157381b9391ac65c47815faf",
                "startEpoch": 34, "endEpoch": 35, "storageSize": 66034000},
    "deletable": False},
    "resourceOperation": {"registerFromScratch": {"encodedLength": 66034000, "epochsAhead": 1}},
    "cost": 132300}}
DOCS_ALREADY_CERTIFIED: dict[str, Any] = {"alreadyCertified": {
    "blobId": "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk",
    "event": {"txDigest": "4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs", "eventSeq": "0"},
    "endEpoch": 35}}
DOCS_QUILT: dict[str, Any] = {"blobStoreResult": {"newlyCreated": {"blobObject": {
    "id": "0xe6ac" + "0" * 56 + "bc02", "registeredEpoch": 103,
    "blobId": "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKo", "size": 1782224,
    "encodingType": "RS2", "certifiedEpoch": None,
    "storage": {"id": "0xbc8f" + "0" * 56 + "758f", "startEpoch": 103, "endEpoch": 104,
                "storageSize": 72040000},
    "deletable": False},
    "resourceOperation": {"registerFromScratch": {"encodedLength": 72040000, "epochsAhead": 1}},
    "cost": 12075000}},
    "storedQuiltBlobs": [
        {"identifier": "another_walrus.jpg",
         "quiltPatchId": "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoBAQDQAA"},
        {"identifier": "walrus.jpg",
         "quiltPatchId": "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoB0AB7Ag"}]}
DOCS_PATCHES: list[dict[str, Any]] = [{"identifier": "walrus-38.jpeg",
                 "patch_id": "uIiEbhP2qgZYygEGxJX1GeB-rQATo2yufC2DCp7B4iABAQANAA", "tags": {}}]
BLOB_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")
OBJECT_ID = re.compile(r"^0x[0-9a-f]{64}$")
BASE58 = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$")


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def shape(value: Any) -> Any:
    """Key order and JSON types, recursively (lists: the first element)."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path / "walrus", fsync=False) as running:
        yield running


# -- RelayerServer ------------------------------------------------------------------------


def test_server_round_trip_over_loopback(server: RelayerServer) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    assert server.port > 0
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/status").text == "OK"
        stored = client.put("/v1/blobs?epochs=2", content=b"over the wire").json()
        blob_id = stored["newlyCreated"]["blobObject"]["blobId"]
        read = client.get(f"/v1/blobs/{blob_id}")
        assert read.content == b"over the wire"
        assert read.headers["etag"] == blob_id
        head = client.head(f"/v1/blobs/{blob_id}")
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-length"] == "13"
        missing = client.get("/v1/blobs/nope/extra/segments")
        assert (missing.status_code, missing.content) == (404, b"")


def test_server_drop_is_a_real_transport_error(tmp_path: Path) -> None:
    faults = FaultConfig.only(FaultKind.DROP, 1.0, seed=1)
    with RelayerServer(tmp_path / "w", faults=faults, fsync=False) as srv:
        with srv.client() as client:
            with pytest.raises(httpx.RemoteProtocolError):
                client.put("/v1/blobs", content=b"x" * 1000)
            client.put("/_mock/faults", json={})
            blob_id = client.get("/_mock/blobs").json()["blobs"][0]["blobId"]
            client.put("/_mock/faults", json={"probabilities": {"drop": 1}})
            with pytest.raises(httpx.RemoteProtocolError, match="incomplete|peer closed"):
                client.get(f"/v1/blobs/{blob_id}")
            # the server is fine afterwards
            client.put("/_mock/faults", json={})
            assert client.get(f"/v1/blobs/{blob_id}").content == b"x" * 1000


def test_server_truncate_keeps_content_length_consistent(tmp_path: Path) -> None:
    with RelayerServer(tmp_path / "w", fsync=False) as srv, srv.client() as c:
        blob_id = c.put("/v1/blobs", content=b"y" * 5000).json()["newlyCreated"]["blobObject"][
            "blobId"]
        c.put("/_mock/faults", json={"probabilities": {"truncate": 1}})
        response = c.get(f"/v1/blobs/{blob_id}")
        assert response.status_code == 200
        assert int(response.headers["content-length"]) == len(response.content) < 5000


@pytest.mark.slow
def test_server_default_body_limit_is_10_mib(server: RelayerServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        exact = client.put("/v1/blobs", content=b"\x00" * (10 * MiB))
        assert exact.status_code == 200
        assert exact.json()["newlyCreated"]["blobObject"]["size"] == 10 * MiB
        over = client.put("/v1/blobs", content=b"\x00" * (10 * MiB + 1))
        assert over.status_code == 413
        assert over.text == "Failed to buffer the request body: length limit exceeded"


def test_two_servers_share_a_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "shared"
    with RelayerServer(data_dir, fsync=False) as a, RelayerServer(data_dir, fsync=False) as b:
        assert a.url != b.url
        blob_id = httpx.put(f"{a.url}/v1/blobs", content=b"from a").json()["newlyCreated"][
            "blobObject"]["blobId"]
        assert httpx.get(f"{b.url}/v1/blobs/{blob_id}").content == b"from a"


def test_server_stop_is_idempotent(tmp_path: Path) -> None:
    srv = RelayerServer(tmp_path / "w", fsync=False).start()
    url = srv.url
    assert "RelayerServer(url=" in repr(srv)
    srv.stop()
    srv.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/status", timeout=2)


# -- third-party client compatibility -----------------------------------------------------


def test_docs_examples_byte_for_byte(tmp_path: Path) -> None:
    """With the docs' epoch and prices, responses equal the docs examples once the random
    object ids, blob ids and tx digests are substituted."""
    with RelayerServer(tmp_path / "w", fsync=False, initial_epoch=34, storage_price=1000,
                       write_price=1100) as srv, httpx.Client(base_url=srv.url) as client:
        response = client.put("/v1/blobs?epochs=1&permanent=true", content=b"17 bytes of data!")
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        obj = body["newlyCreated"]["blobObject"]
        example = DOCS_NEWLY_CREATED["newlyCreated"]["blobObject"]
        text = (response.text.replace(obj["id"], example["id"])
                .replace(obj["storage"]["id"], example["storage"]["id"])
                .replace(obj["blobId"], example["blobId"]))
        assert text == compact(DOCS_NEWLY_CREATED)

        again = client.put("/v1/blobs?epochs=1&permanent=true", content=b"17 bytes of data!")
        event = again.json()["alreadyCertified"]["event"]
        assert BASE58.match(event["txDigest"])
        text = again.text.replace(obj["blobId"], example["blobId"]).replace(
            event["txDigest"], "4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs")
        assert text == compact(DOCS_ALREADY_CERTIFIED)


def test_docs_quilt_patch_id_layout() -> None:
    quilt_id, start, end = parse_quilt_patch_id(
        DOCS_QUILT["storedQuiltBlobs"][0]["quiltPatchId"])
    assert quilt_id == "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKo"
    assert (start, end) == (1, 208)


def test_walrus_python_style_requests(server: RelayerServer) -> None:
    """walrus_python 0.1.0 uses sync `requests`: raw PUT body, epochs param, JSON envelope."""
    requests = pytest.importorskip("requests")
    publisher = aggregator = server.url
    response = requests.put(f"{publisher}/v1/blobs", params={"epochs": 3}, data=b"hello",
                            timeout=30)
    response.raise_for_status()
    info = response.json()
    blob_object = info["newlyCreated"]["blobObject"]
    assert shape(info) == shape(DOCS_NEWLY_CREATED)
    assert BLOB_ID.match(blob_object["blobId"]) and OBJECT_ID.match(blob_object["id"])
    assert isinstance(info["newlyCreated"]["cost"], int)
    got = requests.get(f"{aggregator}/v1/blobs/{blob_object['blobId']}", timeout=30)
    assert got.content == b"hello"
    by_object = requests.get(f"{aggregator}/v1/blobs/by-object-id/{blob_object['id']}",
                             timeout=30)
    assert by_object.content == b"hello"
    head = requests.head(f"{aggregator}/v1/blobs/{blob_object['blobId']}", timeout=30)
    assert head.headers["ETag"] == blob_object["blobId"]
    with requests.put(f"{publisher}/v1/blobs", params={"epochs": 1}, data=iter([b"str", b"eam"]),
                      timeout=30) as streamed:
        assert streamed.json()["newlyCreated"]["blobObject"]["size"] == 6
    missing = requests.get(f"{aggregator}/v1/blobs/{'A' * 43}", timeout=30)
    error = missing.json()["error"]
    assert (error["code"], error["status"]) == (404, "NOT_FOUND")  # WalrusAPIError fields
    assert error["details"][0]["reason"] == "BLOB_NOT_FOUND"


def test_pytusk_and_memwal_style_async_httpx(server: RelayerServer) -> None:
    """pytusk / memwal_checkpoint use async httpx: blobs, quilts, patches, byte ranges."""

    async def run() -> None:
        timeout = httpx.Timeout(connect=5, read=300, write=300, pool=60)
        async with httpx.AsyncClient(timeout=timeout) as client:
            url = server.url
            owner = "0x" + "1" * 64
            stored = await client.put(f"{url}/v1/blobs?epochs=2&send_object_to={owner}",
                                      content=b"async bytes")
            result = stored.json()
            blob_id = (result.get("newlyCreated", {}).get("blobObject", {}).get("blobId")
                       or result["alreadyCertified"]["blobId"])
            assert (await client.get(f"{url}/v1/blobs/{blob_id}")).content == b"async bytes"
            ranged = await client.get(f"{url}/v1/blobs/{blob_id}/byte-range",
                                      params={"start": 6, "length": 5})
            assert ranged.content == b"bytes"
            files = {"walrus.jpg": ("walrus.jpg", b"jpg"),
                     "another_walrus.jpg": ("another_walrus.jpg", b"another")}
            quilt = (await client.put(f"{url}/v1/quilts?epochs=1", files=files)).json()
            example = DOCS_QUILT
            ours = {**quilt, "storedQuiltBlobs": [
                {k: v for k, v in entry.items() if k != "range"}
                for entry in quilt["storedQuiltBlobs"]]}
            ours_obj = ours["blobStoreResult"]["newlyCreated"]["blobObject"]
            assert isinstance(ours_obj["certifiedEpoch"], int)
            ours_obj["certifiedEpoch"] = None  # the docs example shows null
            assert shape(ours) == shape(example)
            quilt_id = ours_obj["blobId"]
            for entry in quilt["storedQuiltBlobs"]:
                patch = await client.get(f"{url}/v1/blobs/by-quilt-patch-id/"
                                         f"{entry['quiltPatchId']}")
                assert patch.content == files[entry["identifier"]][1]
                by_id = await client.get(
                    f"{url}/v1/blobs/by-quilt-id/{quilt_id}/{entry['identifier']}")
                assert by_id.content == files[entry["identifier"]][1]
            patches = (await client.get(f"{url}/v1/quilts/{quilt_id}/patches")).json()
            assert shape(patches) == shape(DOCS_PATCHES)

    asyncio.run(run())


# -- RelayerProcess and the CLI -----------------------------------------------------------


def test_process_survives_kill_and_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "crash"
    first = RelayerProcess(data_dir).start()
    try:
        assert first.url.startswith("http://127.0.0.1:")
        with first.client() as client:
            ids = [client.put("/v1/blobs?epochs=5", content=b"fact %d" % i).json()[
                "newlyCreated"]["blobObject"]["blobId"] for i in range(20)]
            client.post("/_mock/epoch/advance?by=2")
    finally:
        assert first.kill() == -signal.SIGKILL
    with RelayerProcess(data_dir) as second, second.client() as client:
        assert second.url != "" and second.pid != first.pid
        assert client.get("/_mock/epoch").json()["currentEpoch"] == 3
        for i, blob_id in enumerate(ids):
            assert client.get(f"/v1/blobs/{blob_id}").content == b"fact %d" % i
        assert client.get("/_mock/stats").json()["stores"]["newlyCreated"] == 20


def test_two_processes_on_one_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "shared"
    fast = ["--no-fsync"]
    with (RelayerProcess(data_dir, extra_args=fast) as a,
          RelayerProcess(data_dir, extra_args=fast) as b):
        errors: list[BaseException] = []

        def writer(url: str, tag: bytes) -> None:
            try:
                with httpx.Client(base_url=url) as client:
                    for i in range(30):
                        response = client.put("/v1/blobs", content=tag + b"%d" % i)
                        assert response.status_code == 200
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(a.url, b"a")),
                   threading.Thread(target=writer, args=(b.url, b"b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        for proc in (a, b):
            stats = httpx.get(f"{proc.url}/_mock/stats", headers=proc.admin_headers).json()
            assert stats["blobCount"] == 60
            assert stats["requests"]["put_blob"] == 60
        listed = httpx.get(f"{a.url}/_mock/blobs", headers=a.admin_headers).json()["blobs"]
        with httpx.Client(base_url=b.url) as client:
            for entry in listed:
                assert client.get(f"/v1/blobs/{entry['blobId']}").status_code == 200


def test_process_cli_fault_and_size_options(tmp_path: Path) -> None:
    args = ["--fault", "500=1", "--max-blob-size", "1KiB", "--retry-after", "2",
            "--epoch-duration", "3600"]
    with RelayerProcess(tmp_path / "w", extra_args=args) as proc:
        with proc.client() as client:
            assert client.put("/v1/blobs", content=b"z" * 1025).status_code == 413
            assert client.put("/v1/blobs", content=b"z").status_code == 500
            faults = client.get("/_mock/faults").json()
            assert faults["probabilities"] == {"500": 1.0}
            assert faults["retry_after"] == 2
            assert client.get("/_mock/epoch").json()["epochDuration"] == 3600.0
            assert client.get("/_mock/stats").json()["settings"]["maxBlobSize"] == 1024
        assert proc.stop() in (0, -signal.SIGTERM)


def test_process_without_admin_routes_is_like_real_walrus(tmp_path: Path) -> None:
    with RelayerProcess(tmp_path / "w", extra_args=["--no-admin"]) as proc, \
            proc.client() as client:
        assert client.get("/_mock/epoch").status_code == 404
        stored = client.put("/v1/blobs", content=b"z").json()["newlyCreated"]["blobObject"]
        assert stored["registeredEpoch"] == 1  # the epoch is in store answers only


def test_process_faults_config_round_trips(tmp_path: Path) -> None:
    config = FaultConfig.mix(0.3, seed=5, kinds="5xx,429", latency_ms=(0, 1))
    with RelayerProcess(tmp_path / "w", faults=config) as proc:
        got = httpx.get(f"{proc.url}/_mock/faults", headers=proc.admin_headers).json()
    assert FaultConfig.model_validate({k: v for k, v in got.items() if k != "enabled"}) == config


def test_cli_main_help_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--fault-rate", "--seed", "--fault-kinds", "--latency-ms", "--epoch-duration",
                   "--max-blob-size", "--data-dir", "--lying"):
        assert option in out
    assert main(["--fault-rate", "2"]) == 2
    assert main(["--fault-kinds", "nope", "--port", "0"]) == 2
    assert "unknown fault kind" in capsys.readouterr().err
    assert main(["--max-blob-size", "ten"]) == 2


def test_cli_helpers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert parse_size("10MiB") == 10 * MiB
    assert parse_size("512KiB") == 512 * 1024
    assert parse_size("2k") == 2000
    assert parse_size("77") == 77
    with pytest.raises(ValueError):
        parse_size("1.5MiB")
    monkeypatch.setenv("RELAYER_MOCK_DATA_DIR", str(tmp_path / "env-dir"))
    assert default_data_dir() == tmp_path / "env-dir"
    config = build_fault_config(fault_rate=0.3, seed=9, fault_kinds="5xx,drop",
                                fault_probs=["429=0.1"], lying=0.2, latency_ms="1-3")
    assert config.rate == 0.3 and config.seed == 9
    assert config.kinds == (FaultKind.HTTP_500, FaultKind.HTTP_503, FaultKind.HTTP_504,
                            FaultKind.DROP)
    assert config.probabilities == {FaultKind.HTTP_429: 0.1, FaultKind.LIE: 0.2}
    assert config.latency_ms == (1, 3)
    with pytest.raises(ValueError):
        build_fault_config(fault_probs=["429"])
