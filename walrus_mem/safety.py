"""Safety filters for memories that travel into and out of prompts.

Four public functions, used by the hooks, the tools and the middleware:

* :func:`detect_injection` -- flags text that tries to steer a model (override
  phrases, role and tag spoofing, fake tool results, tool-call coercion,
  exfiltration, prompt leaks, obfuscated and non-English forms). It is
  *advisory*: regexes can always be evaded, so structural safety never depends
  on it.
* :func:`redact_secrets` -- replaces credentials with ``[REDACTED:<kind>]``
  (:mod:`walrus_mem._safety.secret_redaction`).
* :func:`should_capture` -- decides whether a chat message is worth capturing.
* :func:`escape_for_prompt` -- HTML-escapes text so it cannot open or close a
  tag.

Structural safety comes from :func:`render_memory_block`
(:mod:`walrus_mem._safety.memory_blocks`, re-exported here): every memory text is
escaped (so it contains no ``<``), and the block is delimited by tags carrying
a random per-call nonce. Stored text therefore cannot close the block, forge
another item, or forge a block of its own; :func:`parse_memory_blocks` is the
exact inverse and :func:`strip_memory_blocks` removes blocks of any nonce so
recalled memories are never re-captured.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from ._safety import classifier, injection, injection_concepts, injection_intents
from ._safety.capture_patterns import (
    DROP_WHOLE,
    EMOJI,
    FENCE,
    FILLER,
    HEADING,
    PLACEHOLDER,
    PLACEHOLDER_KIND,
    SYSTEM_CONTENT,
    UNINFORMATIVE,
)
from ._safety.format_chars import reveal_format_chars
from ._safety.injection_patterns import INJECTION_PATTERNS
from ._safety.memory_blocks import (
    BLOCK_TAG,
    ITEM_TAG,
    MemoryBlock,
    MemoryItem,
    approx_tokens,
    escape_for_prompt,
    new_nonce,
    parse_memory_blocks,
    render_memory_block,
    render_memory_item,
    strip_memory_blocks,
)
from ._safety.secret_redaction import SecretFinding, redact_secrets

__all__ = [
    "BLOCK_TAG",
    "ITEM_TAG",
    "CaptureDecision",
    "FactScreen",
    "InjectionResult",
    "MemoryBlock",
    "MemoryItem",
    "SecretFinding",
    "approx_tokens",
    "detect_injection",
    "escape_for_prompt",
    "new_nonce",
    "parse_memory_blocks",
    "redact_secrets",
    "render_memory_block",
    "render_memory_item",
    "screen_fact",
    "should_capture",
    "strip_memory_blocks",
]

# ---------------------------------------------------------------------------
# injection detection (pattern tables: walrus_mem._safety.injection_patterns)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class InjectionResult:
    """Outcome of :func:`detect_injection`. Truthy when the text was flagged.

    ``labels`` are the families that matched (``override``, ``role_hijack``,
    ``tag_spoof``, ``fake_tool_result``, ``tool_coercion``, ``exfiltration``,
    ``prompt_leak``, ``poisoning``, ``non_english``, ``encoded``, ``classifier``:
    the learned layer); ``reasons`` give the matched
    snippets (truncated).
    """

    flagged: bool
    labels: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.flagged


def _labelled_hits(view: str) -> Iterable[tuple[str, str]]:
    """Every layer on one normalised view: pattern families, lexicons, cues, concepts,
    intents."""
    for label, pattern in INJECTION_PATTERNS:
        found = pattern.search(view)
        if found:
            yield label, found.group(0)
    for _lang, snippet in injection.lexicon_hits(view):
        yield "non_english", snippet
    yield from injection.structural_cues(view)
    yield from injection_concepts.concept_hits(view)
    yield from injection_intents.intent_hits(view)


def detect_injection(text: str) -> InjectionResult:
    """Return whether ``text`` looks like a prompt-injection attempt, and why.

    Runs the layers of :mod:`walrus_mem._safety.injection` on every normalised view
    (NFKC, invisibles and bidi removed, homoglyphs, spaced and leet forms,
    decoded base64 / hex / percent / rot13) of every window of the text; the
    whole text is scanned, however long. Advisory only: see the module
    docstring. The semantic layer needs embeddings and runs where they exist
    (:func:`walrus_mem._safety.prompt_screen.screen_records`).
    """
    if not text or not text.strip():
        return InjectionResult(False)
    text = reveal_format_chars(text)  # tag-character text is read, other Cf dropped
    labels: list[str] = []
    reasons: list[str] = []
    learned = classifier.flagged_score(text)  # first layer: the learned screen
    if learned is not None:
        labels.append("classifier")
        reasons.append(f"classifier: {learned:.2f}")
    for window in injection.windows(text):
        all_views = injection.views(window)
        decoded = set(all_views) - set(injection.views(window, decode=False))
        for view in all_views:
            for label, snippet in _labelled_hits(view):
                if view in decoded and label not in labels and "encoded" not in labels:
                    labels.append("encoded")
                    reasons.append(f"encoded: {snippet[:80]!r}")
                if label not in labels:
                    labels.append(label)
                    reasons.append(f"{label}: {snippet[:80]!r}")
    return InjectionResult(bool(labels), tuple(labels), tuple(reasons))


# ---------------------------------------------------------------------------
# capture filter
# ---------------------------------------------------------------------------

MIN_CAPTURE_LENGTH: Final = 30
MAX_CAPTURE_LENGTH: Final = 4000


@dataclass(frozen=True)
class CaptureDecision:
    """Outcome of :func:`should_capture`; truthy when the text may be captured.

    ``reason`` is ``"ok"`` or one of ``empty``, ``too_short``, ``too_long``,
    ``filler``, ``markup``, ``system_content``, ``code``, ``heading``,
    ``emoji_heavy``, ``injection``.
    """

    capture: bool
    reason: str

    def __bool__(self) -> bool:
        return self.capture


def _looks_like_code(text: str) -> bool:
    if FENCE.search(text):
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3:
        return False
    indented = sum(1 for line in lines if line.startswith(("    ", "\t")))
    codeish = sum(1 for line in lines if line.rstrip().endswith((";", "{", "}", ");")))
    return indented * 2 > len(lines) or codeish * 2 > len(lines)


def should_capture(
    text: str,
    *,
    min_length: int = MIN_CAPTURE_LENGTH,
    max_length: int = MAX_CAPTURE_LENGTH,
) -> CaptureDecision:
    """Decide whether a chat message is worth sending to fact extraction.

    Rejects (in order): empty, shorter than ``min_length`` (30) characters,
    longer than ``max_length``, filler ("ok", "thanks!"), XML/system content,
    code, markdown headings, emoji-heavy text (more than 3 emoji, or over 20%
    of the visible characters), and anything :func:`detect_injection` flags.
    """
    stripped = text.strip() if text else ""
    if not stripped:
        return CaptureDecision(False, "empty")
    if len(stripped) < min_length:
        return CaptureDecision(False, "too_short")
    if len(stripped) > max_length:
        return CaptureDecision(False, "too_long")
    if FILLER.match(EMOJI.sub("", stripped).strip()):
        return CaptureDecision(False, "filler")
    if (stripped.startswith("<") and "</" in stripped) or re.search(
        r"<\s*/?\s*(?:walrus|memwal|relevant)-memories", stripped, re.IGNORECASE
    ):
        return CaptureDecision(False, "markup")
    if stripped[0] in "{[" and stripped[-1] in "}]":
        return CaptureDecision(False, "markup")
    if SYSTEM_CONTENT.search(stripped):
        return CaptureDecision(False, "system_content")
    if _looks_like_code(stripped):
        return CaptureDecision(False, "code")
    if HEADING.search(stripped):
        return CaptureDecision(False, "heading")
    emoji = len(EMOJI.findall(stripped))
    visible = sum(1 for ch in stripped if not ch.isspace())
    if emoji > 3 or (emoji and emoji * 5 > visible):
        return CaptureDecision(False, "emoji_heavy")
    if detect_injection(stripped):
        return CaptureDecision(False, "injection")
    return CaptureDecision(True, "ok")


# ---------------------------------------------------------------------------
# fact screening (shared by auto-capture and memory_store)
# ---------------------------------------------------------------------------

SecretPolicy = Literal["redact", "drop", "reject"]


@dataclass(frozen=True)
class FactScreen:
    """Outcome of :func:`screen_fact`.

    ``text`` is what may be stored (secrets redacted), or ``None`` when the
    fact must not be stored; ``reason`` then says why (``injection``,
    ``secret``, ``nothing_left``, ``empty``).
    """

    text: str | None
    secret_kinds: tuple[str, ...] = ()
    injection: InjectionResult = field(default_factory=lambda: InjectionResult(False))
    reason: str = "ok"


def screen_fact(text: str, *, secret_policy: SecretPolicy = "redact") -> FactScreen:
    """Apply the storage policy to one fact: injection out, secrets redacted.

    * injection-flagged facts are never stored;
    * facts stating a password ("my password is X", "pwd: X") are dropped;
    * with ``secret_policy="redact"`` (default) other credentials are replaced
      by ``[REDACTED:<kind>]`` and the fact is kept if at least two informative
      words remain besides the secret and credential nouns (so "my database
      password is X" is dropped, "the deploy key X rotates every 90 days"
      kept); ``"drop"`` drops any fact that held a secret;
    * ``"reject"`` behaves like ``"drop"`` here; callers may turn it into an
      :class:`~walrus_mem.errors.UnsafeContent` error.
    """
    stripped = text.strip()
    if not stripped:
        return FactScreen(None, reason="empty")
    injection = detect_injection(stripped)
    if injection:
        return FactScreen(None, injection=injection, reason="injection")
    redacted, findings = redact_secrets(stripped)
    # Placeholders already in the text (redacted upstream, e.g. before extraction).
    kinds = tuple(dict.fromkeys([*(f.kind for f in findings),
                                 *(m.group(1) for m in PLACEHOLDER_KIND.finditer(stripped))]))
    if not kinds:
        return FactScreen(stripped)
    if secret_policy != "redact":
        return FactScreen(None, kinds, reason="secret")
    if DROP_WHOLE.intersection(kinds):
        # A stated password is the whole point of its sentence: nothing to keep.
        return FactScreen(None, kinds, reason="nothing_left")
    rest = [
        word for word in re.findall(r"[^\W\d_]{2,}", PLACEHOLDER.sub(" ", redacted).lower())
        if word not in UNINFORMATIVE
    ]
    if len(rest) < 2:
        return FactScreen(None, kinds, reason="nothing_left")
    return FactScreen(redacted, kinds)
