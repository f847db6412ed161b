"""Kept payloads and replay through a running gateway, on both stores: what is kept (never a
token), replaying through today's rules after a rule fix, the dry run, deleting and pruning."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SECRET = "payload-marker-replay-7c1d"


def rule(path: str, template: str) -> dict[str, Any]:
    return {
        "id": f"rule-{path}",
        "match": {"path": path},
        "messageTemplate": template,
        "deliver": False,
        "wakeMode": "next-heartbeat",
    }


def admin(gw: GatewayProcess, method: str, path: str, **params: Any) -> httpx.Response:
    return httpx.request(method, gw.url + path, params=params, headers=AUTH, timeout=10)


def logged(gw: GatewayProcess, path: str) -> dict[str, Any]:
    items = gw.admin("/api/requests")["items"]
    return next((i for i in items if i["path"] == path), None)  # type: ignore[return-value]


def start(start_gateway: Callable[..., GatewayProcess], keep: str = "7d", **hooks: Any):
    return start_gateway(base_config(retainPayloads={"for": keep}, **hooks))


def test_a_refused_request_is_replayed_after_the_rule_is_fixed(start_gateway) -> None:
    gw = start(start_gateway, mappings=[rule("deploys", "Deploy {{ service }}")])
    r = gw.hook(
        "builds?token=" + HOOK_TOKEN,
        {"service": "api", "note": SECRET},
        token=None,
        headers={"X-Trace": "t-1"},
    )
    assert r.status_code == 404  # no rule for "builds" yet
    entry = eventually(lambda: logged(gw, "/hooks/builds"))
    request_id = entry["requestId"]
    # today's rules still refuse it: a dry run says so, and changes nothing
    refused = admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true")
    assert refused.status_code == 422 and refused.json()["code"] == "replay_refused"
    assert "no hook or mapping matches" in refused.json()["error"]
    # the fix: a rule for "builds", swapped in on SIGHUP
    gw.config["hooks"]["mappings"].append(rule("builds", "Build of {{ service }}"))
    gw.write_config()
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    eventually(lambda: "reload: rules swapped in" in gw.stderr())
    preview = admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true")
    assert preview.status_code == 200, preview.text
    body = preview.json()
    assert body["dryRun"] is True and body["rule"] == "rule-builds" and not body["skipped"]
    [action] = body["actions"]
    assert action["kind"] == "agent" and action["fields"]["message"] == "Build of api"
    assert gw.admin("/api/runs", rule="rule-builds")["items"] == []  # nothing stored
    done = admin(gw, "POST", f"/api/requests/{request_id}/replay")
    assert done.status_code == 200, done.text
    replay = done.json()
    assert replay["replayOf"] == request_id and replay["status"] == 202
    [run_id] = replay["runIds"]
    run = gw.admin(f"/api/runs/{run_id}")["run"]
    assert run["rule"] == "rule-builds" and run["requestId"] == replay["requestId"]
    line = gw.admin(f"/api/requests/{replay['requestId']}")["request"]
    assert line["client"] == "replay" and line["runIds"] == [run_id]
    assert line["path"] == "/hooks/builds"


def test_the_kept_request_has_no_token_and_stays_out_of_the_log(start_gateway) -> None:
    gw = start(start_gateway, mappings=[rule("echo", "{{ headers['x-trace'] }} {{ query.q }}")])
    r = gw.hook(
        "echo?q=1&token=" + HOOK_TOKEN, {"note": SECRET}, token=None, headers={"X-Trace": "t-2"}
    )
    assert r.status_code == 202
    request_id = gw.admin(f"/api/runs/{r.json()['runId']}")["run"]["requestId"]
    preview = admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true").json()
    # headers and query were kept (the rule sees them again), the token was not
    assert preview["actions"][0]["fields"]["message"] == "t-2 1"
    r = gw.hook("echo", {"note": SECRET}, headers={"X-Trace": "t-3"})  # Bearer header
    request_id = gw.admin(f"/api/runs/{r.json()['runId']}")["run"]["requestId"]
    assert admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true").status_code == 200
    db_text = _store_text(gw)
    if db_text is not None:
        assert HOOK_TOKEN not in db_text and SECRET in db_text  # the body is kept, not the token
    assert SECRET not in repr(gw.admin("/api/requests")) and SECRET not in gw.stderr()


def _store_text(gw: GatewayProcess) -> str | None:
    """The SQLite store's bytes (WAL included), to search; None on PostgreSQL."""
    db = gw.state_dir / "hookwise.db"
    if not db.exists():
        return None
    parts = [db.read_bytes()] + [p.read_bytes() for p in gw.state_dir.glob("hookwise.db-wal")]
    return b"".join(parts).decode("latin-1")


def test_a_payload_can_be_deleted_and_then_cannot_be_replayed(start_gateway) -> None:
    gw = start(start_gateway)
    r = gw.hook("wake", {"text": "x", "mode": "next-heartbeat"})
    request_id = eventually(lambda: logged(gw, "/hooks/wake"))["requestId"]
    assert r.status_code == 200
    gone = admin(gw, "DELETE", f"/api/requests/{request_id}/payload")
    assert gone.status_code == 200 and gone.json() == {"ok": True, "requestId": request_id}
    again = admin(gw, "DELETE", f"/api/requests/{request_id}/payload")
    assert again.status_code == 404 and again.json()["code"] == "payload_not_found"
    r = admin(gw, "POST", f"/api/requests/{request_id}/replay")
    assert r.status_code == 404 and r.json()["code"] == "payload_not_found"


def test_a_wake_replay_creates_a_new_event(start_gateway) -> None:
    gw = start(start_gateway)
    first = gw.hook("wake", {"text": "again", "mode": "next-heartbeat"}).json()["eventId"]
    request_id = eventually(lambda: logged(gw, "/hooks/wake"))["requestId"]
    replay = admin(gw, "POST", f"/api/requests/{request_id}/replay").json()
    assert replay["status"] == 200 and len(replay["eventIds"]) == 1
    assert replay["eventIds"] != [first]
    texts = [e["text"] for e in gw.admin("/api/events", session="main")["items"]]
    assert texts.count("again") == 2


def test_payloads_are_pruned_after_for(start_gateway) -> None:
    gw = start(start_gateway, keep="1s")
    gw.hook("wake", {"text": "short-lived", "mode": "next-heartbeat"})
    request_id = eventually(lambda: logged(gw, "/hooks/wake"))["requestId"]
    time.sleep(0.2)

    def pruned() -> bool:
        r = admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true")
        return r.status_code == 404

    eventually(pruned, timeout=10, what="the payload to be pruned")


def test_mapped_payloads_are_kept_by_default_and_enabled_false_keeps_none(start_gateway) -> None:
    # no retainPayloads: a mapped hook's payload is kept, so the first replay works; /wake's is
    # not (no rule to fix there, and it is the hot path)
    gw = start_gateway(base_config(mappings=[rule("builds", "Build of {{ service }}")]))
    gw.hook("builds", {"service": "kept"})
    gw.hook("wake", {"text": "not kept", "mode": "next-heartbeat"})
    mapped = eventually(lambda: logged(gw, "/hooks/builds"))["requestId"]
    wake = eventually(lambda: logged(gw, "/hooks/wake"))["requestId"]
    r = eventually(
        lambda: (
            (a := admin(gw, "POST", f"/api/requests/{mapped}/replay", dryRun="true")).status_code
            == 200
            and a
        ),
        what="the mapped payload kept by default",
    )
    assert r.json()["actions"][0]["fields"]["message"] == "Build of kept"
    r = admin(gw, "POST", f"/api/requests/{wake}/replay", dryRun="true")
    assert r.status_code == 404 and r.json()["code"] == "payload_not_found"
    gw = start_gateway(
        base_config(retainPayloads={"enabled": False}, mappings=[rule("builds", "B")]), name="off"
    )
    gw.hook("builds", {"service": "not kept"})
    request_id = eventually(lambda: logged(gw, "/hooks/builds"))["requestId"]
    time.sleep(0.3)  # past the next group commit
    r = admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true")
    assert r.status_code == 404 and r.json()["code"] == "payload_not_found"


def test_a_body_over_max_bytes_is_not_kept(start_gateway) -> None:
    gw = start_gateway(base_config(retainPayloads={"maxBytes": 100}))
    gw.hook("wake", {"text": "small", "mode": "next-heartbeat"})
    gw.hook("wake", {"text": "large " + "x" * 200, "mode": "next-heartbeat"})
    items = eventually(lambda: len(i := gw.admin("/api/requests")["items"]) == 2 and i)
    large, small = items  # newest first
    time.sleep(0.3)  # past the next group commit
    r = admin(gw, "POST", f"/api/requests/{large['requestId']}/replay", dryRun="true")
    assert r.status_code == 404 and r.json()["code"] == "payload_not_found"
    r = admin(gw, "POST", f"/api/requests/{small['requestId']}/replay", dryRun="true")
    assert r.status_code == 200, r.text


def test_the_cli_replays_a_kept_request(start_gateway) -> None:
    from tests.http.test_admin_cli import hookwise

    gw = start(start_gateway)
    gw.hook("wake", {"text": "from the cli", "mode": "next-heartbeat"})
    request_id = eventually(lambda: logged(gw, "/hooks/wake"))["requestId"]
    done = hookwise("requests", "replay", request_id, "--dry-run", "--url", gw.url)
    assert done.returncode == 0, done.stderr
    assert 'wake: {"text": "from the cli", "mode": "next-heartbeat"' in done.stdout
    done = hookwise("requests", "replay", request_id, "--url", gw.url, "--json")
    answer = json.loads(done.stdout)
    assert answer["replayOf"] == request_id and len(answer["eventIds"]) == 1
    done = hookwise("requests", "replay", "nope", "--url", gw.url)
    assert done.returncode == 1 and "(payload_not_found)" in done.stderr


def test_a_kept_array_body_replays_through_a_fan_out_rule(start_gateway) -> None:
    """A mapped hook takes a top-level JSON array (SendGrid's event webhook): kept as it came, it
    replays as an array too."""
    fan_out = {**rule("events", "{{ item.event }} for {{ item.email }}"), "forEach": "$"}
    gw = start(start_gateway, mappings=[fan_out])
    events = [{"email": "a@example.com", "event": "delivered"}, {"email": "b@x", "event": SECRET}]
    r = gw.hook(
        "events", content=json.dumps(events).encode(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 202, r.text
    request_id = eventually(lambda: logged(gw, "/hooks/events"))["requestId"]
    preview = admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true")
    assert preview.status_code == 200, preview.text
    messages = [a["fields"]["message"] for a in preview.json()["actions"]]
    assert messages == ["delivered for a@example.com", f"{SECRET} for b@x"]


def test_a_request_authenticated_by_its_signature_is_kept_and_replays(start_gateway) -> None:
    """`auth: signature` paths (no hook token) keep a request once its signature checked out,
    never one whose signature did not; the replay does not check the signature again (its
    timestamp has long expired by the time an operator replays it)."""
    import stripe

    secret = "whsec_replay-kept-signature-0123456789"
    gw = start(
        start_gateway,
        verify={"stripe": {"scheme": "stripe", "secret": secret, "auth": "signature"}},
        mappings=[rule("stripe", "Stripe {{ type }}")],
    )
    body = json.dumps({"id": "evt_1", "type": "invoice.paid", "note": SECRET}).encode()
    signed = stripe.WebhookSignature.generate_signature_header(body.decode(), secret)
    headers = {"Content-Type": "application/json", "Stripe-Signature": signed}
    r = gw.hook("stripe", content=body, token=None, headers=headers)
    assert r.status_code == 202, r.text
    request_id = gw.admin(f"/api/runs/{r.json()['runId']}")["run"]["requestId"]
    preview = admin(gw, "POST", f"/api/requests/{request_id}/replay", dryRun="true")
    assert preview.status_code == 200, preview.text
    [action] = preview.json()["actions"]
    assert action["fields"]["message"] == "Stripe invoice.paid"
    # a forged signature: refused, and nothing of it kept
    bad = {**headers, "Stripe-Signature": signed.replace("v1=", "v1=0")}
    assert gw.hook("stripe", content=body, token=None, headers=bad).status_code == 401
    refused = eventually(
        lambda: next((i for i in gw.admin("/api/requests")["items"] if i["status"] == 401), None),
        what="the refused request's log line",
    )
    time.sleep(0.3)  # past the next group commit
    r = admin(gw, "POST", f"/api/requests/{refused['requestId']}/replay", dryRun="true")
    assert r.status_code == 404 and r.json()["code"] == "payload_not_found"


def test_a_replay_is_accepted_as_a_live_request_is(start_gateway) -> None:
    """A replay commits through the hook path's accept stage: the rule's coalescing applies, so
    a second replay inside the window joins the first one's waiting run, as a live request
    would. A replay is the sender `replay`, so it never joins the live sender's run (its spend
    and its hold are its own)."""
    coalescing = {
        **rule("prs", "PR {{ number }}"),
        "sessionMode": "per-request",
        "coalesce": {"key": "{{ number }}", "window": "60s", "maxWait": "2m"},
    }
    gw = start(start_gateway, mappings=[coalescing])
    r = gw.hook("prs", {"number": 7})
    assert r.status_code == 202 and r.json()["coalesced"] is True, r.text
    run_id = r.json()["runId"]
    request_id = gw.admin(f"/api/runs/{run_id}")["run"]["requestId"]
    replays = []
    for _ in range(2):
        done = admin(gw, "POST", f"/api/requests/{request_id}/replay")
        assert done.status_code == 200, done.text
        replays.append(done.json())
        assert replays[-1]["status"] == 202 and replays[-1]["requestId"] != request_id
    lines = [gw.admin(f"/api/requests/{x['requestId']}")["request"] for x in replays]
    assert [line["client"] for line in lines] == ["replay", "replay"]
    [replayed_run] = lines[0]["runIds"]
    assert replayed_run != run_id  # not the live sender's run
    assert lines[1]["runIds"] == [replayed_run]  # the second replay joined the first's
    assert gw.admin(f"/api/runs/{replayed_run}")["run"]["sender"] == "replay"
    runs = {i["runId"] for i in gw.admin("/api/runs", rule="rule-prs")["items"]}
    assert runs == {run_id, replayed_run}
