"""network_info_command: the network's epoch from `walrus info epoch --json` (the CLI reads
it from Sui) instead of a probe store, which pays for a blob (63 storage units) each
time the epoch must be asked. Against relayer_mock over loopback HTTP, the command a
small script printing the CLI's JSON shape (crates/walrus-service/src/client/responses.rs
InfoEpochOutput, MystenLabs/walrus 3c1cacc)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from relayer_mock.server import RelayerServer
from tests.helpers_log import machine
from walrus_mem._walrus.network_info import NetworkInfo, parse_info

EPOCH_INFO = {"currentEpoch": 40, "startOfCurrentEpoch": {"DateTime": "2026-11-29T00:00:00Z"},
              "epochDuration": {"secs": 86400, "nanos": 0}, "maxEpochsAhead": 53}


def _command(tmp_path: Path, output: object) -> str:
    script = tmp_path / "walrus-info.py"
    script.write_text(f"import json\nprint(json.dumps({output!r}))\n")
    return f"{sys.executable} {script}"


def _stores(srv: RelayerServer) -> int:
    """Stores the relayer answered (each one paid on real Walrus)."""
    return int(srv.relayer.store.stats()["stores"]["total"])


def test_the_walrus_info_shapes_are_parsed() -> None:
    assert parse_info(json.dumps(EPOCH_INFO)) == NetworkInfo(40, 86400.0, 53)
    assert parse_info(json.dumps({"epochInfo": EPOCH_INFO, "storageInfo": {"nShards": 1000}})
                      ) == NetworkInfo(40, 86400.0, 53)
    assert parse_info('{"currentEpoch": "40"}') is None
    assert parse_info("Epoch: 40") is None


def test_probe_epoch_reads_the_command_instead_of_storing(tmp_path: Path) -> None:
    """Before: every probe stored a blob (paid). Now the command's epoch is noted and
    nothing is stored; a failing command falls back to the probe store."""
    with RelayerServer(tmp_path / "walrus", admin=False, fsync=False,
                       initial_epoch=40) as srv:
        with machine(tmp_path / "a", srv.url,
                     network_info_command=_command(tmp_path, EPOCH_INFO)) as a:
            before = _stores(srv)
            assert a.probe_epoch() == 40
            assert _stores(srv) == before  # nothing stored
            assert a.epoch_clock.current() == 40
        with machine(tmp_path / "b", srv.url,
                     network_info_command=f"{sys.executable} -c 'raise SystemExit(3)'") as b:
            assert b.probe_epoch() == 40
            assert _stores(srv) == before + 1  # the fallback probe
