"""What `hookwise rules test` prints: how a rule set treats one request, without dispatching it.

`explain(ruleset, request)` returns a JSON-ready dict:

```
{"path": "github",
 "matched": "github-pr" | null,
 "rules": [{"id": ..., "origin": ..., "result": "matched" | "no match" | "shadowed",
            "reason": "<why not>" | null}, ...],
 "extracted": {...}, "skipped": false,
 "actions": [{"kind": "agent", "fields": {...}}],   # raw fields, before validation
 "respond": {"status": 200, "body": ..., "headers": {...}} | null,
 "error": {"code": ..., "error": ..., "rule": ..., "detail": ...} | null}
```

`shadowed` marks a rule that would match but comes after the one that did. An `error` carries
`detail` (for example a JS error's message) for the rule author; it can quote the payload, which
is fine here (the author's own sample) but is why the server never shows it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from ..errors import Refusal
from ..request import InboundRequest
from ..transforms import TransformError
from .ruleset import Outcome, RuleSet


def explain(ruleset: RuleSet, request: InboundRequest) -> dict[str, Any]:
    """Explain `request` against `ruleset` (runs the transform, if any; dispatches nothing)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(explain_async(ruleset, request))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, explain_async(ruleset, request)).result()


async def explain_async(ruleset: RuleSet, request: InboundRequest) -> dict[str, Any]:
    """`explain` for callers already inside an event loop."""
    selected = ruleset.select(request)
    report: dict[str, Any] = {
        "path": request.path.strip("/"),
        "matched": selected.id if selected else None,
        "rules": [],
        "extracted": {},
        "skipped": False,
        "actions": [],
        "respond": None,
        "error": None,
    }
    seen_match = False
    for rule in ruleset.rules:
        reason = rule.why_not(request)
        if reason is not None:
            result = "no match"
        elif not seen_match:
            result, seen_match = "matched", True
        else:
            result = "shadowed"
        report["rules"].append(
            {"id": rule.id, "origin": rule.origin, "result": result, "reason": reason}
        )
    if selected is None:
        return report
    try:
        outcome: Outcome = await ruleset.evaluate(selected, request)
    except Refusal as exc:
        error: dict[str, Any] = exc.to_body()  # the status is the server's to choose
        cause = exc.__cause__
        if isinstance(cause, TransformError) and cause.detail:
            error["detail"] = cause.detail
        report["error"] = error
        return report
    report["extracted"] = outcome.extracted
    report["skipped"] = outcome.skipped
    report["actions"] = [{"kind": a.kind, "fields": a.fields} for a in outcome.actions]
    if outcome.respond is not None:
        report["respond"] = {
            "status": outcome.respond.status,
            "body": outcome.respond.body,
            "headers": dict(outcome.respond.headers),
        }
    return report
