"""Whether a `store.url` can be opened as written: the scheme, and for PostgreSQL a URL that
parses into the user, password, host and port the driver will use.

A password with a reserved character (`/`, `?`, `#`, `@`, ...) must be percent-encoded in a URL;
unencoded, the driver reads part of it as the host or the port and fails at start-up. This
check finds that at load, so `config check` and `serve` say so in one line naming `store.url`.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

SCHEMES = ("postgresql://", "postgres://")
_FIX = (
    "percent-encode the password ({example}), or leave it out of the URL and set PGPASSWORD "
    "in the environment"
)


def encode_password(password: str) -> str:
    """`password` as it must stand in a PostgreSQL URL (every reserved character encoded)."""
    return quote(password, safe="")


def store_url_problem(url: str) -> str | None:
    """Why `url` cannot be opened (a sentence for `store.url`), or None."""
    if url.startswith("sqlite:///"):
        return None if url.removeprefix("sqlite:///") else "sqlite:/// needs a file path"
    if not url.startswith(SCHEMES):
        return "must be postgresql://... or sqlite:///path"
    fix = _FIX.format(example=f"'/' as {encode_password('/')}, '@' as {encode_password('@')}")
    parts = urlsplit(url)
    if "@" in parts.path + parts.query + parts.fragment:
        return f"has a user name or password with a reserved character (/, ?, #): {fix}"
    if parts.netloc.count("@") > 1:
        return f"has a user name or password with an '@': {fix}"
    if "," not in parts.netloc:  # one host (the driver also takes host1:port1,host2:port2)
        try:
            parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
        except ValueError:
            return f"has a port that is not a number (a ':' in the password?): {fix}"
    return None
