"""The daemon's Prometheus endpoint, as far as a client can learn the network from it.

A real `walrus publisher|aggregator|daemon` serves metrics on a separate address
(``--metrics-address``, default 127.0.0.1:27182, ``GET /metrics``, mysten-metrics'
``start_prometheus_server``) and, from ``run_daemon_app``, sets the gauge

    walrus_contract_info{active_address="0x…",staking_object="0x…",system_object="0x…"} 1

(MystenLabs/walrus 3c1cacc: crates/walrus-service/src/common/utils.rs
``export_contract_info``, crates/walrus-service/src/client/cli/runner.rs). It is the only
place a running daemon names the Walrus system object: ``/status`` answers ``OK`` and
store answers carry no network id. The mock serves that one gauge (with the label
order the Rust prometheus crate prints: sorted by name) on its own loopback port. Its
ids are random per data dir (file ``contract-ids.json``): a wiped network (a new data
dir) is another system object, a restart on the same dir the same one.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["MetricsServer", "contract_ids", "metrics_text"]

IDS_FILE = "contract-ids.json"


def contract_ids(data_dir: Path) -> dict[str, str]:
    """The mock network's system and staking object ids (made once per data dir)."""
    path = Path(data_dir) / IDS_FILE
    try:
        ids = json.loads(path.read_text())
        if isinstance(ids, dict) and {"system_object", "staking_object"} <= ids.keys():
            return {k: str(ids[k]) for k in ("system_object", "staking_object")}
    except (OSError, ValueError):
        pass
    ids = {k: "0x" + secrets.token_hex(32) for k in ("system_object", "staking_object")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ids))
    os.replace(tmp, path)
    return ids


def metrics_text(ids: dict[str, str], active_address: str = "") -> str:
    """The Prometheus text the daemon's registry prints for walrus_contract_info."""
    return ("# HELP walrus_contract_info Walrus smart-contract information\n"
            "# TYPE walrus_contract_info gauge\n"
            f'walrus_contract_info{{active_address="{active_address}",'
            f'staking_object="{ids["staking_object"]}",'
            f'system_object="{ids["system_object"]}"}} 1\n')


class MetricsServer:
    """``GET /metrics`` on 127.0.0.1:``port`` (0: a free one); ``url`` once started."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.ids = contract_ids(data_dir)
        body = metrics_text(self.ids).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.url = f"http://{host}:{self.port}/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name=f"relayer-mock-metrics-{self.port}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
