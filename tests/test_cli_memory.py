"""Memory commands of the CLI against a temp data dir (embedded relayer), once over HTTP."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from relayer_mock.server import RelayerServer

from .helpers_cli import TEST_MASTER_HEX, assert_no_secret, envelope_of
from .helpers_cli import invoke as _invoke


@pytest.fixture(autouse=True)
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")


def invoke(args, **kwargs):
    """Every CLI run in this module is also scanned for the master key."""
    result = _invoke(args, **kwargs)
    assert_no_secret(result, TEST_MASTER_HEX)
    return result


def j(args, **kwargs):
    result = invoke(["--json", *args], **kwargs)
    return envelope_of(result)["data"]


def one_error_line(result, name: str) -> str:
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("walrus-mem: error: ") and f"[{name}]" in lines[0]
    return lines[0]


def test_remember_recall_get_list_round_trip():
    rec = j(["remember", "I'm", "allergic", "to", "peanuts", "-c", "identity",
             "-m", "source=chat", "-m", "turn:=3"])
    assert rec["text"] == "I'm allergic to peanuts"
    assert rec["metadata"] == {"source": "chat", "turn": 3}
    assert rec["status"] == "published" and rec["blob_id"]
    again = j(["remember", "I'm allergic to   peanuts"])
    # a re-statement is a write: the same memory under a new id (walrus_mem/_memory/restate.py)
    assert again["deduplicated"] is True and again["id"] != rec["id"]
    assert again["metadata"] == rec["metadata"] and again["category"] == "identity"
    invoke(["get", rec["id"]], expect=1)
    rec = again
    from_stdin = j(["remember", "-"], input="Ana lives in Lisbon\n")
    assert from_stdin["text"] == "Ana lives in Lisbon"

    result = j(["recall", "allergic", "peanuts", "-k", "3", "--min-score", "0"])
    assert result["hits"][0]["record"]["id"] == rec["id"]
    assert {"candidates", "filtered_out", "below_min_score"} <= set(result)
    table = invoke(["recall", "allergic to peanuts", "--min-score", "0"]).stdout
    assert rec["id"] in table and "peanuts" in table

    got = j(["get", rec["id"], "--verify"])
    assert got["text"] == rec["text"] and got["verified"] is True
    assert "verified" in invoke(["get", rec["id"], "--verify"]).stdout

    listed = j(["list"])["memories"]
    assert {r["id"] for r in listed} == {rec["id"], from_stdin["id"]}
    plain = invoke(["list"]).stdout
    assert rec["id"] in plain and "\x1b[" not in plain  # no colour codes in a pipe


def test_filters_on_recall_and_list():
    j(["remember", "tea is my morning drink", "-m", "source=chat"])
    j(["remember", "tea with lemon is fine", "-m", "source=email"])
    hits = j(["recall", "tea", "--min-score", "0", "--filter", "source=email"])
    assert [h["record"]["metadata"]["source"] for h in hits["hits"]] == ["email"]
    assert hits["filtered_out"] == 1
    listed = j(["list", "--filter", '{"source": {"in": ["chat"]}}'])["memories"]
    assert [r["metadata"]["source"] for r in listed] == ["chat"]
    both = j(["list", "-f", "source=chat", "-f", '{"text": {"icontains": "LEMON"}}'])["memories"]
    assert both == []
    invoke(["list", "--filter", "{not json"], expect=2)
    bad = invoke(["list", "--filter", '{"source": {"near": 1}}'], expect=1)
    one_error_line(bad, "InvalidInput")


def test_update_history_forget_and_errors():
    rec = j(["remember", "The staging database is orca"])
    updated = j(["update", rec["id"], "The staging database is orca-2", "-c", "configuration"])
    assert updated["version"] == 2 and updated["category"] == "configuration"
    events = [e["event"] for e in j(["history", rec["id"]])["versions"]]
    assert events == ["ADD", "UPDATE"]
    assert "orca-2" in invoke(["history", rec["id"]]).stdout

    report = j(["forget", rec["id"]])
    assert report["forgotten"] == [rec["id"]]
    history = j(["history", rec["id"]])["versions"]
    assert history[-1]["event"] == "DELETE" and history[-1]["text"] is None
    line = one_error_line(invoke(["get", rec["id"]], expect=1), "MemoryNotFound")
    assert rec["id"] in line
    one_error_line(invoke(["get", "not-an-id"], expect=1), "InvalidInput")
    one_error_line(invoke(["remember", "   "], expect=1), "InvalidInput")
    one_error_line(invoke(["-n", "Bad Name", "list"], expect=1), "InvalidNamespace")
    loud = invoke(["-v", "get", rec["id"]], expect=1)
    assert "Traceback" in loud.stderr
    invoke(["remember"], expect=2)
    invoke(["recall"], expect=2)


def test_forget_all_needs_yes_and_namespaces_are_separate():
    j(["-n", "alpha", "remember", "alpha fact"])
    j(["-n", "beta", "remember", "beta fact"])
    refused = invoke(["-n", "alpha", "forget-all"], expect=2)
    assert "--yes" in refused.stderr
    assert len(j(["-n", "alpha", "list"])["memories"]) == 1
    report = j(["-n", "alpha", "forget-all", "--yes"])
    assert len(report["forgotten"]) == 1
    assert j(["-n", "alpha", "list"])["memories"] == []
    assert [r["text"] for r in j(["-n", "beta", "list"])["memories"]] == ["beta fact"]
    assert "Forgot 1 memory" in invoke(["-n", "beta", "forget-all", "--yes"]).stdout


def test_import_formats_and_export(tmp_path):
    text = tmp_path / "facts.txt"
    text.write_text("fact one\nfact two\n\nfact one\n")
    summary = j(["import", str(text)])
    assert (summary["stored"], summary["deduplicated"], summary["failed"]) == (2, 1, [])

    jsonl = tmp_path / "facts.jsonl"
    jsonl.write_text(
        json.dumps({"text": "likes jazz", "metadata": {"source": "import"}}) + "\n"
        + json.dumps({"text": "   "}) + "\n"
        + json.dumps({"text": "works at night", "category": "preference"}) + "\n"
    )
    res = invoke(["--json", "import", str(jsonl)], expect=1)  # one item failed
    summary = envelope_of(res)["data"]
    assert summary["stored"] == 2 and [f["index"] for f in summary["failed"]] == [1]

    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "travel.md").write_text(
        "---\ntitle: travel\n---\n# Travel\nPrefers window seats\non long flights.\n\n"
        "- Passport expires in 2031\n- [x] Loves Lisbon\n\n```\nnot a fact\n```\n"
    )
    (notes / "sub" / "work.md").write_text("Uses a standing desk.\n")
    summary = j(["import", str(notes)])
    assert summary["stored"] == 4
    listed = {r["text"]: r["metadata"] for r in j(["list", "--limit", "100"])["memories"]}
    assert listed["Prefers window seats on long flights."] == {
        "source": "travel.md", "section": "Travel"}
    assert listed["Loves Lisbon"]["section"] == "Travel"
    assert listed["Uses a standing desk."] == {"source": "sub/work.md"}
    assert not any("not a fact" in t for t in listed)

    exported = invoke(["export"])
    lines = exported.stdout.splitlines()
    assert len(lines) == 8 and all(json.loads(line)["text"] for line in lines)
    assert "PLAINTEXT" in exported.stderr
    out = tmp_path / "export.jsonl"
    invoke(["export", "-o", str(out)])
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    again = j(["-n", "copy", "import", str(out)])
    assert again["stored"] == 8
    copied = j(["-n", "copy", "list", "--limit", "100"])["memories"]
    assert sorted(r["text"] for r in copied) == sorted(
        json.loads(line)["text"] for line in lines)

    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    one_error_line(invoke(["import", str(empty)], expect=1), "InvalidInput")
    invoke(["import", str(tmp_path / "missing.txt")], expect=2)


def test_stats_sync_expiring_extend_reindex(monkeypatch):
    rec = j(["remember", "the sky is blue"])
    stats = j(["stats"])
    assert stats["memories"] == 1 and stats["embedded"] is True
    sync = j(["sync"])
    assert sync["manifests"]["default"]
    assert j(["stats"])["manifest_blob_id"] == sync["manifests"]["default"]
    assert "manifest_blob_id" in invoke(["stats"]).stdout

    soon = j(["expiring", "--within", "53"])["memories"]
    assert [r["id"] for r in soon] == [rec["id"]]
    assert j(["expiring", "--within", "0"])["memories"] == []
    extended = j(["extend", rec["id"], "--epochs", "20"])
    assert extended["extended"][rec["id"]] > rec["end_epoch"]
    assert j(["extend", "--expiring", "0"]) == {"extended": {}, "failed": []}
    invoke(["extend"], expect=2)
    invoke(["extend", "--all", rec["id"]], expect=2)
    assert rec["id"] in j(["extend", "--all"])["extended"]

    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash-32")
    line = one_error_line(invoke(["recall", "sky"], expect=1), "ModelMismatch")
    assert "reindex" in line
    assert j(["reindex"])["reindexed"] == 1
    assert j(["recall", "sky is blue", "--min-score", "0"])["hits"]


def test_unreachable_publisher_queues_and_sync_reports(monkeypatch):
    monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", "http://127.0.0.1:9")
    rec = j(["remember", "written while offline"])
    assert rec["status"] == "queued"
    assert "queued" in invoke(["remember", "another offline fact"]).stdout
    res = invoke(["--json", "sync"], expect=1)
    report = envelope_of(res)["data"]
    assert report["still_queued"] == 2 and report["errors"]
    assert j(["recall", "written while offline", "--min-score", "0"])["hits"]


def test_over_http_against_relayer_mock_and_restore(tmp_path, monkeypatch):
    """The whole cycle through a real loopback HTTP relayer_mock, then restore elsewhere."""
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", server.url)
        monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", server.url)
        first = ["--data-dir", str(tmp_path / "first")]
        facts = ["I'm allergic to peanuts", "Ana lives in Lisbon", "Tea at 4pm"]
        ids = [j([*first, "remember", f])["id"] for f in facts]
        assert j([*first, "stats"])["embedded"] is False
        assert j([*first, "get", ids[0], "--verify"])["verified"] is True
        manifest = j([*first, "sync"])["manifests"]["default"]

        fresh = ["--data-dir", str(tmp_path / "fresh")]
        one_error_line(invoke([*fresh, "restore"], expect=1), "InvalidInput")
        report = j([*fresh, "restore", "--manifest", manifest])
        assert (report["restored"], report["total"], report["failed"]) == (3, 3, [])
        text = invoke([*fresh, "restore", "--manifest", manifest]).stdout
        assert "3 already here" in text
        hits = j([*fresh, "recall", "allergic to peanuts", "--min-score", "0"])["hits"]
        assert hits[0]["record"]["id"] == ids[0]
        assert sorted(r["id"] for r in j([*fresh, "list"])["memories"]) == sorted(ids)
        doctor = j([*fresh, "doctor", "--no-model"])
        assert doctor["ok"] is True
        assert {c["name"] for c in doctor["checks"]} >= {"publisher", "aggregator"}


def test_sync_pull_and_restore_heads_through_the_cli(tmp_path, monkeypatch):
    """Two data dirs exchange heads with `sync` / `pull`; stale and malformed heads fail."""
    with RelayerServer(tmp_path / "walrus", fsync=False) as server:
        monkeypatch.setenv("WALRUS_MEM_PUBLISHER_URL", server.url)
        monkeypatch.setenv("WALRUS_MEM_AGGREGATOR_URLS", server.url)
        a = ["--data-dir", str(tmp_path / "a"), "-n", "shared"]
        b = ["--data-dir", str(tmp_path / "b"), "-n", "shared"]
        j([*a, "remember", "written on a"])
        text = invoke([*a, "sync"]).stdout
        head1 = j([*a, "stats"])["manifest_blob_id"]
        assert f"Head for shared: {head1}" in text
        restored = invoke([*b, "restore", head1]).stdout  # HEAD as an argument
        assert "1 restored" in restored
        j([*a, "remember", "second on a"])
        head_a = j([*a, "sync"])["manifests"]["shared"]
        j([*b, "remember", "written on b"])
        head_b = j([*b, "sync"])["manifests"]["shared"]
        report = j([*a, "pull", head_b])
        assert (report["added"], report["conflicts"], report["up_to_date"]) == (1, 0, False)
        assert "1 added" in invoke([*b, "pull", head_a, head1, "--allow-stale"]).stdout
        assert sorted(r["text"] for r in j([*a, "list"])["memories"]) == sorted(
            r["text"] for r in j([*b, "list"])["memories"])
        one_error_line(invoke([*b, "pull", head1], expect=1), "StaleManifest")
        one_error_line(invoke([*b, "pull", "not-a.head"], expect=1), "InvalidHead")
        assert "already holds" in invoke([*b, "pull", head_b]).stdout


def test_keys_show_catalog_namespaces_and_manifests(monkeypatch):
    j(["remember", "a fact in default"])
    j(["-n", "side", "remember", "a fact elsewhere"])
    manifest = j(["sync"])["manifests"]["default"]
    rows = {r["namespace"]: r for r in j(["keys"])["namespaces"]}
    assert rows["default"]["manifest_blob_id"] == manifest and rows["default"]["memories"] == 1
    assert rows["side"]["memories"] == 1 and rows["side"]["fingerprint"]
    assert manifest.rsplit(".", 1)[0] in invoke(["keys"]).stdout  # blob id.seq; --json: all
    exported = json.loads(invoke(["keys", "export-public"]).stdout)["namespaces"]
    assert {r["namespace"] for r in exported} == {"default", "side"}
    assert all(set(r) == {"namespace", "agent", "mode", "fingerprint", "verify_key"}
               for r in exported)

    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", "ff" * 32)
    res = invoke(["keys"])
    assert "warning" in res.stderr and "differs" in res.stderr
    assert_no_secret(res, "ff" * 32)


def test_analyze_and_compact():
    result = j(["analyze", "I prefer dark mode in every editor. "
                "We decided to use Postgres for the billing service."])
    texts = [r["text"] for r in result["records"]]
    assert result["stored"] == len(texts) >= 2
    assert any("dark mode" in t for t in texts) and any("Postgres" in t for t in texts)
    again = invoke(["analyze", "-"], input="I prefer dark mode in every editor.\n")
    assert "= " in again.stdout and "1 deduplicated" in again.stdout
    # the re-stated fact has a new id now (walrus_mem/_memory/restate.py)
    result = j(["list"])["memories"]
    result = {"records": [r for r in result if "Postgres" in r["text"]]}
    leaked = j(["analyze", "My API key is sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD and "
                "I work at Acme."])
    assert not any("sk-abcdef" in r["text"] for r in leaked["records"])

    j(["forget", result["records"][0]["id"]])
    assert j(["compact"]) == {"namespace": "default", "compacted": True}
    assert "Compacted" in invoke(["compact"]).stdout
    assert len(j(["list"])["memories"]) == len(texts) - 1 + sum(1 for r in leaked["records"])


def test_heads_starting_with_a_dash_reach_restore_and_pull(monkeypatch):
    """Blob ids are base64url: about one head in 64 starts with '-' and is no option."""
    from walrus_mem.memory import Memory

    seen: list[tuple[str, object]] = []

    def fake_restore(self, ns, head, **kw):
        seen.append(("restore", (head, kw["allow_stale"])))
        raise SystemExit(0)

    def fake_pull(self, heads, **kw):
        seen.append(("pull", (heads, kw["allow_stale"])))
        raise SystemExit(0)

    monkeypatch.setattr(Memory, "restore", fake_restore)
    monkeypatch.setattr(Memory, "pull", fake_pull)
    head = "-bq12WUjAbCdEfGhIjKlMnOpQrStUvWxYz_0123456-.6." + "f9ba" * 16
    other = "Xbq12WUjAbCdEfGhIjKlMnOpQrStUvWxYz_0123456-.2." + "0a1b" * 16
    bare = "-hq12WUjAbCdEfGhIjKlMnOpQrStUvWxYz_0123456-"  # '-h' is the help option
    invoke(["restore", head])
    invoke(["restore", "--allow-stale", head])
    invoke(["restore", "--legacy", bare])
    invoke(["restore", "--manifest", head])
    invoke(["restore", "--", head])
    invoke(["pull", head, other, "--allow-stale"])
    invoke(["pull", "--", head])
    assert seen == [
        ("restore", (head, False)), ("restore", (head, True)), ("restore", (bare, False)),
        ("restore", (head, False)), ("restore", (head, False)),
        ("pull", ([other, head], True)), ("pull", ([head], False)),
    ]
    assert "No such option" in invoke(["restore", "--no-such-flag"], expect=2).stderr
