"""`sources`: pull sources, message brokers whose messages enter the hook rules as if POSTed.

Each entry names one broker block (`redis`, `nats`, `rabbitmq`, `sqs`) and the mapped hook path its
messages are routed to (`path: github` is as if POSTed to `{hooks.path}/github`). The broker
clients live in `hookwise.server.sources`; here is only data and the checks of one entry, made in
`__attrs_post_init__` so the loader reports them at `sources[i]` like any other problem.
"""

from __future__ import annotations

import re

import attrs

from .durations import Duration

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
KINDS = ("redis", "nats", "rabbitmq", "sqs")


@attrs.frozen
class RedisSourceConfig:
    """A Redis stream read by a consumer group (`XREADGROUP`; the group is created when missing).

    An entry's `bodyField` is the payload and its other fields are the headers (so a
    `content-type` field says how to parse it). Entries another consumer took and did not
    acknowledge for `claimIdle` are claimed back (`XAUTOCLAIM`)."""

    stream: str
    group: str = "hookwise"
    url: str = "redis://127.0.0.1:6379/0"
    body_field: str = "body"
    #: the consumer's name: `<host>-<pid>` when absent (each gateway process its own)
    consumer: str | None = None
    claim_idle: Duration = Duration(60)
    block: Duration = Duration(2)


@attrs.frozen
class NatsSourceConfig:
    """A durable pull consumer of a JetStream stream (created when missing); a message not
    acknowledged within `ackWait` is redelivered, to this gateway or another."""

    stream: str
    durable: str = "hookwise"
    url: str = "nats://127.0.0.1:4222"
    #: the subject filter of the consumer (all the stream's subjects when absent)
    subject: str | None = None
    ack_wait: Duration = Duration(30)
    fetch_wait: Duration = Duration(2)


@attrs.frozen
class RabbitMqSourceConfig:
    """An AMQP 0-9-1 queue consumed with manual acknowledgements and a prefetch of the source's
    `maxInFlight`. With `deadLetterExchange` the queue is declared with it, and a message the
    rules refuse is rejected there instead of being acknowledged."""

    queue: str
    url: str = "amqp://guest:guest@127.0.0.1:5672/"
    #: declare the queue (durable) when missing; off: it must exist
    declare: bool = True
    dead_letter_exchange: str | None = None


@attrs.frozen
class SnsEnvelopeConfig:
    """How SNS envelopes in an SQS queue are checked: the topics whose messages are accepted
    (`TopicArn`), and where the signing certificates are instead of SNS's own hosts."""

    topics: tuple[str, ...]
    keys_url: str | None = None


@attrs.frozen
class SqsSourceConfig:
    """An Amazon SQS queue read with long polling; a message is deleted after its commit, and its
    visibility timeout extended while its batch is being stored. A message that is an SNS
    envelope (`Type: Notification`) is unwrapped: its `Message` is the payload and its message
    attributes the headers; with `sns`, its signature and topic are checked first."""

    queue_url: str
    region: str = "us-east-1"
    #: another endpoint than AWS's (LocalStack, moto, an interface VPC endpoint)
    endpoint_url: str | None = None
    #: credentials; absent: the AWS SDK's chain (environment, profile, instance role)
    access_key_id: str | None = attrs.field(default=None, repr=False)
    secret_access_key: str | None = attrs.field(default=None, repr=False)
    wait_time: Duration = Duration(20)
    visibility_timeout: Duration = Duration(30)
    sns: SnsEnvelopeConfig | None = None


@attrs.frozen
class SourceConfig:
    """One pull source: a name, one broker block, and the mapped hook path it feeds."""

    name: str
    path: str
    redis: RedisSourceConfig | None = None
    nats: NatsSourceConfig | None = None
    rabbitmq: RabbitMqSourceConfig | None = None
    sqs: SqsSourceConfig | None = None
    enabled: bool = True
    #: messages handled at once (read per batch, held unacknowledged); pulling waits past it
    max_in_flight: int = 64
    #: pulling waits while the store holds more queued runs than this (the lanes are saturated:
    #: the runs of every source and of the HTTP door count); null: never waits
    max_queued_runs: int | None = 10000
    #: the wait before reconnecting grows from this ...
    reconnect_min_seconds: Duration = Duration(0.5)
    #: ... to this
    reconnect_max_seconds: Duration = Duration(30)

    def __attrs_post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def kind(self) -> str:
        """`redis`, `nats`, `rabbitmq` or `sqs`: the broker block given."""
        return next(k for k in KINDS if getattr(self, k) is not None)


def _problems(c: SourceConfig) -> list[str]:
    out: list[str] = []
    if not _NAME.match(c.name):
        out.append("name must be 1-64 letters, digits, '.', '_' or '-'")
    given = [k for k in KINDS if getattr(c, k) is not None]
    if len(given) != 1:
        out.append(f"give exactly one broker block of {', '.join(KINDS)}")
    if not c.path.strip("/") or "/" in c.path.strip("/"):
        out.append("path must name one hook: wake, agent or a mapped hook such as github")
    if c.max_in_flight < 1:
        out.append("maxInFlight must be at least 1")
    if c.max_queued_runs is not None and c.max_queued_runs < 1:
        out.append("maxQueuedRuns must be at least 1 (or null: never wait for the lanes)")
    if c.reconnect_min_seconds <= 0 or c.reconnect_max_seconds < c.reconnect_min_seconds:
        out.append("reconnectMinSeconds must be positive and at most reconnectMaxSeconds")
    if c.sqs is not None:
        if not 1 <= c.sqs.wait_time <= 20:
            out.append("sqs.waitTime must be between 1 and 20 seconds (SQS's long polling)")
        if not 1 <= c.sqs.visibility_timeout <= 43200:
            out.append("sqs.visibilityTimeout must be between 1 s and 12 h")
        if c.sqs.sns is not None and not c.sqs.sns.topics:
            out.append("sqs.sns.topics must name at least one topic ARN")
        if (c.sqs.access_key_id is None) != (c.sqs.secret_access_key is None):
            out.append("give sqs.accessKeyId and sqs.secretAccessKey together")
    return out
