"""Credentials known only by what labels them: command-line flags and UUID-shaped keys.

* Command lines: ``mysql -u root -pS3cret``, ``sshpass -p 'pw'``, ``--password=pw``,
  ``--token pw``, ``redis-cli -a pw``, ``docker login -p pw``, ``curl -u user:pw``
  (``PGPASSWORD=`` and ``MYSQL_PWD=`` are env assignments, found in secret_checks).
  ``mysql -u root -p`` (prompting) and ``--password-stdin`` hold no value and stay.
* UUID-shaped keys (Heroku, Snyk, Postmark, PagerDuty, LaunchDarkly, ...): a UUID
  right after a credential label ("My Heroku API key is <uuid>", "token: <uuid>").
  A UUID after anything else -- "request id", "subscription id", "tenant" -- is an
  identifier, not a secret, and stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

__all__ = ["labelled_spans"]

Span = tuple[int, int, str]
_F: Final = re.IGNORECASE

_QUOTED_OR_BARE: Final = r"(?:'(?P<sq>[^'\n]+)'|\"(?P<dq>[^\"\n]+)\"|(?P<bare>[^\s'\"`]+))"
# Placeholders and variables are not values: -p$MYSQL_PW, --password=<pw>, --token ***
_PLACEHOLDER: Final = re.compile(
    r"^(?:\$\{?[\w.:-]+\}?|<[^>]*>|\{\{[^}]*\}\}|%\w+%|x{3,}|\*{3,}|\.{3,}|changeme|your[\w-]*"
    r"|redacted|none|null|example|placeholder|password|secret|token|pass|pw|\[redacted.*)$", _F)
_ATTACHED_P: Final = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb(?:-dump|-admin)?)\b"
    r"[^\n|;&]{0,80}?\s-p" + _QUOTED_OR_BARE, _F)
_SPACED_P: Final = re.compile(
    r"\b(?:sshpass|docker\s+login|podman\s+login|helm\s+registry\s+login)\b[^\n|;&]{0,80}?"
    r"\s-p\s*" + _QUOTED_OR_BARE, _F)
_REDIS_A: Final = re.compile(r"\bredis-cli\b[^\n|;&]{0,80}?\s-a\s+" + _QUOTED_OR_BARE, _F)
_CURL_USER: Final = re.compile(
    r"\s(?:-u|--user)\s+['\"]?[^\s:'\"]+:(?P<bare>[^\s'\"@]+)", _F)
_FLAG: Final = re.compile(
    r"(?<![\w-])--(?:db-|admin-|root-|master-|client-|api-|auth-|access-|bot-)?(?:password|passwd"
    r"|pass|pwd|token|secret|api-?key|apikey|key)(?P<sep>=|\s+)" + _QUOTED_OR_BARE, _F)


def _value(match: re.Match[str]) -> tuple[int, int] | None:
    for group in ("sq", "dq", "bare"):
        if group in match.re.groupindex and match.group(group):
            start, end = match.span(group)
            value = match.group(group)
            if _PLACEHOLDER.match(value) or value.startswith("-"):
                return None
            return start, end
    return None


def _looks_secret(value: str) -> bool:
    """A spaced flag value ("--token abc") needs digits or symbols: "--token flag" is prose."""
    return len(value) >= 6 and any(c.isalpha() for c in value) \
        and any(not c.isalpha() for c in value)


def _command_lines(view: str) -> Iterator[Span]:
    for pattern in (_ATTACHED_P, _SPACED_P, _REDIS_A, _CURL_USER):
        for match in pattern.finditer(view):
            span = _value(match)
            if span:
                yield (*span, "cli_credential")
    for match in _FLAG.finditer(view):
        span = _value(match)
        if span is None:
            continue
        value = view[span[0]:span[1]]
        if match.group("sep") != "=" and not (match.group("sq") or match.group("dq")) \
                and not _looks_secret(value):
            continue
        yield (*span, "cli_credential")


_UUID: Final = re.compile(
    r"(?<![0-9A-Za-z-])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![0-9A-Za-z-])",
    _F)
_KEY_LABEL: Final = re.compile(
    r"(?:api|access|secret|license|licence|app|private|auth|master|integration|routing|sdk"
    r"|server|account|signing|encryption)[\s_-]*key|apikey|(?:api|auth|access|bearer|oauth"
    r"|server|account|personal[\s_-]+access|bot|refresh|session|deploy)?[\s_-]*token|secret"
    r"|password|passwd|credentials?", _F)
# Between the label and the UUID only a linking word: "is", ":", "=", "is now", "set to".
_GAP: Final = re.compile(r"^[\s\"'`:=]*(?:(?:is|was|now|set\s+to|->|→)[\s\"'`:=]*)*$", _F)
_VENDORS: Final = ("heroku", "snyk", "postmark", "pagerduty", "launchdarkly", "fastly",
                   "mailjet", "bitbucket", "okta", "contentful", "sentry")
_LOOKBACK: Final = 50


def _uuid_keys(view: str) -> Iterator[Span]:
    for match in _UUID.finditer(view):
        line_start = view.rfind("\n", 0, match.start()) + 1
        window_start = max(line_start, match.start() - _LOOKBACK)
        before = view[window_start:match.start()]
        labels = list(_KEY_LABEL.finditer(before))
        if not labels or not _GAP.match(before[labels[-1].end():]):
            continue
        near = before.lower()
        vendor = next((v for v in _VENDORS if v in near), None)
        yield match.start(), match.end(), f"{vendor}_api_key" if vendor else "uuid_key"


def labelled_spans(view: str) -> Iterator[Span]:
    """Value spans of command-line credentials and labelled UUID-shaped keys."""
    if "-" not in view:
        return  # every flag and every UUID has a dash
    yield from _command_lines(view)
    yield from _uuid_keys(view)
