"""Shared material for the Walrus client tests: the spec's example bodies and a fake clock.

The JSON bodies are the examples of /work/shared/reference/walrus-http-api.md,
verbatim except where the spec abbreviates an id with an ellipsis ("0xe6ac…bc02",
"uIiE…ABAQANAA"): those are expanded to full-length ids of the same shape.
"""

from __future__ import annotations

import json
import random
from typing import Any

BLOB_ID = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk"
QUILT_ID = "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKo"
PATCH_A = "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoBAQDQAA"
PATCH_B = "6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoB0AB7Ag"
DATA17 = b"seventeen bytes!!"  # the size the spec's newlyCreated example reports
PUBLISHER = "http://publisher.test"
AGGREGATORS = ["http://agg1.test", "http://agg2.test", "http://agg3.test"]

NEWLY_CREATED_TEXT = (
    '{"newlyCreated":{"blobObject":{"id":"0xe91eee8c5b6f35b9a250cfc29e30f0d9e5463a21fd8d1ddb0fc22d44db4eac50",'
    '"registeredEpoch":34,"blobId":"M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk","size":17,"encodingType":"RS2",'
    '"certifiedEpoch":34,"storage":{"id":"0x4748cd83217b5ce7aa77e7f1ad6fc5f7f694e26a157381b9391ac65c47815faf",'
    '"startEpoch":34,"endEpoch":35,"storageSize":66034000},"deletable":false},'
    '"resourceOperation":{"registerFromScratch":{"encodedLength":66034000,"epochsAhead":1}},"cost":132300}}'
)
NEWLY_CREATED: dict[str, Any] = json.loads(NEWLY_CREATED_TEXT)


def newly_created(size: int) -> dict[str, Any]:
    """The spec's newlyCreated answer for a blob of ``size`` bytes (the client checks it)."""
    answer: dict[str, Any] = json.loads(NEWLY_CREATED_TEXT)
    answer["newlyCreated"]["blobObject"]["size"] = size
    return answer

ALREADY_CERTIFIED_EVENT: dict[str, Any] = {
    "alreadyCertified": {
        "blobId": BLOB_ID,
        "event": {"txDigest": "4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs", "eventSeq": "0"},
        "endEpoch": 35,
    }
}
OBJECT_ID = "0x" + "ab" * 32
ALREADY_CERTIFIED_OBJECT: dict[str, Any] = {
    "alreadyCertified": {"blobId": BLOB_ID, "object": OBJECT_ID, "endEpoch": 35}
}
MARKED_INVALID: dict[str, Any] = {
    "markedInvalid": {
        "blobId": BLOB_ID,
        "event": {"txDigest": "4XQHFa9S324wTzYHF3vsBSwpUZuLpmwTHYMFv9nsttSs", "eventSeq": "1"},
    }
}
STORE_ERROR_200: dict[str, Any] = {
    "error": {"blobId": None, "failurePhase": "register", "errorMsg": "insufficient WAL balance"}
}

QUILT_RESULT_TEXT = (
    '{"blobStoreResult":{"newlyCreated":{"blobObject":{"id":"0xe6ac' + "0" * 56 + 'bc02","registeredEpoch":103,'  # noqa: E501
    '"blobId":"6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKo","size":1782224,"encodingType":"RS2","certifiedEpoch":null,'
    '"storage":{"id":"0xbc8f' + "0" * 56 + '758f","startEpoch":103,"endEpoch":104,"storageSize":72040000},"deletable":false},'  # noqa: E501
    '"resourceOperation":{"registerFromScratch":{"encodedLength":72040000,"epochsAhead":1}},"cost":12075000}},'
    ' "storedQuiltBlobs":[{"identifier":"another_walrus.jpg","quiltPatchId":"6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoBAQDQAA"},'  # noqa: E501
    '{"identifier":"walrus.jpg","quiltPatchId":"6XUOE-Q5-nAXHRifN6n9nomVDtHZQbGuAkW3PjlBuKoB0AB7Ag"}]}'
)
QUILT_RESULT: dict[str, Any] = json.loads(QUILT_RESULT_TEXT)

PATCH_LIST: list[dict[str, Any]] = [
    {"identifier": "walrus-38.jpeg", "patch_id": "uIiE" + "x" * 38 + "ABAQANAA", "tags": {}}
]


def envelope(status: str, code: int, reason: str, message: str = "boom",
             domain: str = "daemon.walrus.space") -> dict[str, Any]:
    """The AIP-193 error envelope, keys in the server's order."""
    return {"error": {"status": status, "code": code, "message": message, "details": [
        {"@type": "ErrorInfo", "reason": reason, "domain": domain, "metadata": {}}]}}


BLOB_NOT_FOUND = envelope(
    "NOT_FOUND", 404, "BLOB_NOT_FOUND",
    "the requested blob ID does not exist on Walrus, ensure that it was entered correctly",
)


class FakeClock:
    """Monotonic clock + sleep that only advance when the client sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


class MaxRandom(random.Random):
    """``uniform(a, b)`` always returns ``b``: the jitter's upper bound, to test ceilings."""

    def uniform(self, a: float, b: float) -> float:
        return b
