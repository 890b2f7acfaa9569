"""Consolidation: near-duplicates merged, superseded facts retired, all reversible."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from walrus_mem._agents.consolidate import change_of, consolidate, slot_of, undo
from walrus_mem.errors import InvalidInput
from walrus_mem.hooks import MemoryHooks
from walrus_mem.tools import call_tool

from .helpers_agents import agents_config, make_memory
from .helpers_cli import invoke

LATER = datetime.now(UTC) + timedelta(days=1)


@pytest.fixture
def memory(tmp_path, master_hex):
    mem = make_memory(tmp_path, master_hex)
    yield mem
    mem.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("User lives in Lisbon.", ("user", "residence", "lisbon")),
        ("User moved to Berlin last month for a new job.", ("user", "residence", "berlin")),
        ("The user recently relocated to New York.", ("user", "residence", "new york")),
        ("User's sister lives in Porto.", ("user's sister", "residence", "porto")),
        ("User works at Siemens.", ("user", "employer", "siemens")),
        ("User joined Acme Robotics in May.", ("user", "employer", "acme robotics")),
        ("User works as a nurse at St. Mary's.", ("user", "job", "nurse")),
        ("User is vegan now.", ("user", "diet", "vegan")),
        ("User became vegetarian in 2020.", ("user", "diet", "vegetarian")),
        ("User's favourite band is Radiohead.", ("user", "favourite band", "radiohead")),
        ("User likes tea.", None),
        ("User works from home on Fridays.", None),
        # any single-valued attribute with an entity-like value
        ("My dentist is Dr. Haddad.", ("user", "attribute dentist", "dr. haddad")),
        ("User's manager is Rahul Mehta.", ("user", "attribute manager", "rahul mehta")),
        ("User's phone number is +351 912 345 678.",
         ("user", "attribute phone number", "+351 912 345 678")),
        ("My car is a 2019 Toyota Corolla.", ("user", "attribute car", "2019 toyota corolla")),
        ("My favourite band is Radiohead.", ("user", "favourite band", "radiohead")),
        ("My name is Samuel.", ("user", "name", "samuel")),
        ("My sister is Ana.", None),  # people have several sisters
        ("My manager is very nice.", None),  # a description, not a value
    ],
)
def test_slots(text, expected):
    assert slot_of(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("User switched from tea to coffee.", ("user", "tea")),
    ("User now uses Linear instead of Jira.", ("user", "jira")),
    ("User no longer drinks coffee.", ("user", "drink coffee")),
    ("I don't eat meat anymore.", ("user", "eat meat")),
    ("User drinks coffee.", None),
])
def test_explicit_changes(text, expected):
    assert change_of(text) == expected


def test_supersede_any_attribute_and_explicit_changes(memory):
    dentist = memory.remember("My dentist is Dr. Haddad.")
    tea = memory.remember("User prefers tea in the morning.")
    sister_tea = memory.remember("User's sister likes tea.")
    episode = memory.remember("User drank tea with Ana in Kyoto last year.")
    jira = memory.remember("User tracks work in Jira.")
    coffee = memory.remember("User drinks coffee after lunch.")
    new_dentist = memory.remember("My dentist is Dr. Silva.")
    switched = memory.remember("User switched from tea to coffee.")
    linear = memory.remember("User now uses Linear instead of Jira.")
    quit_coffee = memory.remember("User no longer drinks coffee.")
    plan = memory.consolidate(similarity=0.99, min_age=timedelta(0), dry_run=True)
    retired = {a.retire: a.keep for a in plan.actions if a.kind == "supersede"}
    assert retired == {dentist.id: new_dentist.id, tea.id: switched.id, jira.id: linear.id,
                       coffee.id: quit_coffee.id}
    assert not {sister_tea.id, episode.id, switched.id} & set(retired)  # other subject, history


def test_supersede_merge_gates_history_and_undo(memory):
    lisbon = memory.remember("User lives in Lisbon.", category="identity")
    sister = memory.remember("User's sister lives in Porto.", category="relationship")
    tea = memory.remember("User likes green tea in the morning.", category="preference",
                          importance=0.8)
    tea2 = memory.remember("User likes green tea in the morning!", category="preference",
                           importance=0.3)
    berlin = memory.remember("User moved to Berlin last month.", category="identity")
    # dry run: a report, nothing changed
    plan = memory.consolidate(similarity=0.9, min_age=timedelta(0), dry_run=True)
    kinds = {(a.kind, a.retire, a.keep) for a in plan.actions}
    assert ("supersede", lisbon.id, berlin.id) in kinds
    assert ("merge", tea.id, tea2.id) in kinds
    assert all(a.retire != sister.id for a in plan.actions)
    assert memory.get(lisbon.id).version == 1
    # gate: nothing is old enough yet with the default minimum age
    young = memory.consolidate(similarity=0.9)
    assert young.actions == [] and young.too_young >= 2
    # apply
    report = consolidate(memory, similarity=0.9, min_age=timedelta(minutes=5), now=LATER)
    assert report.applied == len(report.actions) == 2
    retired = memory.get(lisbon.id)
    assert retired.metadata["superseded_by"] == berlin.id
    assert retired.metadata["consolidation"]["run"] == report.run_id
    assert [e.version for e in memory.history(lisbon.id)][-1] == 2  # recorded in history
    assert memory.get(tea2.id).importance == 0.8  # the merged memory keeps the higher importance
    # retired memories no longer reach a model
    listed = call_tool(memory, "memory_list", {})["result"]
    assert lisbon.id not in json.dumps(listed) and tea.id not in json.dumps(listed)
    assert berlin.id in json.dumps(listed)
    hooks = MemoryHooks(memory, agents_config())
    ctx = hooks.before_prompt_build("Where does the user live these days?", "main")
    hooks.close()
    assert "Lisbon" not in ctx.prepend_context
    # a second run finds nothing left to do
    assert consolidate(memory, similarity=0.9, min_age=timedelta(0), now=LATER).actions == []
    # undo restores every memory the run changed, as new recorded versions
    assert undo(memory, report.run_id) == 3
    restored = memory.get(lisbon.id)
    assert "superseded_by" not in restored.metadata and restored.version == 3
    assert memory.get(tea2.id).importance == 0.3
    assert lisbon.id in json.dumps(call_tool(memory, "memory_list", {})["result"])


def test_bad_arguments(memory):
    with pytest.raises(InvalidInput):
        memory.consolidate(similarity=0)
    with pytest.raises(InvalidInput):
        memory.consolidate(min_age=timedelta(hours=-1))
    assert memory.consolidate().actions == []  # empty namespace


def test_cli_consolidate(tmp_path, monkeypatch):
    from .helpers_cli import TEST_MASTER_HEX

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("WALRUS_MEM_MASTER_KEY", TEST_MASTER_HEX)
    monkeypatch.setenv("WALRUS_MEM_EMBEDDING_MODEL", "test-hash")
    monkeypatch.setenv("WALRUS_MEM_USE_KEYRING", "false")
    base = ["--data-dir", str(tmp_path / "d")]
    invoke([*base, "remember", "User lives in Lisbon."])
    invoke([*base, "remember", "User moved to Berlin."])
    out = invoke([*base, "consolidate", "--dry-run", "--min-age", "0"]).stdout
    assert "would retire 1" in out and "residence" in out
    out = invoke([*base, "--json", "consolidate", "--min-age", "0"]).stdout
    report = json.loads(out)["data"]
    assert report["superseded"] == 1 and report["applied"] == 1
    out = invoke([*base, "consolidate", "--undo", report["run_id"]]).stdout
    assert "Restored 1 memory" in out
    again = invoke([*base, "--json", "consolidate", "--undo", report["run_id"]])
    assert json.loads(again.stdout)["warnings"] == [
        f"no memory of namespace default carries a change of run {report['run_id']}: a "
        "mistyped run id, another namespace (-n), or already undone"]
    assert "already undone" in again.stderr


def test_consolidation_after_capture(memory, monkeypatch):
    """A captured "moved to Berlin" retires an older "lives in Lisbon" at once."""
    old = memory.remember("User lives in Lisbon.", category="identity")
    import walrus_mem._agents.consolidate as module

    real = module.consolidate
    monkeypatch.setattr("walrus_mem.hooks.consolidate",
                        lambda mem, ns, focus: real(mem, ns, focus=focus, now=LATER))
    hooks = MemoryHooks(memory, agents_config(), consolidate_after_capture=True)
    outcome = hooks.capture_now([{"role": "user", "content": "I moved to Berlin last month "
                                                            "for a new job at the port."}], "main")
    hooks.close()
    assert outcome.stored == 1 and outcome.reasons.get("consolidated") == 1
    assert memory.get(old.id).metadata["superseded_by"] == outcome.memory_ids[0]
