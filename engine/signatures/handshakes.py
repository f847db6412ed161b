"""Verification handshakes: the requests providers send to prove an endpoint is theirs, answered
by the gateway in the exact form each provider expects, never dispatched.

A scheme names its handshake (`Scheme.handshake`). `answer(verifier, method, request)` returns a
`HandshakeAnswer` when the request is that handshake, after the scheme's own proof where it has
one (Slack, Zoom, Twitch and Discord sign theirs; Meta's proof is the verify token), and None
otherwise. `HandshakeRefused` is a typed `Refusal` (a stable code, no HTTP status: the ingress
answers `invalid_verify_token` 403 and `invalid_handshake` 400).

- `meta`: `GET ?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C` -> 200 text/plain `C`
  when T is the block's `verifyToken` (403 otherwise; no `verifyToken`, no handshake).
- `slack`: a signed JSON `{"type": "url_verification", "challenge": C}` -> 200 text/plain `C`.
- `zoom`: a signed `{"event": "endpoint.url_validation", "payload": {"plainToken": P}}` -> 200
  JSON `{"plainToken": P, "encryptedToken": hex HMAC-SHA256(secret, P)}`.
- `twitch`: `Twitch-Eventsub-Message-Type: webhook_callback_verification`, signed -> 200
  text/plain, the body's `challenge`.
- `discord`: a signed PING interaction `{"type": 1}` -> 200 JSON `{"type": 1}`.
- `msgraph`: `POST ?validationToken=V` -> 200 text/plain `V` (Graph signs nothing here).
- `dropbox`: `GET ?challenge=C` -> 200 text/plain `C`.
- `monday`: `POST {"challenge": C}` -> 200 JSON `{"challenge": C}` (monday.com signs nothing
  here when the webhook was not made by an app).
- `okta`: `GET` with `x-okta-verification-challenge: C` and the hook's Authorization header ->
  200 JSON `{"verification": C}`.
- `github`: a signed `ping` (`X-GitHub-Event: ping`, sent when a webhook is created) -> 200 JSON
  `{"ok": true, "handshake": "github_ping"}`.
- `sns`: a signed `SubscriptionConfirmation` from an accepted topic -> the gateway visits its
  `SubscribeURL` (an SNS URL), then 200 (an `UnsubscribeConfirmation`: 200, nothing visited).
A challenge is echoed only when it is 1 to 1024 printable characters, and every answer carries
`X-Content-Type-Options: nosniff` (a browser never reads the echoed text as HTML or script).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable

import attrs

from ..errors import Refusal
from ..request import InboundRequest
from . import sns
from .core import Verifier, json_body

MAX_CHALLENGE = 1024
_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"


@attrs.frozen
class HandshakeAnswer:
    """What the gateway answers: `kind` names the handshake in the request log."""

    kind: str
    body: bytes
    content_type: str = _TEXT
    status: int = 200
    #: every answer echoes text from the caller: never sniffed as anything but its type
    headers: tuple[tuple[str, str], ...] = (("X-Content-Type-Options", "nosniff"),)
    #: a URL the gateway visits before answering (SNS's SubscribeURL confirms a subscription)
    follow: str | None = None


class HandshakeRefused(Refusal):
    """A handshake that fails its proof: a typed refusal (code and sentence, no HTTP status;
    `hookwise.server.ingress.refusals` chooses it)."""


def _challenge(value: object, what: str) -> bytes:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_CHALLENGE or not value.isprintable():
        raise HandshakeRefused(
            "invalid_handshake",
            f"the {what} must be 1 to {MAX_CHALLENGE} printable characters",
        )
    return value.encode("utf-8")


def _meta(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    q = request.query
    if method != "GET" or q.get("hub.mode") != "subscribe" or v.options.verify_token is None:
        return None
    presented = q.get("hub.verify_token", "").encode("utf-8", "surrogateescape")
    wanted = v.options.verify_token.encode("utf-8")
    same = hmac.compare_digest(hashlib.sha256(presented).digest(), hashlib.sha256(wanted).digest())
    if not same:
        raise HandshakeRefused(
            "invalid_verify_token",
            "hub.verify_token does not match the configured verifyToken",
        )
    return HandshakeAnswer("meta_subscribe", _challenge(q.get("hub.challenge"), "hub.challenge"))


def _dropbox(_: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    if method != "GET" or "challenge" not in request.query:
        return None
    body = _challenge(request.query["challenge"], "challenge")
    return HandshakeAnswer("dropbox_challenge", body)


def _msgraph(_: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    if method != "POST" or "validationToken" not in request.query:
        return None
    return HandshakeAnswer(
        "msgraph_validation", _challenge(request.query["validationToken"], "validationToken")
    )


def _body(method: str, request: InboundRequest) -> dict[str, object] | None:
    data = json_body(request) if method == "POST" else None
    return data if isinstance(data, dict) else None


def _monday(_: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    data = _body(method, request)
    if data is None or "challenge" not in data or "event" in data:
        return None
    value = _challenge(data["challenge"], "challenge").decode("utf-8")
    return HandshakeAnswer("monday_challenge", json.dumps({"challenge": value}).encode(), _JSON)


def _slack(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    data = _body(method, request)
    if data is None or data.get("type") != "url_verification":
        return None
    v.verify(request)
    return HandshakeAnswer("slack_url_verification", _challenge(data.get("challenge"), "challenge"))


def _zoom(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    data = _body(method, request)
    if data is None or data.get("event") != "endpoint.url_validation":
        return None
    v.verify(request)
    payload = data.get("payload")
    plain = payload.get("plainToken") if isinstance(payload, dict) else None
    token = _challenge(plain, "payload.plainToken").decode("utf-8")
    answer = {"plainToken": token, "encryptedToken": v.mac(token.encode("utf-8")).hex()}
    return HandshakeAnswer("zoom_url_validation", json.dumps(answer).encode(), _JSON)


def _twitch(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    kind = request.headers.get("twitch-eventsub-message-type", "").strip()
    if method != "POST" or kind != "webhook_callback_verification":
        return None
    v.verify(request)
    data = json_body(request)
    challenge = data.get("challenge") if isinstance(data, dict) else None
    return HandshakeAnswer("twitch_callback_verification", _challenge(challenge, "challenge"))


def _discord(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    data = _body(method, request)
    if data is None or data.get("type") != 1:
        return None
    v.verify(request)
    return HandshakeAnswer("discord_ping", b'{"type":1}', _JSON)


def _github(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    if method != "POST" or request.headers.get("x-github-event", "").strip() != "ping":
        return None
    v.verify(request)  # GitHub signs its ping like every delivery
    return HandshakeAnswer("github_ping", b'{"ok":true,"handshake":"github_ping"}', _JSON)


def _okta(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    challenge = request.headers.get("x-okta-verification-challenge")
    if method != "GET" or challenge is None:
        return None
    v.verify(request)  # Okta sends the hook's Authorization header on the check too
    value = _challenge(challenge.strip(), "x-okta-verification-challenge").decode("utf-8")
    return HandshakeAnswer("okta_verification", json.dumps({"verification": value}).encode(), _JSON)


def _sns(v: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    kind = request.headers.get("x-amz-sns-message-type", "").strip()
    if method != "POST" or kind not in ("SubscriptionConfirmation", "UnsubscribeConfirmation"):
        return None
    v.verify(request)  # the signature, the certificate's host and the topic
    data = json_body(request)
    assert isinstance(data, dict)
    if kind == "UnsubscribeConfirmation":
        return HandshakeAnswer("sns_unsubscribe_confirmation", b'{"ok":true}', _JSON)
    url = data.get("SubscribeURL")
    if not sns.allowed(v, url, pem=False):
        raise HandshakeRefused("invalid_handshake", "the SubscribeURL is not an SNS URL")
    assert isinstance(url, str)
    return HandshakeAnswer("sns_subscription_confirmation", b'{"ok":true}', _JSON, follow=url)


Handshake = Callable[[Verifier, str, InboundRequest], "HandshakeAnswer | None"]
HANDSHAKES: dict[str, Handshake] = {
    "meta": _meta,
    "dropbox": _dropbox,
    "msgraph": _msgraph,
    "monday": _monday,
    "slack": _slack,
    "zoom": _zoom,
    "twitch": _twitch,
    "discord": _discord,
    "sns": _sns,
    "okta": _okta,
    "github": _github,
}


def answer(verifier: Verifier, method: str, request: InboundRequest) -> HandshakeAnswer | None:
    """The handshake answer when `request` is the scheme's handshake, else None. Raises
    `SignatureError` when a signed handshake's signature fails, `HandshakeRefused` otherwise."""
    handshake = HANDSHAKES.get(verifier.scheme.handshake or "")
    return handshake(verifier, method, request) if handshake is not None else None


def answers_get(verifier: Verifier) -> bool:
    """Whether GET is a handshake on this block's path (otherwise GET stays 405)."""
    name = verifier.scheme.handshake
    return name in ("dropbox", "okta") or (
        name == "meta" and verifier.options.verify_token is not None
    )
