"""POST {hook_path}/wake: validation, the 200 answer, and the event in the store."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from tests.support.gateway import GatewayProcess


def _events(gw: GatewayProcess) -> list[dict]:
    return gw.admin("/api/events", session="main", limit=500)["items"]


def test_wake_enqueues_an_event_and_answers_200(gateway: GatewayProcess) -> None:
    r = gateway.hook("wake", {"text": "  disk almost full  ", "mode": "next-heartbeat"})
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is True and body["mode"] == "next-heartbeat"
    stored = [e for e in _events(gateway) if e["eventId"] == body["eventId"]]
    assert stored == [
        {
            "eventId": body["eventId"],
            "session": "main",
            "text": "disk almost full",
            "source": "hook",
            "mode": "next-heartbeat",
            "trusted": False,
            "createdAt": stored[0]["createdAt"],
            "consumedAt": None,
        }
    ]


def test_wake_mode_defaults_to_now(gateway: GatewayProcess) -> None:
    r = gateway.hook("wake", {"text": "ping"})
    assert r.status_code == 200 and r.json()["mode"] == "now"


@pytest.mark.parametrize(
    ("payload", "code", "field"),
    [
        ({}, "missing_field", "text"),
        ({"text": ""}, "missing_field", "text"),
        ({"text": "   "}, "missing_field", "text"),
        ({"text": 42}, "invalid_field", "text"),
        ({"text": None}, "missing_field", "text"),
        ({"text": "x", "mode": "later"}, "invalid_field", "mode"),
        ({"text": "x", "mode": 1}, "invalid_field", "mode"),
        ({"text": "x", "mdoe": "now"}, "unknown_field", "mdoe"),
    ],
)
def test_invalid_wake_is_refused_with_the_field_named(
    gateway: GatewayProcess, payload: dict, code: str, field: str
) -> None:
    before = len(_events(gateway))
    r = gateway.hook("wake", payload)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["ok"] is False and body["code"] == code and body["field"] == field
    assert isinstance(body["error"], str) and body["error"]
    assert len(_events(gateway)) == before


def test_unknown_field_suggests_the_close_one(gateway: GatewayProcess) -> None:
    r = gateway.hook("wake", {"text": "x", "mdoe": "now"})
    assert "did you mean 'mode'" in r.json()["error"]


@pytest.mark.parametrize(
    ("content", "ctype", "code"),
    [
        (b"{not json", "application/json", "invalid_json"),
        (b"[1, 2]", "application/json", "invalid_body"),
        (b'"text"', "application/json", "invalid_body"),
        (b"\xff\xfe", "application/json", "invalid_json"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_400(
    gateway: GatewayProcess, content: bytes, ctype: str, code: str
) -> None:
    r = gateway.hook("wake", content=content, headers={"Content-Type": ctype})
    assert r.status_code == 400
    assert r.json() == {"ok": False, "error": r.json()["error"], "code": code}


def test_an_empty_body_is_an_empty_object(gateway: GatewayProcess) -> None:
    r = gateway.hook("wake", content=b"", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "text"


def test_a_form_body_is_parsed_as_a_form(gateway: GatewayProcess) -> None:
    r = gateway.hook(
        "wake",
        content=b"text=from+a+form&mode=next-heartbeat",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 200 and r.json()["mode"] == "next-heartbeat"
    texts = [e["text"] for e in _events(gateway) if e["eventId"] == r.json()["eventId"]]
    assert texts == ["from a form"]


def test_plain_words_sent_as_a_form_are_refused_as_not_json(gateway: GatewayProcess) -> None:
    # what `curl -d 'hello world'` sends: neither a form (no key=value) nor JSON
    r = gateway.hook(
        "wake",
        content=b"hello world",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 400
    assert r.json() == {"ok": False, "error": "the body is not valid JSON", "code": "invalid_json"}


def test_a_forms_payload_field_is_held_to_the_nesting_limit(gateway: GatewayProcess) -> None:
    for depth, status in ((64, 200), (65, 400), (10_000, 400)):
        inner = "[" * (depth - 1) + "]" * (depth - 1)
        body = urlencode({"payload": '{"text": "deep", "x": ' + inner + "}"}).encode()
        r = gateway.hook(
            "wake",
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        if status == 200:  # 64 levels (the object and 63 arrays): parsed, and /wake then
            assert r.json()["code"] == "unknown_field", r.text  # refuses the field, not the depth
        else:
            assert r.status_code == 400
            assert r.json() == {
                "ok": False,
                "error": "the JSON nests deeper than 64 levels",
                "code": "invalid_json",
            }


@pytest.mark.parametrize("form", [False, True])
def test_an_integer_past_4300_digits_is_refused_in_words(
    gateway: GatewayProcess, form: bool
) -> None:
    ok = '{"text": "n", "n": ' + "9" * 4300 + "}"
    huge = '{"text": "n", "n": ' + "9" * 4301 + "}"
    ctype = "application/x-www-form-urlencoded" if form else "application/json"

    def send(doc: str) -> Any:
        body = urlencode({"payload": doc}).encode() if form else doc.encode()
        return gateway.hook("wake", content=body, headers={"Content-Type": ctype})

    assert send(ok).json()["code"] == "unknown_field"  # parsed: only the field is refused
    r = send(huge)
    assert r.status_code == 400
    assert r.json() == {
        "ok": False,
        "error": "the JSON holds an integer longer than 4300 digits: send it as a string",
        "code": "invalid_json",
    }


def test_json_sent_with_a_form_content_type_is_still_json(gateway: GatewayProcess) -> None:
    r = gateway.hook(
        "wake",
        content=b'{"text": "curl -d sends this"}',
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 200
