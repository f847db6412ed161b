"""Route a monitoring alert by severity (used by rules/examples/monitoring.yaml).

- resolved alerts: skip (None -> 204, nothing dispatched);
- critical: keep the templated agent action ({}), so an isolated run investigates it;
- anything else: switch to a wake event for the next heartbeat, with a one-line text.
"""


def transform(ctx):
    alert = ctx.payload
    if alert.get("status") == "resolved":
        return None
    severity = str(alert.get("severity") or "unknown").lower()
    if severity == "critical":
        return {}
    return {
        "kind": "wake",
        "text": f"[{severity}] {alert.get('title') or 'alert'} on {alert.get('host') or 'unknown host'}",
        "mode": "next-heartbeat",
    }
