"""Shared helpers for the CLI, demo and docs tests."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from click.testing import CliRunner, Result

from walrus_mem._cli.main import cli

TEST_MASTER_HEX = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


def invoke(
    args: Sequence[str],
    *,
    expect: int | None = 0,
    input: str | None = None,
    env: dict[str, str] | None = None,
) -> Result:
    """Run the CLI in-process; assert the exit code, showing all output when it differs."""
    runner = CliRunner()
    result = runner.invoke(cli, list(args), input=input, env=env, prog_name="walrus-mem")
    if expect is not None and result.exit_code != expect:
        exc = result.exception
        detail = ""
        if exc is not None and not isinstance(exc, SystemExit):
            import traceback

            detail = "".join(traceback.format_exception(exc))
        raise AssertionError(
            f"walrus-mem {' '.join(args)} exited {result.exit_code}, expected {expect}\n"
            f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}\n{detail}"
        )
    return result


ENVELOPE_KEYS = ["ok", "command", "data", "warnings", "error"]


def envelope_of(result: Result) -> dict[str, Any]:
    """The --json envelope on stdout (docs/cli.md): exactly one JSON object, every key
    present, ``ok`` true exactly when the exit code is 0."""
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict) and list(doc) == ENVELOPE_KEYS, result.stdout
    assert doc["ok"] is (result.exit_code == 0), (result.exit_code, doc)
    assert (doc["error"] is None) is doc["ok"], doc
    if doc["error"] is not None:
        assert sorted(doc["error"]) == ["hint", "message", "type"], doc["error"]
    return doc


def invoke_json(args: Sequence[str], **kwargs: Any) -> Any:
    """Run with --json; stdout must be exactly one envelope. Returns its ``data``."""
    result = invoke(["--json", *args], **kwargs)
    return envelope_of(result)["data"]


def assert_no_secret(result: Result, *secrets: str) -> None:
    """No secret (in any case) appears on stdout or stderr."""
    both = (result.stdout + result.stderr).lower()
    for secret in secrets:
        assert secret.lower() not in both, "a secret was printed"


def key_hex_in_env() -> str | None:
    return os.environ.get("WALRUS_MEM_MASTER_KEY")
