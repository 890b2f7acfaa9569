"""Tests of an agent that uses walrus_mem, written as a user would (docs/testing.md).

Copy this file next to your own tests. Installing walrus-mem gives pytest its
fixtures (``walrus_memory``, ``walrus_relayer``, ``walrus_agents``): every
memory, key and blob lives under the test's ``tmp_path``; nothing touches your
home directory, keyring or the network. CI runs this file as it is.
"""

from __future__ import annotations

import pytest

from relayer_mock.faults import FaultConfig
from walrus_mem import Memory
from walrus_mem.errors import WalrusMemError
from walrus_mem.keys import generate_master_seed


def answer(mem: Memory, question: str) -> str:
    """The "agent" under test: answers from its best memory, or says it does not know."""
    hits = mem.recall(question, k=1, min_score=0.0)
    return hits[0].text if hits else "I don't know"


def test_the_agent_answers_from_what_it_was_told(walrus_memory):
    walrus_memory.remember("The staging database is orca-staging", category="decision")
    walrus_memory.remember("My sister Ana lives in Lisbon")
    assert answer(walrus_memory, "which database is staging") == (
        "The staging database is orca-staging")


def test_an_empty_memory_knows_nothing(walrus_memory):
    assert answer(walrus_memory, "anything at all") == "I don't know"


def test_the_agent_keeps_working_while_walrus_is_down(walrus_relayer):
    mem = walrus_relayer.memory(publish_deadline=0.5)
    walrus_relayer.faults(probabilities={"503": 1.0})  # every publisher request fails
    fact = mem.remember("I'm allergic to peanuts")
    assert fact.status == "queued"  # kept locally, recallable at once
    assert answer(mem, "peanuts allergic") == "I'm allergic to peanuts"
    walrus_relayer.faults()  # Walrus is back
    mem.sync()
    assert mem.get(fact.id).status == "published"


def test_one_agent_cannot_open_anothers_memories(walrus_agents):
    alice, bob = walrus_agents["alice"], walrus_agents["bob"]
    alice.remember("The deploy key is in the team vault")
    head = alice.sync().manifests["alice"]
    assert answer(bob, "where is the deploy key") == "I don't know"
    with pytest.raises(WalrusMemError):  # bob's keys do not open alice's sealed blobs
        bob.restore("alice", head)


def test_a_new_machine_restores_what_the_agent_synced(walrus_relayer):
    seed = generate_master_seed()  # the user's one master key, on two machines
    laptop = walrus_relayer.memory("laptop", master_key=seed)
    laptop.remember("Ana's birthday is in May")
    head = laptop.sync().manifests["default"]
    server = walrus_relayer.memory("server", master_key=seed)
    server.restore("default", head)
    assert answer(server, "when is Ana's birthday") == "Ana's birthday is in May"


def test_a_hostile_aggregator_is_caught(walrus_relayer):
    seed = generate_master_seed()
    laptop = walrus_relayer.memory("laptop", master_key=seed)
    laptop.remember("Ana's birthday is in May")
    head = laptop.sync().manifests["default"]
    walrus_relayer.faults(probabilities={"corrupt": 1.0}, scope="reads")  # every read altered
    with pytest.raises(WalrusMemError):  # never a tampered memory
        walrus_relayer.memory("server", master_key=seed, read_deadline=1.0).restore(
            "default", head)


@pytest.mark.walrus_relayer(faults=FaultConfig.only("429", 0.3, seed=1, scope="writes"))
def test_a_rate_limiting_publisher_only_slows_the_agent_down(walrus_relayer):
    """relayer_mock's options through the marker: 30 % of stores answer 429."""
    mem = walrus_relayer.memory()
    facts = [mem.remember(f"fact number {i}") for i in range(5)]
    mem.sync()
    assert {mem.get(f.id).status for f in facts} == {"published"}
    assert walrus_relayer.fault_log  # the faults did happen
