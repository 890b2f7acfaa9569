"""Issue 27 item 2, the CLI as people type it: `import -` reads stdin, Ctrl-C during an
import exits 130 with a one-line summary, read commands never create a data dir, and
`list` / `recall` print plain TSV in a pipe (CliRunner's stdout is not a terminal)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers_cli import TEST_MASTER_HEX, envelope_of, invoke


@pytest.fixture(autouse=True)
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    data = tmp_path / "data"
    monkeypatch.setenv("WALRUS_MEM_DATA_DIR", str(data))
    return data


def j(args, **kwargs):
    return envelope_of(invoke(["--json", *args], **kwargs))["data"]


# -- import - -------------------------------------------------------------------------


def test_import_dash_reads_text_lines_from_stdin():
    summary = j(["import", "-"], input="fact one\n\nfact two\n")
    assert (summary["items"], summary["stored"]) == (2, 2)
    assert sorted(r["text"] for r in j(["list"])["memories"]) == ["fact one", "fact two"]


def test_import_dash_reads_jsonl_and_markdown_from_stdin():
    lines = [json.dumps({"text": "likes jazz", "category": "preference"}),
             json.dumps({"text": "works at night"})]
    assert j(["import", "-"], input="\n".join(lines) + "\n")["stored"] == 2
    listed = {r["text"]: r["category"] for r in j(["list"])["memories"]}
    assert listed["likes jazz"] == "preference"
    notes = "# Travel\nPrefers window seats\non long flights.\n\n- Loves Lisbon\n"
    assert j(["import", "--format", "markdown", "-"], input=notes)["stored"] == 2
    by_text = {r["text"]: r["metadata"] for r in j(["list", "--limit", "100"])["memories"]}
    assert by_text["Loves Lisbon"] == {"source": "stdin", "section": "Travel"}


def test_import_dash_errors_name_stdin():
    res = invoke(["import", "--format", "jsonl", "-"], input='{"text": "a"}\nnot json\n',
                 expect=1)
    assert "stdin:2" in res.stderr
    res = invoke(["import", "-"], input="\n\n", expect=1)
    assert "stdin holds no facts" in res.stderr


# -- Ctrl-C during an import ---------------------------------------------------------


def test_ctrl_c_during_import_exits_130_with_a_one_line_summary(tmp_path, monkeypatch):
    from walrus_mem.memory import Memory

    real = Memory.remember_many
    calls = []

    def interrupted(self, items, **kwargs):
        calls.append(len(items))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, items, **kwargs)

    monkeypatch.setattr(Memory, "remember_many", interrupted)
    facts = tmp_path / "facts.txt"
    facts.write_text("".join(f"fact number {i}\n" for i in range(5)))
    res = invoke(["import", "--batch-size", "2", str(facts)], expect=130)
    assert "Aborted" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "interrupted" in lines[0] and "4 of 5" in lines[0] and "4 stored" in lines[0]
    monkeypatch.setattr(Memory, "remember_many", real)
    assert len(j(["list"])["memories"]) == 4


# -- read commands create nothing ----------------------------------------------------


READ_COMMANDS = [
    ["recall", "anything"], ["list"], ["get", "0" * 26], ["stats"], ["history", "0" * 26],
    ["expiring", "--within", "2"], ["export"],
]


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: a[0])
def test_read_commands_never_create_a_data_dir(tmp_path, args):
    top = tmp_path / "nonexistent"
    res = invoke(["--data-dir", str(top / "deep" / "x"), *args], expect=1)
    assert "no data dir" in res.stderr and str(top / "deep" / "x") in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not top.exists()


def test_the_default_data_dir_is_not_created_by_a_read_either(cli_env):
    invoke(["list"], expect=1)
    assert not cli_env.exists()
    invoke(["remember", "a fact"])  # a write creates it
    assert cli_env.is_dir()
    invoke(["list"])


# -- plain text in pipes ---------------------------------------------------------------


def test_list_and_recall_print_tsv_in_a_pipe():
    first = j(["remember", "keeps jazz in C:\\music", "-c", "preference"])
    second = j(["remember", "lives in Oslo"])
    out = invoke(["list"]).stdout
    assert not any(ch in out for ch in "┏┃━│─╭")  # no box drawing
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[0] for r in rows] == [second["id"], first["id"]]  # newest first
    assert rows[1][1] == "keeps jazz in C:\\\\music"  # a backslash is escaped
    assert rows[1][2] == "preference"
    assert all(len(r) == 5 for r in rows)

    res = invoke(["recall", "jazz", "--min-score", "0"])
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows and all(len(r) == 4 for r in rows)
    assert rows[0][1] == first["id"] and float(rows[0][0]) > 0
    assert "candidates" in res.stderr  # the summary stays off the data
    # --json is unchanged
    assert isinstance(j(["list"])["memories"], list) and "hits" in j(["recall", "jazz"])


def test_a_tsv_field_stays_one_field_of_one_line():
    from walrus_mem._cli.common import tsv_line

    assert tsv_line("a\tb", "c\\d\r\n", None, "\x1b[31mred", "\u2028", 3) == (
        "a\\tb\tc\\\\d\\r\\n\t\t\\x1b[31mred\t\\u2028\t3")


def test_ctrl_c_in_any_command_exits_130_with_one_line(monkeypatch):
    from walrus_mem.memory import Memory

    invoke(["remember", "a fact"])

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Memory, "list", interrupted)
    res = invoke(["list"], expect=130)
    assert res.stderr == "walrus-mem: interrupted\n"
