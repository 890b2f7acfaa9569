"""Safety filters for memories that travel into and out of prompts.

Four public functions, used by the hooks, the tools and the middleware:

* :func:`detect_injection` -- flags text that tries to steer a model (override
  phrases, role and tag spoofing, fake tool results, tool-call coercion,
  exfiltration, prompt leaks, obfuscated and non-English forms). It is
  *advisory*: regexes can always be evaded, so structural safety never depends
  on it.
* :func:`redact_secrets` -- replaces credentials with ``[REDACTED:<kind>]``
  (:mod:`walrus_mem.secret_redaction`).
* :func:`should_capture` -- decides whether a chat message is worth capturing.
* :func:`escape_for_prompt` -- HTML-escapes text so it cannot open or close a
  tag.

Structural safety comes from :func:`render_memory_block`
(:mod:`walrus_mem.memory_blocks`, re-exported here): every memory text is
escaped (so it contains no ``<``), and the block is delimited by tags carrying
a random per-call nonce. Stored text therefore cannot close the block, forge
another item, or forge a block of its own; :func:`parse_memory_blocks` is the
exact inverse and :func:`strip_memory_blocks` removes blocks of any nonce so
recalled memories are never re-captured.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from . import injection, injection_concepts, injection_intents
from .memory_blocks import (
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
from .secret_redaction import SecretFinding, redact_secrets

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
# normalisation
# ---------------------------------------------------------------------------

# Invisible characters used to split trigger words ("ig\u200bnore").
_INVISIBLE: Final = re.compile(
    "[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
# Latin look-alikes from Cyrillic and Greek, folded only for the Latin pass.
_HOMOGLYPHS: Final = str.maketrans(
    {
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x",
        "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "ո": "n", "ν": "v",
        "ο": "o", "α": "a", "ι": "i", "κ": "k", "τ": "t", "ρ": "p",
    }
)
_LEET: Final = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t",
                              "@": "a", "$": "s", "!": "i", "|": "i"})
_HSPACE: Final = re.compile(r"[^\S\n]+")
_NL: Final = re.compile(r"\s*\n\s*")


def _normalise(text: str) -> str:
    """Unescape entities, fold width/compat forms, drop invisibles, casefold."""
    text = html.unescape(html.unescape(text))
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text)
    text = _HSPACE.sub(" ", text.casefold())
    return _NL.sub("\n", text).strip()


def _squash(text: str) -> str:
    """Letters only after leet folding: catches 'i g n o r e' and '1gn0r3'."""
    folded = text.translate(_HOMOGLYPHS).translate(_LEET)
    return "".join(ch for ch in folded if ch.isalpha())


# ---------------------------------------------------------------------------
# injection detection
# ---------------------------------------------------------------------------

_F: Final = re.IGNORECASE | re.MULTILINE

_OVERRIDE_VERB = (
    r"(?:ignore|ignoring|disregard|forget|skip|bypass|override|overrule|neglect|abandon|discard"
    r"|dismiss|set\s+aside|throw\s+out|drop|stop\s+following|do\s+not\s+follow|don'?t\s+follow"
    r"|never\s+mind|pay\s+no\s+attention\s+to|cancel|erase|wipe|reset|circumvent|evade|remove"
    r"|disable|turn\s+off|deactivate|suspend|lift)"
)
_QUAL = (
    r"(?:all|any|every|each|the|your|these|those|previous|prior|above|earlier|preceding|foregoing"
    r"|former|original|initial|existing|current|old|system|developer'?s?|safety|default|given"
    r"|provided|other|of|that|you|were|have|been|got|received|whatever|my|content|ethical"
    r"|built-in|internal|hidden|standing|core|base)"
)
_STRONG_TARGET = (
    r"(?:instructions?|instruct|directives?|rules|guidelines?|guidance|prompts?|system\s+prompt"
    r"|constraints?|restrictions?|polic(?:y|ies)|guardrails?|programming|training|safeguards?"
    r"|filters?|limitations?|boundaries|protocols?|system\s+messages?|developer\s+messages?"
    r"|conditioning|alignment|moderation|censorship|ethics)"
)
_WEAK_TARGET = r"(?:messages?|context|conversation|commands?|orders|settings|text)"
# "the rules of Monopoly", "the instructions for the desk": narrowed to a topic, not an override
_NOT_NARROWED = (r"(?!\s+(?:of|for|about|on|in)\s+(?!(?:this|the|your|our)\s+(?:chat|conversation"
                 r"|session|system|assistant|ai|model|bot)\b|you\b))")

_INJECTION_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (label, re.compile(rx, _F))
    for label, rx in (
        # -- instruction override ------------------------------------------------
        ("override", rf"\b{_OVERRIDE_VERB}\b(?:[\s,]+{_QUAL}\b){{0,6}}[\s,]+{_STRONG_TARGET}\b"
                     rf"{_NOT_NARROWED}"),
        (
            "override",
            rf"\b{_OVERRIDE_VERB}\b(?:[\s,]+{_QUAL}\b){{0,5}}[\s,]+(?:all|every|any)\b"
            rf"(?:[\s,]+{_QUAL}\b){{0,4}}[\s,]+{_WEAK_TARGET}\b",
        ),
        (
            "override",
            rf"\b{_OVERRIDE_VERB}\b[\s,]+(?:the\s+)?(?:system|developer)\s+{_WEAK_TARGET}\b",
        ),
        (
            "override",
            r"\b(?:ignore|disregard|forget)\s+(?:all\s+(?:of\s+)?)?(?:the\s+|everything\s+)?"
            r"(?:above|foregoing|preceding)\b(?!\s+(?:typo|email|e-mail|message|note|link|address"
            r"|number|comment|paragraph|section|draft|list|plan|figure|table|point|example"
            r"|estimate|question|one|date|price|quote)s?\b)",
        ),
        (
            "override",
            r"\bforget\s+(?:about\s+)?everything\s+(?:you(?:'ve|\s+have|\s+were)?\s+(?:been\s+)?"
            r"(?:told|taught|know|learned|learnt)|above|before\s+this|so\s+far|up\s+to\s+now)",
        ),
        (
            "override",
            r"\beverything\s+(?:you\s+(?:were|have\s+been|'ve\s+been)\s+told|above|before\s+this"
            r"(?:\s+point)?)\s+(?:no\s+longer\s+applies|is\s+(?:void|cancelled|canceled|obsolete"
            r"|irrelevant|wrong|invalid))",
        ),
        (
            "override",
            r"\b(?:your|the|all)\s+(?:previous|prior|earlier|original|initial|old|system)\s+"
            r"(?:instructions|rules|directives|guidelines|prompt)\s+(?:have\s+been|are|were|is)\s+"
            r"(?:revoked|cancelled|canceled|void|invalid|obsolete|replaced|overridden|suspended"
            r"|wrong|disabled|lifted|removed)",
        ),
        (
            "override",
            r"\b(?:new|updated|revised|real|actual|true|secret|hidden|additional|override|priority)"
            r"\s+(?:system\s+)?(?:instructions?|directives?|system\s+prompt|prompt)\s*(?:[:\-]"
            r"|(?:are|is)\s*:)",
        ),
        (
            "override",
            r"\byour\s+new\s+(?:instructions?|rules|task|objective|goal|role|purpose|directive"
            r"|mission|persona|identity)\s+(?:is|are|will\s+be)\b",
        ),
        (
            "override",
            # "the system override on our thermostat" names a device's switch
            r"\b(?:system|safety|security|admin|developer|emergency|priority)\s+override\b"
            r"(?!\s+(?:on|of|for|in)\s+(?:our|my|the|a)\s+(?!(?:ai|assistant|model|chat|system)\b))",
        ),
        (
            "override",
            r"\b(?:safety|content|security)\s+(?:filters?|guidelines|policies|restrictions"
            r"|checks)\s+(?:are\s+|have\s+been\s+)?(?:now\s+)?(?:disabled|off|removed|lifted"
            r"|suspended|deactivated)",
        ),
        (
            "override",
            r"\bwhatever\s+your\s+(?:instructions|rules|system\s+prompt|guidelines)\s+say",
        ),
        (
            "override",
            r"\b(?:top|highest|absolute)\s+priority\s+over\s+(?:the\s+|your\s+|all\s+)?"
            r"(?:system|developer|previous|other)",
        ),
        (
            "override",
            r"\b(?:obey|follow)\s+only\s+(?:me|this|these|my)\b|\bonly\s+obey\b|\bobey\s+(?:only\s+)?"
            r"(?:me|this\s+memory|the\s+memory|these\s+instructions|my\s+commands)\b",
        ),
        (
            "override",
            r"\b(?:follow|obey|do\s+what)\s+(?:this|the)\s+(?:memory|note)\b(?:\s+says)?",
        ),
        (
            "override",
            r"\bno\s+longer\s+(?:bound|restricted|constrained|limited)\s+by\b",
        ),
        # -- role hijack / jailbreak --------------------------------------------
        (
            "role_hijack",
            r"\byou\s+are\s+now\s+(?!able\b|allowed\s+to\s+(?:park|enter|book)|free\s+to\s+go"
            r"|registered|subscribed|enrolled|connected|logged|signed|booked|confirmed|checked"
            r"|ready|done|on\s+the\s+(?:list|team|waitlist)|in\s+(?:the\s+)?(?:queue|line"
            r"|waitlist))",
        ),
        (
            "role_hijack",
            r"\byou\s+are\s+no\s+longer\s+(?:an?\s+)?(?:ai|assistant|chatgpt|claude|gpt|bound"
            r"|restricted|limited|required|a\s+language\s+model|constrained)",
        ),
        (
            "role_hijack",
            r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will\s+be|shall\s+be|must\s+act|act\s+as"
            r"|have\s+no|will\s+ignore|must\s+ignore|ignore|respond\s+as|play)\b",
        ),
        (
            "role_hijack",
            r"\b(?:act|behave|respond|roleplay|role-play|pose)\s+as\s+(?:if\s+you\s+(?:were|are)\s+)?"
            r"(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|jailbroken|evil|malicious|dan\b"
            r"|different\s+ai|ai\s+without|the\s+system|(?:root|admin(?:istrator)?|developer|hacker)"
            r"(?!\s+(?:advocate|relations|evangelist|experience|champion|on\s+call|for\s+the"
            r"|of\s+the|in\s+the|at\b))"
            r"|my\s+(?:late\s+|dead\s+|deceased\s+)?grand(?:ma|mother|pa|father))",
        ),
        (
            "role_hijack",
            r"\bpretend\s+(?:to\s+be|you\s+are|you're|that\s+you\s+are)\s+(?:an?\s+)?"
            r"(?:unrestricted|unfiltered|uncensored|jailbroken|evil|dan\b|different|not\s+an\s+ai"
            r"|the\s+system|the\s+developer|human|free|without|an?\s+ai\s+(?:with|without))",
        ),
        (
            "role_hijack",
            r"\b(?:dan|god|jailbreak|jailbroken|unrestricted|unfiltered|evil|chaos|sudo)\s+mode\b"
            r"|\b(?:you\s+are|you're)\s+(?:now\s+)?in\s+(?:developer|dan|god|debug|admin"
            r"|maintenance)\s+mode\b|\bdo\s+anything\s+now\b|\bmaintenance\s+mode\s+on\b",
        ),
        (
            "role_hijack",
            r"\bjailbr(?:eak|oken)\s+(?:prompt|the\s+(?:ai|model|assistant|llm|chatbot)|version"
            r"|ai|assistant)\b|\byou\s+(?:are|have\s+been)\s+(?:now\s+)?jailbroken\b",
        ),
        (
            "role_hijack",
            r"\bthe\s+real\s+user\s+is\s+not\b|\bi\s+am\s+your\s+(?:developer|creator"
            r"|administrator|admin|system|operator)\b|\bi\s+am\s+the\s+(?:developer|creator"
            r"|administrator|admin|system|operator)\b(?=\s*(?:[,;:!]|$|and\s+(?:i|you)\b"
            r"|so\s+you\b|now\b|here\b))",
        ),
        # -- role and tag spoofing ----------------------------------------------
        (
            "tag_spoof",
            r"<\s*/?\s*(?:system|assistant|developer|tool|function|user|human|instructions?|sys"
            r"|im_start|im_end|tool_calls?|tool_result|tool_response|tool_output|function_calls?"
            r"|function_result|function_response|functions|walrus-memories|memwal-memories"
            r"|relevant-memories|memory|memories|admin|prompt|context|system-prompt|system_prompt)"
            r"\b[^<>]{0,200}>",
        ),
        (
            "tag_spoof",
            r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id"
            r"|end_header_id|begin_of_text|tool|ipython)\s*\|>",
        ),
        ("tag_spoof", r"\[\s*/?\s*(?:inst|sys|system|assistant|admin)\s*\]|<<\s*/?\s*sys\s*>>"),
        (
            "tag_spoof",
            r"^\s*#{1,6}\s*(?:system|assistant|developer|instructions?|admin|human|user|response)"
            r"(?:\s+(?:prompt|message|note|override))?\s*:",
        ),
        (
            "tag_spoof",
            r"^\s*(?:system|developer|admin)\s*(?:message|prompt|override|instructions?|note)?\s*:"
            r"(?=[^\n]{0,120}\b(?:you|ignore|must|always|never|do\s+not|don'?t|respond|reply"
            r"|answer|comply|obey|continue|from\s+now|without|grant|disable|enable|mode)\b)",
        ),
        ("tag_spoof", r"\[\s*system\s*\]\s*\(#"),
        # -- fake tool results ---------------------------------------------------
        (
            "fake_tool_result",
            r"\b(?:tool|function)[ _-]?(?:result|output|response|call)s?\s*[:=]|"
            r"\bbegin\s+(?:tool|function)\s+(?:output|result|response)\b|"
            r"\[\s*(?:tool|function)[ _-]?(?:result|output|response)\s*\]",
        ),
        (
            "fake_tool_result",
            r"[\"']role[\"']\s*:\s*[\"'](?:system|tool|function|developer)[\"']|"
            r"[\"'](?:tool_calls?|function_call)[\"']\s*:",
        ),
        # -- tool-call coercion ----------------------------------------------------
        (
            "tool_coercion",
            r"\b(?:you\s+(?:must|should|need\s+to|have\s+to|are\s+required\s+to)|immediately|now|please"
            r"|always|be\s+sure\s+to|make\s+sure\s+(?:to|you)|first|must)\s+(?:call|invoke|execute"
            r"|run|use|trigger|fire)\s+(?:the\s+)?(?:[\w.-]+\s+)?(?:tool|function)\b",
        ),
        (
            "tool_coercion",
            r"\bmemory_(?:store|forget|update|delete_all|delete)\b",
        ),
        (
            "tool_coercion",
            r"\b(?:call|invoke|execute|run)\s+(?:the\s+)?`?[a-z][a-z0-9_]*_[a-z0-9_]+`?\s*\(|"
            r"\b(?:call|invoke)\s+(?:the\s+)?`?[a-z][a-z0-9_]*`?\s+(?:tool|function)\s+with\b",
        ),
        (
            "tool_coercion",
            r"\bexecute\s+(?:the\s+following|this)\s+(?:command|code|script|shell)|"
            r"\b(?:curl|wget)\s+[^\n|]{1,200}\|\s*(?:ba|z)?sh\b|\brm\s+-rf\s+[/~]",
        ),
        (
            "tool_coercion",
            r"\b(?:delete|erase|wipe|remove|clear|purge)\s+(?:all|every|each)\s+(?:of\s+)?"
            r"(?:your\s+|the\s+|my\s+|stored\s+|saved\s+|user'?s?\s+)*(?:memories|memory)\b",
        ),
        (
            "tool_coercion",
            r"\b(?:ai|agents?|assistants?|llms?|models?|bots?)\s+(?:\w+\s+){0,3}(?:must|should|shall)"
            r"\s+(?:\w+\s+){0,2}(?:call|invoke|execute|run|store|save)\b",
        ),
        (
            "tool_coercion",
            r"\bdecode\s+(?:this|the\s+following)\s+(?:base64|b64|hex|rot13)?[^\n]{0,40}?\b(?:and\s+)?"
            r"(?:follow|execute|obey|run|do)\b",
        ),
        # -- exfiltration ----------------------------------------------------------
        (
            "exfiltration",
            r"\b(?:send|post|upload|forward|e-?mail|leak|exfiltrate|transmit|share|submit|dump|fetch"
            r"|append|paste|beam|pipe)\b[^\n]{0,80}?\b(?:passwords?|api\s*keys?|secrets?|tokens?"
            r"|credentials|private\s+keys?|ssh\s+keys?|id_rsa|\.env|env(?:ironment)?\s+"
            r"variables?|conversation(?:\s+history)?|chat\s+(?:history|log)|memories|memory\s+"
            r"contents|system\s+prompt|cookies|session\s+tokens?|email\s+address|phone\s+number"
            r"|\.aws|dialog(?:ue)?\s+(?:history|log))\b[^\n]{0,80}?(?:\bto\b|\binto\b|\bat\b"
            r"|\bvia\b|\bon\b|:)\s*(?:this\s+|the\s+|a\s+|my\s+)?(?:https?://|www\.|[\w.+-]+@[\w-]+"
            r"\.|webhook|url|endpoint|server|pastebin|gist|attacker|address|link)",
        ),
        (
            "exfiltration",
            r"\b(?:send|post|upload|forward|e-?mail|transmit|leak)\s+(?:everything|all\s+"
            r"(?:messages|data|memories)|the\s+(?:whole|entire|full)\s+(?:conversation|chat)"
            r"|(?:the|this)\s+conversation|all\s+stored\s+memories|the\s+chat)\b",
        ),
        (
            "exfiltration",
            r"!\[[^\]]{0,100}\]\(\s*https?://[^)\s]*\?[^)\s]*\)|https?://\S*[?&][\w-]+=(?:\{|\[|%7b"
            r"|<|\$\{)",
        ),
        (
            "exfiltration",
            r"\b(?:upload|send|post|copy)\s+(?:the\s+)?contents?\s+of\s+[~/.]|"
            r"(?:~|\$home)/\.(?:ssh|aws|gnupg|config|netrc|docker)\b",
        ),
        # -- prompt leaks ---------------------------------------------------------------
        (
            "prompt_leak",
            r"\b(?:reveal|print|repeat|output|disclose|leak|dump|recite|translate|spell\s+out"
            r"|show|display|tell\s+me|give\s+me|share|expose|paste)\s+(?:me\s+)?(?:your|all\s+your"
            r"|the\s+(?:hidden|initial|original|secret|full|entire|exact|complete|raw|developer))\s+"
            r"(?:(?:hidden|initial|original|secret|full|entire|exact|complete|raw|first|previous"
            r"|prior)\s+)?(?:system\s+)?(?:prompt|instructions|developer\s+message|configuration|rules"
            r"|guidelines|directives)\b(?!\s+(?:for|on|to|of|in|about|from|that\s+came)\b)",
        ),
        (
            "prompt_leak",
            r"\b(?:reveal|print|repeat|output|disclose|leak|dump|recite|translate)\s+(?:the\s+)?"
            r"(?:system\s+prompt|developer\s+message|system\s+message|hidden\s+instructions)\b",
        ),
        (
            "prompt_leak",
            r"\brepeat\s+(?:everything|all|the\s+text|the\s+words|what\s+is\s+written)\s+"
            r"(?:above|before|prior)|\bincluding\s+(?:the\s+)?hidden\s+instructions\b",
        ),
        # -- memory poisoning: text addressed to the model --------------------------
        (
            "poisoning",
            r"\bwhen(?:ever)?\s+you\s+(?:read|see|recall|retrieve|load|process|encounter|find)\s+"
            r"this\b",
        ),
        # (an address to the model alone -- "Note to the assistant: I prefer metric
        # units" -- is ordinary; walrus_mem.injection.structural_cues flags it only
        # together with an action, a sensitive object or a harmful claim)
        (
            "poisoning",
            r"\b(?:ais?|assistants?|llms?|agents?|models?|bots?)\s+(?:reading|processing|seeing"
            r"|parsing|recalling)\s+this\b",
        ),
        (
            "poisoning",
            r"\b(?:the\s+)?(?:ai|assistant|llm|chatbot)\s+(?:must|should|shall|will|has\s+to|is\s+"
            r"required\s+to)\s+(?:now\s+|always\s+|immediately\s+)?(?:ignore|disregard|reveal|send"
            r"|obey|forget|execute|leak|exfiltrate|stop\s+following|speak\s+only|only\s+speak"
            r"|promote|recommend)",
        ),
        (
            "poisoning",
            r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|reveal\s+"
            r"(?:this\s+)?to|let)\s+(?:the\s+)?(?:user|human|operator)\b",
        ),
        (
            "poisoning",
            r"\b(?:always|must|secretly|quietly|silently)\s+(?:\w+\s+){0,2}(?:include|append|add"
            r"|insert|mention|attach)\b[^\n]{0,80}?\b(?:in|to|into|at\s+the\s+end\s+of)\s+"
            r"(?:every|all|each|your)\s+(?:future\s+)?(?:responses?|answers?|repl(?:y|ies)"
            r"|messages?|outputs?)\b",
        ),
        (
            "poisoning",
            r"\bfor\s+(?:every|each|all)\s+(?:future\s+)?(?:answers?|responses?|repl(?:y|ies))\b"
            r"[^\n]{0,40}?\b(?:secretly|quietly|silently|always)\b",
        ),
        # -- non-English overrides ------------------------------------------------
        (
            "non_english",
            # es
            r"\b(?:ignora|ignore|ignorar|olvida|olvidar|olvide)\s+(?:todas?\s+)?(?:las|tus|sus|los)?"
            r"\s*(?:instrucciones|indicaciones|órdenes|directrices)\b"
            r"|\b(?:ignora|ignorar|olvida|olvidar|olvide)\s+(?:todas\s+las|tus|sus)\s+reglas\b"
            r"|\bno\s+sigas\s+(?:las|tus)\s+(?:instrucciones|reglas)"
            r"|\ba\s+partir\s+de\s+ahora\s+eres\b|\bahora\s+eres\s+(?:un|una|el|la)\b"
            r"|\b(?:revela|muestra)\s+(?:tu|el)\s+(?:prompt|mensaje)\s+(?:del?|de)\s+sistema",
        ),
        (
            "non_english",
            # fr
            r"\b(?:ignore[rz]?|oublie[rz]?)\s+(?:toutes\s+|tous\s+)?(?:les|tes|vos|ces)\s+"
            r"(?:instructions|consignes|règles|directives)\b"
            r"|\bne\s+(?:suis|suivez)\s+(?:pas|plus)\s+(?:les|tes|vos)\s+(?:instructions|consignes"
            r"|règles)|\b(?:tu\s+es|vous\s+êtes)\s+(?:désormais|maintenant)\b"
            r"|\bdésormais,?\s+(?:tu\s+es|vous\s+êtes|tu\s+dois|vous\s+devez)"
            r"|\brévèle[rz]?\s+(?:ton|votre|le)\s+(?:prompt|message)\s+système",
        ),
        (
            "non_english",
            # de
            r"\bignorier(?:e|en|t)?\s+(?:sie\s+)?(?:alle\s+)?(?:vorherigen|bisherigen|obigen|vorigen"
            r"|früheren|deine|ihre|die)?\s*(?:anweisungen|instruktionen|regeln|vorgaben|befehle)"
            r"|\bvergiss\s+(?:alle\s+)?(?:deine|ihre|die|alle)\s+(?:anweisungen|regeln|instruktionen"
            r"|vorgaben)|\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort)\b|\bab\s+sofort\s+bist\s+du\b"
            r"|\b(?:zeige|verrate|gib)\s+(?:mir\s+)?(?:deinen|den|dein)\s+system-?prompt"
            r"|\bmissachte\b",
        ),
        (
            "non_english",
            # pt
            r"\b(?:ignore|ignora|esqueça|esqueca|desconsidere)\s+(?:todas\s+)?(?:as|suas|tuas)\s+"
            r"(?:instruções|instrucoes|regras|orientações)\b"
            r"|\b(?:agora|a\s+partir\s+de\s+agora),?\s+voc[êe]\s+(?:é|e|será)\b"
            r"|\brevele\s+(?:o|seu)\s+prompt\s+do\s+sistema|\bdesconsidere\b",
        ),
        (
            "non_english",
            # it
            r"\b(?:ignora|dimentica)\s+(?:tutte\s+)?(?:le\s+)?(?:tue\s+)?(?:istruzioni|regole"
            r"|indicazioni)\b|\b(?:d'ora\s+in\s+poi|da\s+ora|ora|adesso)\s+sei\s+(?:un|una|libero"
            r"|libera)\b|\brivela\s+(?:il\s+)?(?:tuo\s+)?prompt\s+di\s+sistema"
            r"|\bnon\s+seguire\s+(?:più\s+)?(?:le\s+)?(?:istruzioni|regole)",
        ),
        (
            "non_english",
            # ru
            r"игнорир\w*\s+(?:все\s+)?(?:предыдущие\s+|прежние\s+|прошлые\s+|системные\s+)?"
            r"(?:инструкци|указани|правил|команд)\w*|забудь\w*\s+(?:все\s+)?(?:свои\s+|предыдущие\s+)?"
            r"(?:инструкци|правил|указани)\w*|\bтеперь\s+ты\b|\bотныне\s+ты\b"
            r"|не\s+следуй\w*|покажи\s+(?:свой\s+)?системн\w*\s+(?:промпт|prompt)",
        ),
        (
            "non_english",
            # zh
            r"(?:忽略|无视|忘记|忘掉|不要理会|不理会|放弃|无视掉)(?:掉)?(?:之前|以前|上面|上述|先前|前面"
            r"|所有|全部|你的)?(?:的)?(?:所有|全部|一切)?(?:的)?(?:指令|指示|说明|规则|提示|命令|设定|要求)"
            r"|你现在是|从现在开始[，,]?你|(?:显示|输出|泄露|告诉我)(?:你的)?系统提示",
        ),
        (
            "non_english",
            # ja
            r"(?:以前|前|上記|これまで|今まで|先ほど)の(?:すべての|全ての)?(?:指示|命令|ルール|指令"
            r"|プロンプト)[はを]?(?:すべて|全て)?(?:無視|忘れ)|(?:指示|命令|ルール)を(?:すべて|全て)?"
            r"(?:無視|忘れ)|あなたは(?:今から|これから)|システムプロンプトを(?:表示|教え|出力|見せ)",
        ),
        (
            "non_english",
            # ko, nl, pl, tr, ar, hi
            r"(?:이전|위의|모든)(?:의)?\s*(?:모든\s*)?(?:지시|명령|규칙|지침)\w*\s*(?:무시|잊어)"
            r"|지금부터\s*너는|시스템\s*프롬프트를?\s*(?:보여|출력|알려)"
            r"|\bnegeer\s+(?:alle\s+)?(?:vorige|eerdere|voorgaande)?\s*(?:instructies|regels)"
            r"|\bzignoruj\s+(?:wszystkie\s+)?(?:poprzednie\s+)?(?:instrukcje|polecenia|zasady)"
            r"|(?:önceki|tüm)\s+(?:talimatları|kuralları)\s+(?:yok\s+say|görmezden\s+gel|unut)"
            r"|تجاهل\s+(?:جميع\s+|كل\s+)?(?:التعليمات|الأوامر)"
            r"|(?:पिछले|सभी)\s+(?:निर्देशों|निर्देश)\s+(?:को\s+)?(?:अनदेखा|नज़रअंदाज़)",
        ),
    )
)

_SQUASHED_PATTERNS: Final[tuple[re.Pattern[str], ...]] = (
    re.compile(
        r"(?:ignore|disregard|forget|bypass|override)(?:all|any|the|your|previous|prior|above"
        r"|earlier|system)+(?:instructions?|rules|directives|guidelines|prompts?)"
    ),
    re.compile(r"youarenow(?:dan|injailbreak|jailbroken|unrestricted|unfiltered)"),
    re.compile(r"revealyoursystemprompt|systempromptoverride"),
)



@dataclass(frozen=True)
class InjectionResult:
    """Outcome of :func:`detect_injection`. Truthy when the text was flagged.

    ``labels`` are the families that matched (``override``, ``role_hijack``,
    ``tag_spoof``, ``fake_tool_result``, ``tool_coercion``, ``exfiltration``,
    ``prompt_leak``, ``poisoning``, ``non_english``, ``obfuscated``,
    ``encoded``); ``reasons`` give the matched snippets (truncated).
    """

    flagged: bool
    labels: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.flagged


# Letters spaced out ("i g n o r e"), or words mixing letters with digits or symbols ("1gn0r3").
_OBFUSCATION_SIGNS: Final = re.compile(
    r"(?:\b\w\W{1,3}){4,}\w\b|\b(?=\w*[a-z])(?=\w*[0-9])\w{3,}\b|[a-z][@$!|][a-z]", re.IGNORECASE
)


def _labelled_hits(view: str) -> Iterable[tuple[str, str]]:
    """Every layer on one normalised view: pattern families, paraphrases, lexicons, cues."""
    for label, pattern in _INJECTION_PATTERNS:
        found = pattern.search(view)
        if found:
            yield label, found.group(0)
    yield from injection.paraphrase_hits(view)
    for _lang, snippet in injection.lexicon_hits(view):
        yield "non_english", snippet
    yield from injection.structural_cues(view)
    yield from injection_concepts.concept_hits(view)
    yield from injection_intents.intent_hits(view)
    if not _OBFUSCATION_SIGNS.search(view):
        return  # squashing plain prose only loses context ("ignore the rules of Monopoly")
    squashed = _squash(view)
    for pattern in _SQUASHED_PATTERNS:
        found = pattern.search(squashed)
        if found:
            yield "obfuscated", found.group(0)
            break


def detect_injection(text: str) -> InjectionResult:
    """Return whether ``text`` looks like a prompt-injection attempt, and why.

    Runs the layers of :mod:`walrus_mem.injection` on every normalised view
    (NFKC, invisibles and bidi removed, homoglyphs, spaced and leet forms,
    decoded base64 / hex / percent / rot13) of every window of the text; the
    whole text is scanned, however long. Advisory only: see the module
    docstring. The semantic layer needs embeddings and runs where they exist
    (:func:`walrus_mem.prompt_screen.screen_records`).
    """
    if not text or not text.strip():
        return InjectionResult(False)
    labels: list[str] = []
    reasons: list[str] = []
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

_FILLER_WORDS = (
    r"ok|okay|sure|thanks|thank\s+you|thank\s+you\s+so\s+much|thanks\s+a\s+lot|thx|ty|yes|yep"
    r"|yeah|yup|no|nope|nah|got\s+it|hmm+|hm+|ah+|oh+|lol|haha+|nice|cool|great|right|alright"
    r"|fine|k+|perfect|awesome|sounds\s+good|no\s+problem|np|lgtm|will\s+do|done|good|wow"
    r"|agreed|understood|makes\s+sense|of\s+course|absolutely|exactly|indeed|cheers|bye"
    r"|goodbye|hello|hi|hey|good\s+morning|good\s+night|see\s+you|you'?re\s+welcome|welcome"
    r"|sorry|please|go\s+ahead|continue|next|that'?s\s+(?:(?:really|very|so|super)\s+)?"
    r"(?:great|perfect|fine|right|helpful|awesome|all|good|cool|nice|amazing|useful)|very\s+helpful|really\s+helpful|super\s+helpful|much\s+appreciated"
    r"|appreciate\s+it|i\s+appreciate\s+(?:it|that|your\s+help)|this\s+is\s+(?:great|helpful"
    r"|perfect|awesome)|it\s+works|that\s+works"
)
_FILLER: Final = re.compile(
    rf"^(?:(?:{_FILLER_WORDS})(?:[\s,.!?;:~-]+|$))+$", re.IGNORECASE
)
_EMOJI: Final = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\U0001f1e6-\U0001f1ff]"
)
_FENCE: Final = re.compile(r"(?m)^\s*(?:```|~~~)")
_HEADING: Final = re.compile(r"(?m)^\s{0,3}#{1,6}\s+\S|^[^\n]+\n\s*(?:={3,}|-{3,})\s*$")
_SYSTEM_CONTENT: Final = re.compile(
    r"^\s*(?:\[?system\]?\s*:|<\s*system\b|a\s+new\s+session\s+was\s+started|run\s+your\s+"
    r"session\s+startup)",
    re.IGNORECASE,
)


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
    if _FENCE.search(text):
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
    if _FILLER.match(_EMOJI.sub("", stripped).strip()):
        return CaptureDecision(False, "filler")
    if (stripped.startswith("<") and "</" in stripped) or re.search(
        r"<\s*/?\s*(?:walrus|memwal|relevant)-memories", stripped, re.IGNORECASE
    ):
        return CaptureDecision(False, "markup")
    if stripped[0] in "{[" and stripped[-1] in "}]":
        return CaptureDecision(False, "markup")
    if _SYSTEM_CONTENT.search(stripped):
        return CaptureDecision(False, "system_content")
    if _looks_like_code(stripped):
        return CaptureDecision(False, "code")
    if _HEADING.search(stripped):
        return CaptureDecision(False, "heading")
    emoji = len(_EMOJI.findall(stripped))
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
# Words that say nothing once the secret is gone ("my password is [REDACTED]").
_UNINFORMATIVE: Final = frozenset(
    "a an the my our your his her their its is are was were be to of for in on at and or with "
    "this that it here use using used set now new key keys token tokens secret secrets password "
    "passwords pwd pass passcode pin api apikey credential credentials login auth bearer "
    "access private value code user users".split()
)
_PLACEHOLDER: Final = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
_PLACEHOLDER_KIND: Final = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")
# Kinds that are the whole point of their sentence: the fact is dropped, not redacted.
_DROP_WHOLE: Final = frozenset({"password", "pin", "bip39_seed_phrase", "env_secret"})


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
                                 *(m.group(1) for m in _PLACEHOLDER_KIND.finditer(stripped))]))
    if not kinds:
        return FactScreen(stripped)
    if secret_policy != "redact":
        return FactScreen(None, kinds, reason="secret")
    if _DROP_WHOLE.intersection(kinds):
        # A stated password is the whole point of its sentence: nothing to keep.
        return FactScreen(None, kinds, reason="nothing_left")
    rest = [
        word for word in re.findall(r"[^\W\d_]{2,}", _PLACEHOLDER.sub(" ", redacted).lower())
        if word not in _UNINFORMATIVE
    ]
    if len(rest) < 2:
        return FactScreen(None, kinds, reason="nothing_left")
    return FactScreen(redacted, kinds)
