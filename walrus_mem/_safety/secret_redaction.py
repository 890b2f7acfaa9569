"""Secret redaction: credentials in text become ``[REDACTED:<kind>]``.

Provider patterns run here; checksum-validated identifiers come from
:mod:`walrus_mem._safety.secret_checks`. Both match on a normalised view and map
spans back to the original text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Final

from .secret_checks import normalised_view, validated_spans

__all__ = ["SecretFinding", "redact_secrets"]


@dataclass(frozen=True)
class SecretFinding:
    """One credential found by :func:`redact_secrets`: its kind and span.

    The span refers to the *input* text. The secret value itself is never
    kept, so findings are safe to log.
    """

    kind: str
    start: int
    end: int


_NOT_A_PASSWORD = (
    r"(?!(?:stored|kept|saved|in|the|a|an|managed|set|changed|rotated|required|not|never|too|very"
    r"|expired|incorrect|wrong|weak|strong|reset|same|different|empty|blank|long|short|secure"
    r"|unknown|missing|what|something|hidden|encrypted|hashed|redacted|my|your|our|their|on|at"
    r"|of|for|to|from|only|still|also|now|being|generated|provided|available|needed|listed"
    r"|written|shared|handled|protected|defined|located|updated|invalid|valid|case|at|under"
    r"|behind|inside|also|\[redacted)\b)"
)
_SECRET_TAIL = r"[^\s\"'`<>]*[^\s\"'`<>.,;:!?)\]]"
# After a foreign credential noun: an adverb or adjective ("ist zu kurz", "es muy larga",
# "est expiré") is prose; the value itself is ASCII ("パスワードは8文字以上" has none).
_NOT_A_FOREIGN_PASSWORD = (
    r"(?!(?:zu|sehr|nicht|abgelaufen|falsch|korrekt|richtig|sicher|stark|schwach|lang|kurz|neu"
    r"|gleich|geheim|einfach|schwierig|muy|demasiado|incorrecta|incorrecto|caducada|segura"
    r"|seguro|fuerte|débil|larga|largo|corta|corto|nueva|nuevo|igual|secreta|secreto|difícil"
    r"|fácil|trop|très|pas|expiré|expirée|incorrect|sûr|forte|faible|longue|long|courte|court"
    r"|nouveau|nouvelle|même|difficile|facile|muito|errada|errado|fraca|curta|nova|novo|mesma"
    r"|mesmo|el|la|le|les|der|die|das|mi|mon|ma|mein|meine|tu|ton|dein|su|son|sein|um|uma"
    r"|un|una|une|ein|eine)\b)"
)

# (kind, pattern); a named group "secret" marks the part to replace, else the
# whole match. Order matters only for ties: earlier entries win.
_SECRET_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (kind, re.compile(rx, flags))
    for kind, rx, flags in (
        (
            "private_key",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)",
            0,
        ),
        (
            "gcp_service_account_key",
            r"[\"']private_key[\"']\s*:\s*[\"'](?P<secret>(?:[^\"'\\]|\\.){16,})[\"']",
            0,
        ),
        ("anthropic_api_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", 0),
        ("openai_api_key", r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}", 0),
        ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{30,255}\b", 0),
        ("github_pat", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", 0),
        ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}", 0),
        ("slack_token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}", 0),
        (
            "slack_webhook",
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]+",
            0,
        ),
        (
            "discord_webhook",
            r"https://(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+",
            0,
        ),
        (
            "webhook_url",
            r"https://[\w.-]+\.webhook\.office\.com/\S+|https://hooks\.zapier\.com/hooks/catch/\S+",
            0,
        ),
        ("discord_bot_token", r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}\b", 0),
        ("telegram_bot_token", r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b", 0),
        ("aws_access_key_id", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", 0),
        (
            "aws_secret_access_key",
            r"(?:aws|amazon)[\w .-]{0,25}?secret[\w .-]{0,25}?(?:[:=]|\bis\b)\s*[\"']?"
            r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
            re.IGNORECASE,
        ),
        ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", 0),
        ("google_oauth_secret", r"\bGOCSPX-[A-Za-z0-9_-]{24,}|\bya29\.[0-9A-Za-z_-]{20,}", 0),
        ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,}|\bwhsec_[0-9a-zA-Z]{24,}", 0),
        ("twilio_api_key", r"\bSK[0-9a-fA-F]{32}\b", 0),
        (
            "twilio_auth_token",
            r"twilio[\w .-]{0,30}?(?:auth[_ .-]?token|secret)[\w .-]{0,10}?(?:[:=]|\bis\b)\s*"
            r"[\"']?(?P<secret>[0-9a-f]{32})\b",
            re.IGNORECASE,
        ),
        ("sendgrid_api_key", r"\bSG\.[\w-]{16,32}\.[\w-]{16,64}", 0),
        ("mailgun_api_key", r"\bkey-[0-9a-f]{32}\b", 0),
        ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", 0),
        ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{40,}", 0),
        ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}\b", 0),
        ("shopify_token", r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b", 0),
        ("digitalocean_token", r"\bdo[por]_v1_[a-f0-9]{64}\b", 0),
        ("sui_private_key", r"\bsuiprivkey1[a-z0-9]{50,}\b", 0),
        ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}", 0),
        (
            "azure_connection_string",
            r"\b(?:AccountKey|SharedAccessKey|SharedSecret|SharedAccessSignature)\s*=\s*"
            r"(?P<secret>[^;\s\"']+)",
            re.IGNORECASE,
        ),
        ("bearer_token", r"\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", re.IGNORECASE),
        (
            "basic_auth_header",
            r"\bauthorization\s*:\s*basic\s+(?P<secret>[A-Za-z0-9+/]{8,}=*)",
            re.IGNORECASE,
        ),
        (
            "database_url_password",
            r"\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|redis|rediss|amqps?|mssql"
            r"|sqlserver|oracle|cockroachdb|clickhouse|jdbc:[a-z]+)://[^\s:/@]*:"
            r"(?P<secret>[^\s@/]+)@",
            re.IGNORECASE,
        ),
        (
            "url_credentials",
            r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:(?P<secret>[^\s@/]+)@",
            re.IGNORECASE,
        ),
        (
            "password",
            r"\b(?:password|passwd|passphrase|pwd|pw|passcode|wi-?fi\s+password)"
            r"(?:\s+(?:for|to|of|on)\s+[\w.@ -]{1,40}?)?\s*(?:is|was|=|:|->|will\s+be|are)\s*"
            rf"(?:now\s+|set\s+to\s+)?[\"'`]?{_NOT_A_PASSWORD}(?P<secret>{_SECRET_TAIL})",
            re.IGNORECASE,
        ),
        (
            "password",
            r"(?:contraseña|clave|mot\s+de\s+passe|passwort|kennwort|senha|пароль|密码|パスワード)"
            r"\s*(?:est|es|ist|é|:|=|—|是|は)\s*[\"'`]?" + _NOT_A_FOREIGN_PASSWORD
            + r"(?P<secret>[!-~]{3,}(?<![.,;:!?)\]]))",
            re.IGNORECASE,
        ),
        (
            "generic_api_key",
            r"\b[a-z0-9_.-]*(?:api[_-]?key|apikey|api[_-]?secret|secret[_-]?key|client[_-]?secret"
            r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key|signing[_-]?key"
            r"|encryption[_-]?key|master[_-]?key|secret|token|credentials?|x-api-key)\b[\"']?\s*"
            r"(?:[:=]|=>|\bis\b)\s*[\"']?(?P<secret>[A-Za-z0-9_\-./+=~]{12,})",
            re.IGNORECASE,
        ),
    )
)

# Kinds whose match is only a secret if it looks random (avoids "token is expired").
_ENTROPY_CHECKED: Final = frozenset({"generic_api_key"})


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(value: str) -> bool:
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and _entropy(value) >= 3.0


def _secret_spans(text: str) -> list[SecretFinding]:
    # Match on the normalised view (NFKC, invisibles dropped, spaced-out runs
    # joined) and map each span back to the original characters.
    view, index = normalised_view(text)
    raw: list[tuple[int, int, int, str]] = []  # start, end (in view), order, kind
    for order, (kind, pattern) in enumerate(_SECRET_PATTERNS):
        for match in pattern.finditer(view):
            group = "secret" if "secret" in pattern.groupindex else 0
            start, end = match.span(group)
            if start < 0 or end <= start:
                continue
            value = match.group(group)
            if kind in _ENTROPY_CHECKED and not _looks_random(value):
                continue
            if value.startswith("[REDACTED:"):
                continue
            raw.append((start, end, order, kind))
    base = len(_SECRET_PATTERNS)
    raw.extend((start, end, base, kind) for start, end, kind in validated_spans(view)
               if end > start and not view[start:end].startswith("[REDACTED:"))
    found = [(index[start], index[end - 1] + 1, order, kind) for start, end, order, kind in raw]
    # Keep the widest match where spans overlap; earlier patterns win ties.
    found.sort(key=lambda f: (f[0], -(f[1] - f[0]), f[2]))
    kept: list[SecretFinding] = []
    for start, end, _order, kind in found:
        if kept and start < kept[-1].end:
            last = kept[-1]
            if end > last.end:
                kept[-1] = SecretFinding(last.kind, last.start, end)
            continue
        kept.append(SecretFinding(kind, start, end))
    return kept


def redact_secrets(text: str) -> tuple[str, list[SecretFinding]]:
    """Replace every credential in ``text`` with ``[REDACTED:<kind>]``.

    Returns the redacted text and the findings (kind and span in the input;
    never the value). Recognises API keys and tokens of common providers,
    JWTs, PEM private keys, bearer/basic auth, credentials in URLs and
    connection strings, webhook URLs, stated passwords and generic
    ``api_key=...`` assignments with a random-looking value.
    """
    findings = _secret_spans(text)
    if not findings:
        return text, []
    parts: list[str] = []
    cursor = 0
    for finding in findings:
        parts.append(text[cursor : finding.start])
        parts.append(f"[REDACTED:{finding.kind}]")
        cursor = finding.end
    parts.append(text[cursor:])
    return "".join(parts), findings
