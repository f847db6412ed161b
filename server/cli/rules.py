"""`hookwise rules test` and `hookwise rules check`: the rule author's tools, run without a server.

`rules test` puts one sample request through the configured rules exactly as the hook endpoint
would (select, extract, render, transform, then `validate_action` with the gateway's validation
policy) and prints the outcome as JSON; nothing is dispatched or stored. `rules check` compiles
every rule, template, JSONPath and transform and lists every problem with its file, rule id and
key path; it also flags rules whose static `channel` (or `fallbackChannel`) is unknown or not
configured under `channels`, since every request such a rule matches would be refused.
`unconfigured_channel_issues` is that last check on its own, for `config check`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...engine.config.channels import LAST, canonical_channel, unknown_channel_hint
from ...engine.config.mapping import MappingConfig
from ...engine.config.models import LoadedConfig
from ...engine.errors import ConfigError, ConfigIssue, RequestError
from ...engine.request import InboundRequest
from ...engine.rules.ruleset import RuleSet
from ..ingress.explain import explain_with_validation
from .args import add_common_options

__all__ = ["add_cli", "unconfigured_channel_issues"]

_TEST_EPILOG = """\
The JSON printed has these keys:
  path       the sub-path tested
  matched    the id of the rule that matched, or null
  rules      every rule in the order tried, with result "matched", "no match" (and the reason)
             or "shadowed" (it would match, but an earlier rule won)
  extracted  the values the matched rule's `extract` pulled from the payload
  skipped    true when the transform returned null (the server answers 204)
  actions    each action: its kind, the fields as rendered, and either the validated action
             (as /wake or /agent would accept it) or the validation error
  respond    the rule's fixed answer, if it has one
  error      the error the server would answer with, or null
  status     the HTTP status the server would answer with

exit status: 0 when a rule matched and every action is valid (or the request was skipped),
1 otherwise (no match, a template, transform or validation error, or a broken configuration).

example:
  hookwise rules test --config hookwise.yaml --path github \\
    --payload rules/examples/github-pull-request.json --header X-GitHub-Event:pull_request
"""

_CHECK_EPILOG = """\
Checks, all at once: the config file itself; every rule in hooks.mappings, the hooks.rules files
and the hooks.presets (key names and types, duplicate ids, match.when conditions, extract and
forEach JSONPaths, templates, respond); every transform (the module exists inside transformsDir,
compiles, and has the export named); and that a rule's static channel / fallbackChannel is a
known channel and is configured under `channels` (unless the rule sets deliver: false).

exit status: 0 when there is no problem, 1 otherwise (each problem is printed on its own line
with its file, rule id and key path).
"""


# ---------------------------------------------------------------------------------- shared


def _load(path: str) -> LoadedConfig | None:
    from ..lifecycle.serve import load

    return load(path)


def _print_issues(what: str, issues: Sequence[ConfigIssue | str]) -> None:
    print(f"hookwise: {what} {len(issues)} problem(s):", file=sys.stderr)
    for issue in issues:
        print(f"  {issue}", file=sys.stderr)


# ------------------------------------------------------------------------------ rules test


def _pairs(values: Iterable[str], sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, found, rest = value.partition(sep)
        if not found or not key.strip():
            raise SystemExit(f"hookwise: {what} {value!r} is not of the form NAME{sep}VALUE")
        out[key.strip()] = rest.strip() if sep == ":" else rest
    return out


def _request(args: argparse.Namespace) -> InboundRequest:
    from ..ingress.payload import parse_payload

    headers = {k.lower(): v for k, v in _pairs(args.header, ":", "--header").items()}
    query = _pairs(args.query, "=", "--query")
    try:
        body = sys.stdin.buffer.read() if args.payload == "-" else Path(args.payload).read_bytes()
    except OSError as e:
        raise SystemExit(f"hookwise: cannot read {args.payload}: {e.strerror or e}") from None
    ctype = headers.get("content-type", "application/json").split(";", 1)[0].strip().lower()
    try:
        payload = parse_payload(body, ctype.encode("latin-1"), arrays=True)
    except RequestError as e:
        raise SystemExit(f"hookwise: {args.payload}: {e.message}") from None
    return InboundRequest(
        path=args.path.strip().strip("/"),
        payload=payload,
        headers=headers,
        query=query,
        raw_body=body,
        now=datetime.now(UTC),
    )


def cmd_rules_test(args: argparse.Namespace) -> int:
    from ..lifecycle.gateway import compile_rules, validation_policy

    loaded = _load(args.config)
    if loaded is None:
        return 1
    request = _request(args)
    try:
        policy = validation_policy(loaded.config)
        ruleset = compile_rules(loaded)
    except ConfigError as e:
        _print_issues(f"{args.config}: the rules have", e.issues)
        return 1
    try:
        if args.sign:
            from .signatures import rules_test_sign

            request = rules_test_sign(ruleset, request, args.url)
        report = explain_with_validation(ruleset, request, policy)
    finally:
        ruleset.close()
    print(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    return 0 if report["matched"] is not None and report["error"] is None else 1


# ----------------------------------------------------------------------------- rules check


def _configured_channels(loaded: LoadedConfig) -> set[str]:
    return {canonical_channel(str(k)) or str(k).strip().lower() for k in loaded.config.channels}


def _rule_locations(ruleset: RuleSet) -> list[tuple[str, str | None, str, MappingConfig]]:
    """(rule id, file, key path, mapping) for every compiled rule. A rule's `origin` is
    `hooks.mappings[i]` or `<file>[i]` (`hookwise.engine.rules.ruleset`)."""
    out = []
    for rule in ruleset.rules:
        origin: str = rule.origin
        if origin.startswith("hooks.mappings["):
            file, where = None, origin
        else:
            cut = origin.rfind("[")
            file, where = origin[:cut], origin[cut:]
        out.append((rule.id, file, where, rule.config))
    return out


def _inline_locations(loaded: LoadedConfig) -> list[tuple[str, str | None, str, MappingConfig]]:
    out: list[tuple[str, str | None, str, MappingConfig]] = []
    for i, mapping in enumerate(loaded.config.hooks.mappings):
        rule_id = (mapping.id or "").strip() or f"mapping-{i + 1}"
        out.append((rule_id, None, f"hooks.mappings[{i}]", mapping))
    return out


def unconfigured_channel_issues(
    loaded: LoadedConfig, *, ruleset: RuleSet | None = None
) -> list[ConfigIssue]:
    """Rules whose static `channel` / `fallbackChannel` is not a known channel, or is one that is
    not configured under `channels` (while the rule delivers): every request such a rule matched
    would be refused with 400. Pass `ruleset` when it is already compiled; otherwise the rules
    are compiled here, and when that fails only `hooks.mappings` are checked (the compile
    errors are the ones to fix first)."""
    locations: list[tuple[str, str | None, str, MappingConfig]]
    if ruleset is not None:
        locations = _rule_locations(ruleset)
    else:
        from ..lifecycle.gateway import compile_rules

        try:
            compiled = compile_rules(loaded)
        except ConfigError:
            locations = _inline_locations(loaded)
        else:
            try:
                locations = _rule_locations(compiled)
            finally:
                compiled.close()
    configured = _configured_channels(loaded)
    issues: list[ConfigIssue] = []
    for rule_id, file, where, mapping in locations:
        if mapping.action != "agent":
            continue
        for key, name in (
            ("channel", mapping.channel),
            ("fallbackChannel", mapping.fallback_channel),
        ):
            if name is None:
                continue
            canonical = canonical_channel(name)
            if canonical is None:
                message = f"unknown channel {name!r}{unknown_channel_hint(name)}"
            elif canonical != LAST and canonical not in configured and mapping.deliver is not False:
                message = (
                    f"channel {canonical} is not configured: add channels.{canonical} to the "
                    "configuration (or set deliver: false); until then every request this rule "
                    "matches is refused with 400 channel_not_configured"
                )
            else:
                continue
            issues.append(ConfigIssue(f"{where}.{key}", message, file=file, rule_id=rule_id))
    return issues


def cmd_rules_check(args: argparse.Namespace) -> int:
    from ...engine.config.load import check_config
    from ..lifecycle.gateway import compile_rules
    from .args import missing_config_hint

    hint = missing_config_hint(args.config)
    if hint:
        print(hint, file=sys.stderr)
        return 1
    # every problem in one pass: the config's own, then the rules of what is usable
    loaded, config_issues = check_config(args.config)
    issues: list[ConfigIssue] = list(config_issues)
    if loaded is None:
        _print_issues(f"{args.config}: the configuration has", issues)
        return 1
    ruleset = None
    try:
        ruleset = compile_rules(loaded)
    except ConfigError as e:
        issues.extend(e.issues)
    try:
        issues.extend(unconfigured_channel_issues(loaded, ruleset=ruleset))
        count = len(ruleset.rules) if ruleset is not None else 0
        ids = [r.id for r in ruleset.rules] if ruleset is not None else []
        index_lines = _index_report(ruleset) if ruleset is not None else []
    finally:
        if ruleset is not None:
            ruleset.close()
    if issues:
        _print_issues(f"{args.config}: the rules have", issues)
        return 1
    shown = f": {', '.join(ids)}" if ids else ""
    print(f"hookwise: {args.config}: {count} rule(s) compiled without problems{shown}")
    print("\n".join(index_lines))
    return 0


def _index_report(ruleset: RuleSet) -> list[str]:
    """Which discriminator each rule is indexed by, per path, then `rule_warnings`."""
    lines = [
        "rule index (a request tries only the rules its discriminator values name, and the rules "
        "without one, in configured order):"
    ]
    for path, entries in ruleset.indexed_by().items():
        if not entries:
            continue
        lines.append(f"  path {path}:" if path != "*" else "  any other path:")
        for rule_id, described in entries:
            lines.append(
                f"    {rule_id}: {described or 'no discriminator: tried on every request'}"
            )
    lines.extend(f"warning: {warning}" for warning in rule_warnings(ruleset))
    return lines


def rule_warnings(ruleset: RuleSet) -> list[str]:
    """What compiled but deserves a look, one line each: the compile's own warnings (the
    session policy's notes) and the rules that can never match because an earlier one matches
    every request they match. `rules check` and `config check` print them; finding the
    shadowed rules compares every pair of rules on a path (about a second for 1,000 rules on
    one path), so `serve` does not."""
    from ...engine.rules.index import shadowed

    return [*ruleset.warnings] + [
        f"rule {rule.id!r} ({rule.origin}) can never match: rule {first.id!r} "
        f"({first.origin}) comes first and matches every request it matches"
        for rule, first in shadowed(ruleset.rules)
    ]


# ------------------------------------------------------------------------------------ wiring


def add_cli(subparsers: Any) -> None:
    """Add `rules test` and `rules check` to the `hookwise` command line."""
    rules = subparsers.add_parser(
        "rules",
        help="tools for mapped-hook rule authors",
        description="Tools for mapped-hook rule authors: try a sample request, check every rule.",
    )
    sub = rules.add_subparsers(dest="rules_command", metavar="COMMAND", required=True)

    test = sub.add_parser(
        "test",
        help="run a sample request through the rules and print the outcome as JSON",
        description=(
            "Run one sample request through the configured rules, as POST {hook_path}/NAME would "
            "be handled: select the rule, extract, render, run the transform, validate the "
            "resulting actions. Nothing is dispatched or stored; the transform does run."
        ),
        epilog=_TEST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_options(test)
    test.add_argument(
        "--path",
        required=True,
        metavar="NAME",
        help="the hook name, i.e. the sub-path after the hook path (github for /hooks/github)",
    )
    test.add_argument(
        "--payload",
        required=True,
        metavar="FILE",
        help="the request body: a JSON file ('-' reads stdin); a form body when --header "
        "Content-Type:application/x-www-form-urlencoded is given",
    )
    test.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="a request header, e.g. X-GitHub-Event:pull_request (repeatable)",
    )
    test.add_argument(
        "--query",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a query parameter of the request URL (repeatable)",
    )
    test.add_argument(
        "--sign",
        action="store_true",
        help="sign the sample as the provider would, with the secret of the verify block that "
        "guards the path, so that it runs through signature verification too",
    )
    test.add_argument("--url", help="with --sign: the URL the provider calls (twilio, square)")
    test.set_defaults(func=cmd_rules_test)

    check = sub.add_parser(
        "check",
        help="compile every rule, template, JSONPath and transform; list every problem",
        description=(
            "Compile every mapped-hook rule of a configuration (hooks.mappings, the hooks.rules "
            "files, hooks.presets), with their templates, JSONPaths and transforms, and print "
            "every problem with its file, rule id and key path."
        ),
        epilog=_CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_options(check)
    check.set_defaults(func=cmd_rules_check)
