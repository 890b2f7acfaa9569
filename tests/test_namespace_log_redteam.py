"""Red-team findings on the namespace log (docs/sync.md): a forget pulled from
another machine scrubs the text from disk, concurrent updates with unequal version
counts are conflicts, one bad heads-file line does not block sync, heads starting
with '-' work on the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer
from tests.helpers_log import live, machine


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayerServer]:
    with RelayerServer(tmp_path_factory.mktemp("walrus")) as srv:
        yield srv


def _disk_holds(data_dir: Path, *needles: bytes) -> list[str]:
    found = []
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}:{n.decode()}" for n in needles if n in data]
    return found


def test_forget_pulled_from_another_machine_leaves_no_text_on_disk(tmp_path: Path,
                                                                   server) -> None:
    with machine(tmp_path / "a", server.url) as a:
        x = a.remember("my bank pin hint is 4321 original", namespace="fp")
        a.remember("the sky is blue", namespace="fp")
        h0 = a.sync().manifests["fp"]
    with machine(tmp_path / "b", server.url) as b:
        b.restore("fp", h0)
        b.update(x.id, "my bank pin hint is 9876 updated on B", namespace="fp")
        b.sync("fp")
    with machine(tmp_path / "a", server.url) as a:
        a.forget(x.id, namespace="fp")  # republishes at once
        ha = a.stats("fp").manifest_blob_id
        assert ha is not None
    with machine(tmp_path / "b", server.url) as b:
        report = b.pull(ha, namespace="fp")
        assert report.forgotten == 1 and x.id not in live(b, "fp")
        assert b._catalog.fts_search("fp", '"sky"', 10) != []
    assert _disk_holds(tmp_path / "b", b"4321", b"9876") == []
