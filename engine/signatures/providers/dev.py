"""Forges, CI, hosting and monitoring: GitHub-like HMACs over the body, most in hex."""

from __future__ import annotations

from ..core import DEFAULT_TOLERANCE, Scheme, SignatureFormat

_HUB_SHA256 = SignatureFormat("X-Hub-Signature", prefix="sha256=")

DEV = [
    Scheme(
        "bitbucket",
        _HUB_SHA256,
        delivery_id="X-Request-UUID",
        doc="X-Hub-Signature: sha256=<hex HMAC-SHA256(secret, body)> (Bitbucket Cloud)",
    ),
    Scheme(
        "jira",
        _HUB_SHA256,
        delivery_id="X-Atlassian-Webhook-Identifier",
        doc="X-Hub-Signature: sha256=<hex HMAC-SHA256(secret, body)> (Jira Cloud admin webhooks)",
    ),
    Scheme(
        "gitea",
        SignatureFormat("X-Gitea-Signature"),
        delivery_id="X-Gitea-Delivery",
        doc="X-Gitea-Signature: <hex HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "forgejo",
        SignatureFormat("X-Forgejo-Signature"),
        delivery_id="X-Forgejo-Delivery",
        doc="X-Forgejo-Signature: <hex HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "gogs",
        SignatureFormat("X-Gogs-Signature"),
        delivery_id="X-Gogs-Delivery",
        doc="X-Gogs-Signature: <hex HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "circleci",
        SignatureFormat("circleci-signature", separator=","),
        delivery_id="$.id",
        doc="circleci-signature: v1=<hex HMAC-SHA256(secret, body)>[,v1=...]",
    ),
    Scheme(
        "vercel",
        SignatureFormat("x-vercel-signature"),
        algorithm="sha1",
        delivery_id="$.id",
        doc="x-vercel-signature: <hex HMAC-SHA1(secret, body)>",
    ),
    Scheme(
        "cloudflare",
        SignatureFormat("cf-webhook-auth"),
        algorithm="token",
        encoding="raw",
        doc="cf-webhook-auth: <the secret> (Cloudflare notifications)",
    ),
    Scheme(
        "heroku",
        SignatureFormat("Heroku-Webhook-Hmac-SHA256"),
        encoding="base64",
        delivery_id="Heroku-Webhook-Id",
        doc="Heroku-Webhook-Hmac-SHA256: <base64 HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "launchdarkly",
        SignatureFormat("X-LD-Signature"),
        doc="X-LD-Signature: <hex HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "terraform",
        SignatureFormat("X-TFE-Notification-Signature"),
        algorithm="sha512",
        doc="X-TFE-Notification-Signature: <hex HMAC-SHA512(token, body)> (HCP Terraform)",
    ),
    Scheme(
        "sonarqube",
        SignatureFormat("X-Sonar-Webhook-HMAC-SHA256"),
        doc="X-Sonar-Webhook-HMAC-SHA256: <hex HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "buildkite",
        SignatureFormat(
            "X-Buildkite-Signature", separator=",", label="signature", timestamp_label="timestamp"
        ),
        signed="{timestamp}.{body}",
        timestamp="label",
        tolerance=DEFAULT_TOLERANCE,
        delivery_id="$.event_id",
        doc="X-Buildkite-Signature: timestamp=<unix>,signature=<hex HMAC-SHA256(t.body)>",
    ),
    Scheme(
        "frameio",
        SignatureFormat("X-Frameio-Signature", prefix="v0="),
        signed="v0:{timestamp}:{body}",
        timestamp="header:X-Frameio-Request-Timestamp",
        tolerance=DEFAULT_TOLERANCE,
        doc="X-Frameio-Signature: v0=<hex HMAC-SHA256(secret, v0:timestamp:body)>",
    ),
    Scheme(
        "sanity",
        SignatureFormat("sanity-webhook-signature", separator=",", timestamp_label="t"),
        signed="{timestamp}.{body}",
        encoding="base64url",
        timestamp="label",
        timestamp_unit="ms",
        tolerance=DEFAULT_TOLERANCE,
        delivery_id="idempotency-key",
        doc="sanity-webhook-signature: t=<ms>,v1=<base64url HMAC-SHA256(secret, t.body)>",
    ),
]
