"""The shape of one mapping rule as written in configuration or a rule file (data, not compiled).

Field names follow OpenClaw's mappings so that an OpenClaw mapping loads unchanged, plus hookwise's
own `match.when`, `extract`, `respond`, `forEach` and `verify`. Compilation (templates, JSONPaths,
conditions, transforms, signature verifiers) happens in `hookwise.engine.rules.ruleset`.

Structuring follows `hookwise.engine.config.convert`: snake_case attrs fields, camelCase keys, strict types,
unknown keys refused. One shorthand: an `extract` entry may be a bare JSONPath string
(`subject: $.messages[0].subject`) or a mapping (`{path: $.labels[*].name, all: true}`).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .budgets import BudgetConfig
from .convert import converter
from .durations import Duration
from .grants import Entry
from .limits import RateLimitConfig, RouteLimitsConfig, positive


@attrs.frozen
class MatchConfig:
    """Which requests a rule applies to: sub-path, payload `source`, and extra conditions."""

    path: str | None = None
    source: str | None = None
    # Conditions tree (all/any/not, jsonpath/header/query with equals/in/regex/exists); compiled
    # and validated by engine.rules.conditions, which reports errors with their key path.
    when: Any = None


@attrs.frozen
class TransformConfig:
    """A transform module inside `hooks.transformsDir` and the export to call."""

    module: str
    export: str | None = None
    timeout_ms: int | None = None
    memory_mb: int | None = None


@attrs.frozen
class RespondConfig:
    """A fixed answer for the caller, for providers that expect a particular response.

    String values inside `body` are templates, rendered with the request's variables.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = attrs.field(factory=dict)
    #: hold the request open until the run finishes (at most this long, and at most
    #: `hooks.maxWait`), answering with its outcome instead of a fixed answer
    wait: Duration | None = None


@attrs.frozen
class ExtractConfig:
    """One named value pulled from the payload: the first match, or every match with `all`."""

    path: str
    all: bool = False


SchemeName = Literal[
    "adyen",
    "airtable",
    "asana",
    "atlassian-connect",
    "auth0",
    "bitbucket",
    "box",
    "braintree",
    "brevo",
    "buildkite",
    "calcom",
    "calendly",
    "circleci",
    "clerk",
    "clickup",
    "close",
    "cloudflare",
    "coinbase",
    "customerio",
    "discord",
    "docusign",
    "dropbox",
    "figma",
    "flutterwave",
    "forgejo",
    "frameio",
    "gitea",
    "github",
    "gitlab",
    "gocardless",
    "gogs",
    "google-pubsub",
    "helpscout",
    "heroku",
    "hmac",
    "hmac-sha256",
    "hubspot",
    "instagram",
    "intercom",
    "intuit",
    "jira",
    "launchdarkly",
    "lemonsqueezy",
    "line",
    "linear",
    "mailersend",
    "mailgun",
    "mandrill",
    "messenger",
    "meta",
    "mollie",
    "monday",
    "msgraph",
    "mux",
    "netlify",
    "notion",
    "nylas",
    "okta",
    "paddle",
    "pagerduty",
    "paypal",
    "paystack",
    "persona",
    "plaid",
    "razorpay",
    "resend",
    "sanity",
    "segment",
    "sendgrid",
    "sentry",
    "shopify",
    "shortcut",
    "slack",
    "sns",
    "sonarqube",
    "square",
    "squarespace",
    "standard-webhooks",
    "stripe",
    "svix",
    "tally",
    "telegram",
    "terraform",
    "trello",
    "twilio",
    "twitch",
    "typeform",
    "vercel",
    "viber",
    "webex",
    "webflow",
    "whatsapp",
    "woocommerce",
    "workos",
    "xero",
    "zendesk",
    "zoom",
]


@attrs.frozen
class VerifyConfig:
    """How a provider proves its deliveries (see `hookwise.engine.signatures`), checked on the
    raw body before anything else runs.

    Keys: `secret`, `secretFile` (relative to the folder of the file holding it) or `secrets`
    (several while one is rotated; any may match); `publicKey` for the Ed25519 and ECDSA schemes
    (Discord, SendGrid, asymmetric Standard Webhooks); `verifyToken` for Meta's GET handshake;
    `publicUrl` for schemes that sign the URL (Twilio, Square) when a proxy changes it. `auth:
    signature` lets a valid signature stand in for the hook token. The generic `hmac` scheme
    takes `header`, `algorithm` (sha1, sha256, sha512), `encoding` (hex, base64), `prefix`,
    `signed` (a template such as `{timestamp}.{body}`) and `timestampHeader`; `tolerance`
    applies to the schemes that sign a timestamp.
    """

    scheme: SchemeName
    secret: str | None = attrs.field(default=None, repr=False)  # never in a repr or log line
    secret_file: str | None = None
    secrets: tuple[str, ...] | None = attrs.field(default=None, repr=False)
    public_key: str | None = None
    verify_token: str | None = attrs.field(default=None, repr=False)
    public_url: str | None = None
    auth: Literal["token", "signature"] = "token"
    header: str | None = None
    prefix: str | None = None
    encoding: Literal["hex", "base64"] | None = None
    algorithm: Literal["sha1", "sha256", "sha512"] | None = None
    signed: str | None = None
    timestamp_header: str | None = None
    tolerance: Duration | None = None
    # schemes that check a provider's published keys (google-pubsub): the token's audience
    # (monday: the `aud` its JWT must carry, when given), the service account it must name,
    # and where the keys are instead of the provider's URL
    audience: str | None = None
    service_account: str | None = None
    keys_url: str | None = None
    # sns: the TopicArn of each topic whose messages are accepted
    topics: tuple[str, ...] | None = None
    # paypal: the webhook id PayPal gave the subscription (part of what it signs)
    webhook_id: str | None = None
    # plaid: the API client id its key endpoint is asked with (beside `secret`, the API secret)
    client_id: str | None = None


@attrs.frozen
class DedupeConfig:
    """Where a delivery's id is, when it is not the provider's: a header or a JSONPath."""

    header: str | None = None
    jsonpath: str | None = None


#: the most payloads a `keep: all` digest holds, and its most characters: past either, the
#: oldest payloads leave it (the digest says how many were left out)
COALESCE_DIGEST_MAX_ITEMS = 50
COALESCE_DIGEST_MAX_CHARS = 64_000


@attrs.frozen
class CoalesceConfig:
    """Requests of a mapping with the same rendered `key` within `window` of each other become
    one run, started when the window closes, at the latest `max_wait` after the first
    (`hookwise.server.store.coalesce`). `keep`: the newest message, or a bounded digest of all."""

    key: str
    window: Duration = attrs.field(default=Duration(30), validator=positive)
    max_wait: Duration = attrs.field(default=Duration(300), validator=positive)
    keep: Literal["latest", "all"] = "latest"


@attrs.frozen
class CallbackConfig:
    """`callback`: POST the run's outcome, signed as Standard Webhooks, when the run ends.

    `url` from the configuration, or `urlFrom` (a JSONPath into the payload) when the URL is
    under one of the `allow` prefixes (see `hookwise.engine.callbacks`); `allowHosts` names the
    hosts that may resolve to loopback or private addresses. `secret` is `whsec_` + base64.
    """

    secret: str = attrs.field(repr=False)
    url: str | None = None
    url_from: str | None = None
    allow: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()


@attrs.frozen
class MappingConfig:
    """One mapping rule: match, action, templates, optional transform, delivery options."""

    id: str | None = None
    match: MatchConfig = attrs.field(factory=MatchConfig)
    action: Literal["wake", "agent", "notify"] = "agent"
    wake_mode: Literal["now", "next-heartbeat"] = "now"
    name: str | None = None
    # the agent that runs it (unknown: the default agent, with a warning at load)
    agent_id: str | None = None
    session_key: str | None = None
    # `persistent`: the static `sessionKey` every time; `per-request`: a fresh key each request
    session_mode: Literal["persistent", "per-request"] | None = None
    message_template: str | None = None
    text_template: str | None = None
    deliver: bool | None = None
    channel: str | None = None
    to: str | None = None
    fallback_channel: str | None = None
    model: str | None = None
    # the models tried in turn when `model` (or the agent's model) is unavailable
    fallbacks: tuple[str, ...] = ()
    thinking: str | None = None
    timeout_seconds: float | None = None
    transform: TransformConfig | None = None
    allow_unsafe_external_content: bool = False
    extract: dict[str, str | ExtractConfig] = attrs.field(factory=dict)
    respond: RespondConfig | None = None
    # Fan-out: a JSONPath selecting a list; one action is produced per item; a batch of more
    # than `for_each_max` items is refused whole (the peer caps at 200).
    for_each: str | None = None
    for_each_max: int = 200
    # The provider's signature of the raw body, checked before templates and transforms.
    verify: VerifyConfig | None = None
    # Deduplication of provider retries: off, provider (the scheme's delivery id, the
    # default), or {header: ...} / {jsonpath: ...}.
    dedupe: Literal["off", "provider"] | DedupeConfig | None = None
    # The MCP tools its runs may use (`server.tool`, `server.*`); none when unset, never the
    # agent's (see hookwise.engine.config.grants).
    tools: tuple[Entry, ...] = ()
    # Globs (`server.tool` patterns) of granted tools whose calls wait for a person's approval.
    approve: tuple[str, ...] = ()
    # Per-route limits (`hookwise.engine.config.limits`): shared by every rule on the rule's path.
    rate_limit: RateLimitConfig | None = None
    max_in_flight: int | None = attrs.field(default=None, validator=positive)
    # Held from the start (a deploy): requests are answered and stored, their runs and wakes
    # held until `hookwise resume mapping <id>` (see hookwise.server.store.lanes).
    paused: bool = False
    # Runs of this mapping executing at once per gateway process (besides the agent's own
    # `maxConcurrentRuns`), so that one noisy source cannot take every slot of its agent.
    max_concurrent_runs: int | None = attrs.field(default=None, validator=positive)
    # Bursts about one entity become one run (`CoalesceConfig`).
    coalesce: CoalesceConfig | None = None
    # What its runs may spend per window; past it, its runs are held (`reason: budget`) until
    # the window allows (see hookwise.engine.config.budgets, hookwise.server.runtime.budgets).
    budget: BudgetConfig | None = None

    # What the rule's path answers a request no rule matched (`hookwise.engine.rules.unmatched`):
    # shared by every rule on the path; unsaid, `acknowledge` behind a signature block.
    unmatched: Literal["acknowledge", "reject"] | None = None

    # Where the run's outcome is posted when it ends (signed), beside any channel delivery.
    callback: CallbackConfig | None = None

    @property
    def limits(self) -> RouteLimitsConfig:
        return RouteLimitsConfig(self.rate_limit, self.max_in_flight)


_structure_extract_mapping = converter.get_structure_hook(ExtractConfig)


def _structure_extract(value: object, _: object) -> str | ExtractConfig:
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise ValueError("must be a JSONPath string or a mapping with `path` (and `all`)")
    return _structure_extract_mapping(value, ExtractConfig)


converter.register_structure_hook_func(lambda tp: tp == (str | ExtractConfig), _structure_extract)

_structure_dedupe_mapping = converter.get_structure_hook(DedupeConfig)
_DEDUPE = Literal["off", "provider"] | DedupeConfig | None


def _structure_dedupe(value: object, _: object) -> str | DedupeConfig | None:
    if value is None or value in ("off", "provider"):
        return value
    if not isinstance(value, dict):
        raise ValueError("must be off, provider, {header: NAME} or {jsonpath: $.PATH}")
    return _structure_dedupe_mapping(value, DedupeConfig)


converter.register_structure_hook_func(lambda tp: tp == _DEDUPE, _structure_dedupe)
