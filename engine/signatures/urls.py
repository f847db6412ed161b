"""Whether a URL a request names may be fetched: parsed and compared part by part, never as a
string prefix.

`under(url, base)` is the rule for a block's `keysUrl`: the same scheme, host and port, no
userinfo on either side, and the base's path segments a prefix of the URL's (so `keysUrl:
https://keys.example.test` admits `https://keys.example.test/a.pem` and refuses
`https://keys.example.test.evil.test/a.pem` and `https://keys.example.test@127.0.0.1/a.pem`).
`sns_host(host)` is Amazon's published host rule for SNS: `sns.<region>.amazonaws.com` for the
commercial and GovCloud partitions, `sns.<region>.amazonaws.com.cn` for China, where a region is
`<area>[-gov]-<direction>-<n>` (`us-east-1`, `us-gov-west-1`, `cn-north-1`): an S3 bucket host
(`sns.s3.amazonaws.com`, `sns.s3-us-west-2.amazonaws.com`) is not SNS.

`plain(url)` refuses what no certificate or key URL carries and some parsers read differently:
control characters, spaces, backslashes and non-ASCII. Every refusal is a `False`, which the
caller turns into a 4xx; nothing here raises on hostile text.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

_REGION = r"[a-z]{2}(?:-gov)?-[a-z]+-\d{1,2}"
_SNS_HOST = re.compile(
    rf"sns\.(?:(?!cn-){_REGION}\.amazonaws\.com|cn-[a-z]+-\d{{1,2}}\.amazonaws\.com\.cn)"
)
_UNSAFE = re.compile(r"[\x00-\x20\x7f-\U0010ffff\\]")
_DEFAULT_PORTS = {"https": 443, "http": 80}


def plain(url: str) -> bool:
    """Whether `url` is printable ASCII with no space or backslash."""
    return _UNSAFE.search(url) is None


def _split(url: str) -> SplitResult | None:
    if not plain(url):
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return None
    return parts


def _port(parts: SplitResult) -> int:
    return parts.port if parts.port is not None else _DEFAULT_PORTS[parts.scheme]


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s]


def under(url: str, base: str) -> bool:
    """Whether `url` lies under `base`: same scheme, host and port, `base`'s path segments a
    prefix of `url`'s, no userinfo, no `..` or `.` segment."""
    got, want = _split(url), _split(base)
    if got is None or want is None:
        return False
    if (got.scheme, got.hostname, _port(got)) != (want.scheme, want.hostname, _port(want)):
        return False
    segments, prefix = _segments(got.path), _segments(want.path)
    if any(s in (".", "..") or "%" in s for s in segments):
        return False
    return segments[: len(prefix)] == prefix


def sns_host(host: str) -> bool:
    """Amazon's SNS host rule (see the module docstring)."""
    return _SNS_HOST.fullmatch(host) is not None


def sns_url(url: str, *, pem: bool) -> bool:
    """An `https://` URL on an SNS host, on the default port, with no userinfo; with `pem`, a
    path ending `.pem` and no query or fragment (a `SigningCertURL`)."""
    parts = _split(url)
    if parts is None or parts.scheme != "https" or parts.netloc.lower() != parts.hostname:
        return False  # an explicit port (even :443) is not what SNS sends
    if not sns_host(parts.hostname or ""):
        return False
    if pem:
        return parts.path.endswith(".pem") and not parts.query and not parts.fragment
    return True
