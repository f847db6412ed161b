"""The `gitlab` channel against the GitLab fake (built from GitLab's notes API documentation):
notes on issues (`group/project#iid`) and merge requests (`group/project!iid`), the project's
path URL-encoded as one segment, `PRIVATE-TOKEN`, and GitLab's rate limit headers."""

from __future__ import annotations

import time

import pytest

from hookwise.server.channels import DeliveryError, load_channels
from tests.fakes.fake_http import Reply


def gitlab(server):
    return load_channels({"gitlab": server.config()})["gitlab"]


@pytest.mark.parametrize(
    ("to", "raw_path"),
    [
        ("acme/gateway#42", "/api/v4/projects/acme%2Fgateway/issues/42/notes"),
        ("acme/infra/gateway!7", "/api/v4/projects/acme%2Finfra%2Fgateway/merge_requests/7/notes"),
    ],
)
def test_a_note_goes_to_the_issue_or_merge_request(channel_server, deliver, to, raw_path) -> None:
    server = channel_server("gitlab")
    result = deliver(gitlab(server), to, "Looks good; one question.")
    [req] = server.sends
    assert req.raw_path == raw_path
    assert req.headers["private-token"] == server.token
    assert req.json == {"body": "Looks good; one question."}
    [(_, answer)] = server.answers
    assert answer.status == 201
    assert answer.body["noteable_type"] == ("Issue" if "#" in to else "MergeRequest")
    assert result.message_ids == (str(answer.body["id"]),)


def test_a_429_without_retry_after_waits_for_ratelimit_reset(channel_server, deliver) -> None:
    server = channel_server("gitlab")
    server.script(Reply(429, "Retry later", {"RateLimit-Reset": str(int(time.time() + 20))}))
    with pytest.raises(DeliveryError) as caught:
        deliver(gitlab(server), "acme/gateway#1", "hi")
    assert caught.value.retryable is True and caught.value.status == 429
    assert caught.value.retry_after is not None and 17 <= caught.value.retry_after <= 21
    assert caught.value.message == "gitlab answered 429: Retry later"


@pytest.mark.parametrize("to", ["acme#1", "acme/gateway#0", "acme/gateway", "/acme/x#1", "a//b!2"])
def test_a_malformed_reference_is_refused(channel_server, to) -> None:
    channel = gitlab(channel_server("gitlab"))
    assert "group/project#iid" in (channel.validate_recipient(to) or "")
