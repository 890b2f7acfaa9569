"""The end-to-end demo behind ``walrus-mem demo`` and ``make demo``.

Every step prints what it does, then *checks* its claim; a claim that does not
hold fails the demo (``run_demo`` returns ``False`` and the CLI exits 1). It
runs offline on a temporary data dir and never touches the user's keyring,
config or data.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nacl.signing
from rich.console import Console
from rich.markup import escape

from .envelope import HEADER_SIZE, open_envelope, seal
from .errors import TamperedBlob, WalrusMemError, WrongNamespace
from .keys import MasterSeed, NamespaceKeys, generate_master_seed

__all__ = ["DemoFailure", "run_demo"]

AGENT_A = "researcher"
AGENT_B = "assistant"
FACTS_A = [
    "I'm allergic to peanuts",
    "My sister Ana lives in Lisbon and works as a nurse",
    "We decided to deploy the billing service on Fridays only after the 2pm freeze",
]
FACTS_B = [
    "The user prefers answers in bullet points",
    "The staging database is called orca-staging",
]


class DemoFailure(Exception):
    """A step's claim did not hold."""


@dataclass
class _State:
    """What earlier steps hand to later ones."""

    workdir: Path
    master: MasterSeed | None = None
    keys_a: NamespaceKeys | None = None
    keys_b: NamespaceKeys | None = None
    blob_a: bytes = b""
    extras: dict[str, Any] = field(default_factory=dict)


class _Narrator:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.claims = 0

    def step(self, number: int, total: int, title: str) -> None:
        self.console.print()
        self.console.rule(f"[bold]{number}/{total}  {escape(title)}", align="left")

    def say(self, text: str) -> None:
        self.console.print(f"  {text}")

    def check(self, ok: bool, claim: str, *, why_not: str = "") -> None:
        self.claims += 1
        if ok:
            self.console.print(f"  [green]✓[/green] {escape(claim)}")
            return
        self.console.print(f"  [red]✗ {escape(claim)}[/red]")
        raise DemoFailure(claim + (f": {why_not}" if why_not else ""))


def _step_keys(n: _Narrator, s: _State) -> None:
    n.say("Agent A is derived from a fresh master seed (the convenient default);")
    n.say("agent B brings its own independent Ed25519 key (the 'separate key per agent' mode).")
    s.master = generate_master_seed()
    s.keys_a = NamespaceKeys.derive(s.master, AGENT_A)
    agent_b_seed = bytes(nacl.signing.SigningKey.generate())
    s.keys_b = NamespaceKeys.from_agent_key(agent_b_seed, AGENT_B)
    n.say(f"A  namespace [cyan]{AGENT_A}[/cyan]  derived      fingerprint {s.keys_a.fingerprint}")
    n.say(f"B  namespace [cyan]{AGENT_B}[/cyan]   independent  fingerprint {s.keys_b.fingerprint}")
    n.say("(only public fingerprints are ever shown; key objects refuse to print secrets)")
    n.check(
        s.keys_a.fingerprint_bytes != s.keys_b.fingerprint_bytes,
        "the two agents hold different keys",
    )
    n.check(
        s.master.to_hex() not in repr(s.keys_a) + repr(s.master),
        "the repr of a key shows no secret",
    )


def _step_seal(n: _Narrator, s: _State) -> None:
    assert s.keys_a is not None
    record = {"id": "demo-fact-1", "kind": "fact", "text": FACTS_A[0], "metadata": {}}
    s.blob_a = seal(s.keys_a, record)
    n.say(f"Sealed {FACTS_A[0]!r} for agent A: {len(s.blob_a)} bytes (padded to a size bucket).")
    n.say(f"first 48 bytes: [dim]{s.blob_a[:48].hex()}[/dim]")
    _check_ciphertext(n, s.blob_a, AGENT_A, [FACTS_A[0]])
    reopened = open_envelope(s.keys_a, s.blob_a, expected_id="demo-fact-1")
    n.check(reopened["text"] == FACTS_A[0], "agent A opens its own blob and gets the fact back")


def _check_ciphertext(n: _Narrator, blob: bytes, namespace: str, texts: list[str]) -> None:
    lowered = blob.lower()
    n.check(
        namespace.encode() not in lowered, f"the namespace name {namespace!r} is not in the bytes"
    )
    leaked = [t for t in texts if t.encode().lower() in lowered]
    words = {w.lower() for t in texts for w in t.split() if len(w) >= 5}
    leaked_words = sorted(w for w in words if w.encode() in lowered)
    n.check(not leaked and not leaked_words, "no fact text (not even a word of it) is in the bytes",
            why_not=f"found {leaked or leaked_words}")


def _step_isolation_sealed(n: _Narrator, s: _State) -> None:
    assert s.keys_b is not None
    n.say("Agent B tries to open agent A's blob with its own keys.")
    try:
        open_envelope(s.keys_b, s.blob_a)
    except WrongNamespace as exc:
        n.say(f"[dim]WrongNamespace: {escape(str(exc))}[/dim]")
        n.check(True, "agent B cannot read agent A's blob (WrongNamespace)")
    except WalrusMemError as exc:
        n.check(False, "agent B cannot read agent A's blob (WrongNamespace)",
                why_not=f"got {type(exc).__name__} instead")
    else:
        n.check(False, "agent B cannot read agent A's blob", why_not="it opened!")


def _step_tamper(n: _Narrator, s: _State) -> None:
    assert s.keys_a is not None
    position = HEADER_SIZE + 7  # a byte inside the ciphertext
    flipped = bytearray(s.blob_a)
    flipped[position] ^= 0x01
    n.say(f"Flip one bit of byte {position} of the blob and open it again.")
    try:
        open_envelope(s.keys_a, bytes(flipped))
    except TamperedBlob as exc:
        n.say(f"[dim]TamperedBlob: {escape(str(exc))}[/dim]")
        n.check(True, "the flipped byte is detected (TamperedBlob)")
    except WalrusMemError as exc:
        n.check(False, "the flipped byte is detected (TamperedBlob)",
                why_not=f"got {type(exc).__name__} instead")
    else:
        n.check(False, "the flipped byte is detected", why_not="the blob opened!")


_Step = tuple[str, Callable[[_Narrator, _State], None]]

_STEPS: list[_Step] = [
    ("Two agents, two keys", _step_keys),
    ("A fact is sealed on the client", _step_seal),
    ("Agent B cannot read agent A's blobs", _step_isolation_sealed),
    ("A flipped byte is detected", _step_tamper),
]


def run_demo(console: Console | None = None, *, workdir: Path | None = None) -> bool:
    """Run every demo step; return ``True`` when every claim held.

    ``workdir`` (default: a fresh temp dir, removed afterwards) holds the demo's
    data dirs. Nothing outside it is read or written: no keyring, no config file.
    """
    console = console or Console()
    own_dir = workdir is None
    root = Path(tempfile.mkdtemp(prefix="walrus-mem-demo-")) if workdir is None else workdir
    narrator = _Narrator(console)
    state = _State(workdir=root)
    console.print(
        f"[bold]walrus_mem demo[/bold]: offline, temporary data in [dim]{escape(str(root))}[/dim]"
    )
    ok = True
    try:
        for number, (title, fn) in enumerate(_STEPS, start=1):
            narrator.step(number, len(_STEPS), title)
            fn(narrator, state)
    except DemoFailure as exc:
        console.print(f"\n[bold red]DEMO FAILED[/bold red]: {escape(str(exc))}")
        ok = False
    except WalrusMemError as exc:
        console.print(
            f"\n[bold red]DEMO FAILED[/bold red] with {type(exc).__name__}: {escape(str(exc))}"
        )
        ok = False
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    if ok:
        console.print(
            f"\n[bold green]All {narrator.claims} claims held[/bold green] "
            f"across {len(_STEPS)} steps."
        )
    return ok
