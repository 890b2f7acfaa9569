"""Credentials inside endpoint URLs (``https://user:password@host``): sent, never shown.

A publisher or aggregator behind a proxy with HTTP basic auth is configured with
the credentials in its URL, often from a ``${VAR}``. The Walrus client splits them
off once (:func:`split_userinfo`) and sends them as an ``Authorization: Basic``
header, so the URLs it keeps, logs (httpx's request lines), puts in errors (and so
in the catalog's ``outbox.last_error``) and in ``doctor`` hold no secret. What is
shown from settings, and error text stored in the catalog, goes through
:func:`redact_userinfo`.
"""

from __future__ import annotations

import base64
import re
from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["REDACTED", "redact_userinfo", "split_userinfo"]

REDACTED: Final = "***"
# scheme://<userinfo>@ : the userinfo runs to the authority's last "@"
_USERINFO: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s?#]*@")


def redact_userinfo(text: str) -> str:
    """``text`` (a URL, or a message quoting URLs) with each ``user:password@`` of a
    URL replaced by ``***@``."""
    return _USERINFO.sub(rf"\1{REDACTED}@", text)


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``(url without its userinfo, "Basic ..." header value or None)``, the header as
    httpx would build it from the URL (user and password percent-decoded)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit(parts._replace(netloc=host)), f"Basic {token}"
