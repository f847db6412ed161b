"""Amazon SQS: long polling, `DeleteMessage` after the commit, the visibility extended meanwhile.

`ReceiveMessage` long-polls for `waitTime` (at most 20 s) and takes up to 10 messages a call
(more calls, without waiting, up to `maxInFlight`). While a batch is being stored, a task
extends the visibility timeout of every message still held (`ChangeMessageVisibilityBatch`,
every third of `visibilityTimeout`), so a slow store never lets a message become visible to
another consumer mid-batch; a killed gateway stops extending, and its messages reappear after
`visibilityTimeout` for the others. A committed or refused message is deleted
(`DeleteMessageBatch`: SQS has no acknowledgement; a queue's redrive policy is its dead-letter
queue, for messages that keep coming back); one that could not be stored is made visible again
at once (visibility 0). Redelivered: `ApproximateReceiveCount` above 1.

A message body that is an SNS notification envelope (`Type: Notification`, what an SNS
subscription without raw delivery sends) is unwrapped: its `Message` is the payload, its message
attributes the headers (with `x-amz-sns-topic-arn` and `x-amz-sns-message-id`), and its SNS
`MessageId` the id for deduplication (the same in every queue the topic fans out to). The
envelope itself is checked before the rules (signature and topic) when the source has `sns`.
Otherwise the SQS message's own attributes are the headers and its `MessageId` the id.

boto3 is synchronous: each call runs on a worker thread (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from typing import Any

import attrs

from ...engine.config.sources import SqsSourceConfig
from .core import Pulled
from .enter import Message

log = logging.getLogger("hookwise.sources")

#: SQS's own limit on messages per receive and per batch call
SQS_BATCH = 10


@attrs.frozen
class _Held:
    receipt: str
    message_id: str


def _attributes(attrs_: dict[str, Any]) -> list[tuple[str, str]]:
    """SQS message attributes (`StringValue`) or SNS ones (`Value`) as headers."""
    out = []
    for name, value in (attrs_ or {}).items():
        if not isinstance(value, dict):
            continue
        text = value.get("StringValue", value.get("Value"))
        if isinstance(text, str):
            out.append((name.lower(), text))
    return out


def unwrap(body: bytes) -> tuple[bytes, list[tuple[str, str]], str] | None:
    """An SNS notification envelope's message, headers and SNS message id; None when `body` is
    not one."""
    if not body.startswith(b"{") or b'"TopicArn"' not in body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("Type") != "Notification":
        return None
    message, topic, sns_id = data.get("Message"), data.get("TopicArn"), data.get("MessageId")
    if not (isinstance(message, str) and isinstance(topic, str) and isinstance(sns_id, str)):
        return None
    headers = _attributes(data.get("MessageAttributes") or {})
    headers += [
        ("x-amz-sns-message-type", "Notification"),
        ("x-amz-sns-topic-arn", topic),
        ("x-amz-sns-message-id", sns_id),
    ]
    if message.lstrip().startswith(("{", "[")):
        headers.append(("content-type", "application/json"))
    return message.encode(), headers, f"sns:{sns_id}"


class SqsBroker:
    """One consumer of an SQS queue (any number of gateways may read it)."""

    def __init__(self, config: SqsSourceConfig) -> None:
        self.config = config
        self._client: Any = None
        self._held: dict[str, _Held] = {}
        self._extender: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        import boto3
        from botocore.config import Config

        c = self.config
        credentials = {}
        if c.access_key_id is not None:
            credentials = {
                "aws_access_key_id": c.access_key_id,
                "aws_secret_access_key": c.secret_access_key,
            }
        self._client = boto3.session.Session().client(
            "sqs",
            region_name=c.region,
            endpoint_url=c.endpoint_url,
            config=Config(
                connect_timeout=5,
                read_timeout=float(c.wait_time) + 10,
                retries={"max_attempts": 2},
            ),
            **credentials,
        )
        await self._call("get_queue_attributes", QueueUrl=c.queue_url, AttributeNames=["QueueArn"])
        self._held.clear()
        self._extender = asyncio.create_task(self._extend_forever(), name="hookwise-sqs-extend")

    async def _call(self, method: str, **params: Any) -> Any:
        return await asyncio.to_thread(getattr(self._client, method), **params)

    async def fetch(self, limit: int) -> Sequence[Pulled]:
        out: list[Pulled] = []
        wait = int(self.config.wait_time)
        while len(out) < limit:
            got = await self._call(
                "receive_message",
                QueueUrl=self.config.queue_url,
                MaxNumberOfMessages=min(SQS_BATCH, limit - len(out)),
                WaitTimeSeconds=wait,
                VisibilityTimeout=int(self.config.visibility_timeout),
                MessageAttributeNames=["All"],
                AttributeNames=["ApproximateReceiveCount"],
            )
            messages = got.get("Messages") or []
            for m in messages:
                out.append(self._pulled(m))
            if len(messages) < SQS_BATCH:
                break
            wait = 0  # more at once only when they are there
        return out

    def _pulled(self, m: dict[str, Any]) -> Pulled:
        body = str(m.get("Body") or "").encode()
        count = int((m.get("Attributes") or {}).get("ApproximateReceiveCount") or 1)
        unwrapped = unwrap(body)
        if unwrapped is not None:
            inner, headers, message_id = unwrapped
            message = Message(message_id, inner, tuple(headers), count > 1, envelope=body)
        else:
            headers = _attributes(m.get("MessageAttributes") or {})
            message = Message(f"sqs:{m['MessageId']}", body, tuple(headers), count > 1)
        held = _Held(m["ReceiptHandle"], m["MessageId"])
        self._held[held.receipt] = held
        return Pulled(message, held)

    async def _extend_forever(self) -> None:
        """Keep the held messages invisible to other consumers while they are being stored."""
        timeout = int(self.config.visibility_timeout)
        while True:
            await asyncio.sleep(max(1.0, timeout / 3))
            held = list(self._held.values())
            for i in range(0, len(held), SQS_BATCH):
                entries = [
                    {"Id": str(n), "ReceiptHandle": h.receipt, "VisibilityTimeout": timeout}
                    for n, h in enumerate(held[i : i + SQS_BATCH])
                ]
                try:
                    await self._call(
                        "change_message_visibility_batch",
                        QueueUrl=self.config.queue_url,
                        Entries=entries,
                    )
                except Exception as e:  # the next round tries again; the timeout is the net
                    log.warning("sqs %s: extending visibility failed: %s", self.config.queue_url, e)

    async def _delete(self, handles: Sequence[_Held]) -> None:
        for i in range(0, len(handles), SQS_BATCH):
            part = handles[i : i + SQS_BATCH]
            entries = [{"Id": str(n), "ReceiptHandle": h.receipt} for n, h in enumerate(part)]
            done = await self._call(
                "delete_message_batch", QueueUrl=self.config.queue_url, Entries=entries
            )
            for failed in done.get("Failed") or []:
                log.warning(
                    "sqs %s: a message was not deleted (%s): it may come back, and is then "
                    "recognised",
                    self.config.queue_url,
                    failed.get("Code"),
                )
            for h in part:
                self._held.pop(h.receipt, None)

    async def ack(self, handles: Sequence[Any]) -> None:
        await self._delete(handles)

    async def refuse(self, handles: Sequence[Any]) -> None:
        await self._delete(handles)

    async def release(self, handles: Sequence[Any]) -> None:
        for h in handles:
            self._held.pop(h.receipt, None)
            await self._call(
                "change_message_visibility",
                QueueUrl=self.config.queue_url,
                ReceiptHandle=h.receipt,
                VisibilityTimeout=0,
            )

    async def lag(self) -> int | None:
        got = await self._call(
            "get_queue_attributes",
            QueueUrl=self.config.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )
        a = got.get("Attributes") or {}
        return int(a.get("ApproximateNumberOfMessages", 0)) + int(
            a.get("ApproximateNumberOfMessagesNotVisible", 0)
        )

    async def close(self) -> None:
        if self._extender is not None:
            task, self._extender = self._extender, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._held.clear()
        if self._client is not None:
            client, self._client = self._client, None
            client.close()
