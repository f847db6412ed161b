"""Per-mapping signature verification: each provider's scheme, what fails and how, load errors."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
import yaml

from hookwise.engine.config.convert import data_key, structure
from hookwise.engine.config.load import load_data
from hookwise.engine.config.mapping import MappingConfig, VerifyConfig
from hookwise.engine.errors import ConfigError, Refusal
from hookwise.engine.rules.ruleset import RuleSet
from hookwise.engine.signatures import NAMES, SCHEMES, SignatureError, compile_verifier
from hookwise.engine.signatures.sign import SignError, sign
from hookwise.server.ingress.refusals import status_of
from tests.engine.conftest import NOW, REPO, Rules, make_request, run

SECRET = "gh-secret-7c1d9e0f3a"
STRIPE_SECRET = "whsec_stripe7c1d9e0f3a5b"
SW_KEY = b"standard-webhooks-key-0123456789"
SW_SECRET = "whsec_" + base64.b64encode(SW_KEY).decode()
BODY = b'{"action":"opened","number":42}'
T = int(NOW.timestamp())


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def github(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {"X-Hub-Signature-256": "sha256=" + _hmac(secret.encode(), body).hex()}


def stripe_v1(body: bytes = BODY, t: int = T, secret: str = STRIPE_SECRET) -> str:
    return _hmac(secret.encode(), f"{t}.".encode() + body).hex()


def stripe(body: bytes = BODY, t: int = T, secret: str = STRIPE_SECRET) -> dict[str, str]:
    return {"Stripe-Signature": f"t={t},v1={stripe_v1(body, t, secret)}"}


def sw_v1(body: bytes = BODY, ts: int = T, key: bytes = SW_KEY, msg_id: str = "msg_1") -> str:
    return "v1," + base64.b64encode(_hmac(key, f"{msg_id}.{ts}.".encode() + body)).decode()


def standard(body: bytes = BODY, ts: int = T, key: bytes = SW_KEY) -> dict[str, str]:
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(ts),
        "webhook-signature": sw_v1(body, ts, key),
    }


def custom(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {"X-Signature": "sha256=" + _hmac(secret.encode(), body).hex()}


GITHUB = {"scheme": "github", "secret": SECRET}
STRIPE = {"scheme": "stripe", "secret": STRIPE_SECRET}
STANDARD = {"scheme": "standard-webhooks", "secret": SW_SECRET}
CUSTOM = {"scheme": "hmac-sha256", "secret": SECRET, "header": "X-Signature", "prefix": "sha256="}

MINUTE = 60
WRONG_SW_KEY = b"another-key-0123456789abcdefghij"

# (case, verify block, headers, body, None when accepted or a fragment of the reason)
CASES: list[tuple[str, dict[str, Any], dict[str, str], bytes, str | None]] = [
    ("github valid", GITHUB, github(), BODY, None),
    ("github upper-case header name", GITHUB, {"x-hub-signature-256": github()["X-Hub-Signature-256"]}, BODY, None),
    ("github wrong secret", GITHUB, github(secret="other"), BODY, "does not match"),
    ("github tampered body", GITHUB, github(), BODY + b" ", "does not match"),
    ("github missing header", GITHUB, {}, BODY, "X-Hub-Signature-256 header is missing"),
    ("github empty header", GITHUB, {"X-Hub-Signature-256": ""}, BODY, "header is missing"),
    ("github sha1 header", GITHUB, {"X-Hub-Signature-256": "sha1=" + "ab" * 20}, BODY, "not of the form"),
    ("github short hex", GITHUB, {"X-Hub-Signature-256": "sha256=abcd"}, BODY, "not of the form"),
    ("github no prefix", GITHUB, {"X-Hub-Signature-256": _hmac(SECRET.encode(), BODY).hex()}, BODY, "not of the form"),
    ("github the sha1 header alone", GITHUB, {"X-Hub-Signature": "sha1=" + "ab" * 20}, BODY, "header is missing"),
    ("stripe valid", STRIPE, stripe(), BODY, None),
    ("stripe wrong secret", STRIPE, stripe(secret="whsec_other"), BODY, "does not match"),
    ("stripe tampered body", STRIPE, stripe(), b'{"amount":1}', "does not match"),
    ("stripe missing header", STRIPE, {}, BODY, "Stripe-Signature header is missing"),
    ("stripe no timestamp", STRIPE, {"Stripe-Signature": f"v1={stripe_v1()}"}, BODY, "not of the form"),
    ("stripe two timestamps", STRIPE, {"Stripe-Signature": f"t={T},t={T},v1={stripe_v1()}"}, BODY, "not of the form"),
    ("stripe timestamp not a number", STRIPE, {"Stripe-Signature": f"t=now,v1={stripe_v1()}"}, BODY, "not a valid time"),
    ("stripe only v0", STRIPE, {"Stripe-Signature": f"t={T},v0={stripe_v1()}"}, BODY, "not of the form"),
    ("stripe garbage", STRIPE, {"Stripe-Signature": "garbage"}, BODY, "not of the form"),
    ("stripe v1 not hex", STRIPE, {"Stripe-Signature": f"t={T},v1=zz"}, BODY, "not of the form"),
    ("stripe signed with another t", STRIPE, {"Stripe-Signature": f"t={T - 1},v1={stripe_v1()}"}, BODY, "does not match"),
    ("stripe stale", STRIPE, stripe(t=T - 5 * MINUTE - 1), BODY, "301 s old, more than the 300 s tolerance"),
    ("stripe future", STRIPE, stripe(t=T + 5 * MINUTE + 1), BODY, "301 s in the future"),
    ("stripe at the edge of the tolerance", STRIPE, stripe(t=T - 5 * MINUTE), BODY, None),
    ("stripe stale with a longer tolerance", {**STRIPE, "tolerance": "10m"}, stripe(t=T - 9 * MINUTE), BODY, None),
    ("stripe stale with a shorter tolerance", {**STRIPE, "tolerance": 30}, stripe(t=T - 31), BODY, "more than the 30 s tolerance"),
    (
        "stripe several v1, one valid (secret rotation)",
        STRIPE,
        {"Stripe-Signature": f"t={T},v1={'0' * 64},v1={stripe_v1()},v0={'1' * 64}"},
        BODY,
        None,
    ),
    (
        "stripe several v1, none valid",
        STRIPE,
        {"Stripe-Signature": f"t={T},v1={'0' * 64},v1={stripe_v1(secret='whsec_x')}"},
        BODY,
        "does not match",
    ),
    ("standard valid", STANDARD, standard(), BODY, None),
    ("standard wrong secret", STANDARD, standard(key=WRONG_SW_KEY), BODY, "does not match"),
    ("standard tampered body", STANDARD, standard(), BODY[:-1], "does not match"),
    ("standard other message id", STANDARD, {**standard(), "webhook-id": "msg_2"}, BODY, "does not match"),
    ("standard missing signature", STANDARD, {k: v for k, v in standard().items() if k != "webhook-signature"}, BODY, "webhook-signature header is missing"),
    ("standard missing id", STANDARD, {k: v for k, v in standard().items() if k != "webhook-id"}, BODY, "webhook-id header is missing"),
    ("standard missing timestamp", STANDARD, {k: v for k, v in standard().items() if k != "webhook-timestamp"}, BODY, "webhook-timestamp header is missing"),
    ("standard timestamp not a number", STANDARD, {**standard(), "webhook-timestamp": "soon"}, BODY, "not a valid time"),
    ("standard no v1", STANDARD, {**standard(), "webhook-signature": "v1a,abc"}, BODY, "not of the form v1,<base64 of 32 bytes>"),
    ("standard not base64", STANDARD, {**standard(), "webhook-signature": "v1,@@@"}, BODY, "not of the form"),
    ("standard stale", STANDARD, standard(ts=T - 5 * MINUTE - 1), BODY, "301 s old"),
    ("standard future", STANDARD, standard(ts=T + 6 * MINUTE), BODY, "360 s in the future"),
    ("standard slightly in the future", STANDARD, standard(ts=T + 30), BODY, None),
    (
        "standard several signatures, one valid",
        STANDARD,
        {**standard(), "webhook-signature": f"v1a,xyz v1,{'A' * 43}= {sw_v1()}"},
        BODY,
        None,
    ),
    (
        "standard several signatures, none valid",
        STANDARD,
        {**standard(), "webhook-signature": f"v1,{'A' * 43}= {sw_v1(key=WRONG_SW_KEY)}"},
        BODY,
        "does not match",
    ),
    ("hmac valid", CUSTOM, custom(), BODY, None),
    ("hmac upper-case hex", CUSTOM, {"X-Signature": "sha256=" + _hmac(SECRET.encode(), BODY).hex().upper()}, BODY, None),
    ("hmac wrong secret", CUSTOM, custom(secret="other"), BODY, "does not match"),
    ("hmac tampered body", CUSTOM, custom(), b"{}", "does not match"),
    ("hmac missing header", CUSTOM, {}, BODY, "X-Signature header is missing"),
    ("hmac prefix missing", CUSTOM, {"X-Signature": _hmac(SECRET.encode(), BODY).hex()}, BODY, "not of the form sha256=<64 hex digits>"),
    ("hmac no prefix configured", {**CUSTOM, "prefix": None}, {"X-Signature": _hmac(SECRET.encode(), BODY).hex()}, BODY, None),
    (
        "hmac base64",
        {**CUSTOM, "prefix": None, "encoding": "base64"},
        {"X-Signature": base64.b64encode(_hmac(SECRET.encode(), BODY)).decode()},
        BODY,
        None,
    ),
    (
        "hmac base64 given hex",
        {**CUSTOM, "prefix": None, "encoding": "base64"},
        {"X-Signature": _hmac(SECRET.encode(), BODY).hex()},
        BODY,
        "not of the form <base64 of 32 bytes>",
    ),
]  # fmt: skip


def _verify(block: dict[str, Any], headers: dict[str, str], body: bytes) -> None:
    block = {k: v for k, v in block.items() if v is not None}
    config = structure(block, VerifyConfig, "verify")
    verifier = compile_verifier(config, REPO, "verify")
    request = make_request("hook", {}, headers=headers, raw_body=body)
    verifier.verify(request)


@pytest.mark.parametrize(
    ("block", "headers", "body", "problem"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_signature_schemes(
    block: dict[str, Any], headers: dict[str, str], body: bytes, problem: str | None
) -> None:
    if problem is None:
        _verify(block, headers, body)
        return
    with pytest.raises(SignatureError) as caught:
        _verify(block, headers, body)
    message = str(caught.value)
    assert message.startswith(f"{block['scheme']} signature check failed: ")
    assert problem in message
    # never the secret, never a signature
    assert block["secret"] not in message
    for value in headers.values():
        for part in value.replace(",", " ").replace("=", " ").split():
            if len(part) >= 16:
                assert part not in message


def test_a_timestamped_scheme_needs_the_requests_time() -> None:
    verifier = compile_verifier(structure(STRIPE, VerifyConfig), REPO, "verify")
    with pytest.raises(ValueError, match="now is required"):
        verifier.verify(
            attrs.evolve(make_request("hook", {}, headers=stripe(), raw_body=BODY), now=None)
        )


def test_the_tolerance_is_relative_to_the_requests_now() -> None:
    verifier = compile_verifier(structure(STRIPE, VerifyConfig), REPO, "verify")
    request = make_request("hook", {}, headers=stripe(t=T - 3600), raw_body=BODY)
    verifier.verify(attrs.evolve(request, now=NOW - timedelta(hours=1)))
    with pytest.raises(SignatureError, match="3600 s old"):
        verifier.verify(request)


# --- through the rule set: first thing in evaluate, 401, the rule named ------------------------


def _mapping(verify: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "signed", "match": {"path": "hook"}, "messageTemplate": "m", "verify": verify, **extra}  # fmt: skip


def test_a_valid_signature_lets_the_rule_run(rules: Rules) -> None:
    outcome = rules.one(_mapping(GITHUB), {"a": 1}, headers=github(), raw_body=BODY)
    assert [a.fields["message"] for a in outcome.actions] == ["m"]


def test_a_bad_signature_is_401_invalid_signature_naming_the_rule(rules: Rules) -> None:
    with pytest.raises(Refusal) as caught:
        rules.one(_mapping(GITHUB), {"a": 1}, headers=github(secret="x"), raw_body=BODY)
    error = caught.value
    assert (status_of(error.code), error.code, error.rule_id) == (
        401,
        "invalid_signature",
        "signed",
    )
    assert error.to_body() == {
        "ok": False,
        "code": "invalid_signature",
        "rule": "signed",
        "error": "rule 'signed': github signature check failed: the X-Hub-Signature-256 "
        "signature does not match the body and the configured secret",
    }


def test_verification_runs_before_templates(rules: Rules) -> None:
    mapping = _mapping(GITHUB, messageTemplate="{{ ticket | required }}")
    with pytest.raises(Refusal) as caught:
        rules.one(mapping, {}, raw_body=BODY)
    assert caught.value.code == "invalid_signature"


def test_verification_runs_before_transforms(rules: Rules, write_transform: Any) -> None:
    marker = rules.transforms_dir / "ran"
    write_transform("t.py", f"def transform(ctx):\n    open({str(marker)!r}, 'w').close()\n")
    mapping = _mapping(GITHUB, transform={"module": "t.py"})
    with pytest.raises(Refusal) as caught:
        rules.one(mapping, {}, headers=github(secret="x"), raw_body=BODY)
    assert caught.value.code == "invalid_signature"
    assert not marker.exists()
    rules.one(mapping, {}, headers=github(), raw_body=BODY)
    assert marker.exists()


def test_only_the_selected_rule_verifies(rules: Rules) -> None:
    ruleset = rules.compile(
        [
            {
                "id": "signed",
                "match": {"path": "hook", "when": {"header": "x-kind", "equals": "signed"}},
                "messageTemplate": "signed",
                "verify": GITHUB,
            },
            {"id": "open", "match": {"path": "hook"}, "messageTemplate": "open"},
        ]
    )
    outcome = rules.outcome(ruleset, make_request("hook", {}, headers={"x-kind": "other"}))
    assert outcome.rule_id == "open"
    with pytest.raises(Refusal, match="signature check failed"):
        rules.outcome(ruleset, make_request("hook", {}, headers={"x-kind": "signed"}))


def test_the_secret_is_not_in_the_compiled_rules_repr(rules: Rules) -> None:
    ruleset = rules.compile([_mapping(GITHUB)])
    assert SECRET not in repr(ruleset.rules[0])
    assert SECRET not in repr(ruleset.rules[0].config)


# --- secrets: secretFile, ${ENV} in rule files --------------------------------------------------


def test_secret_file_is_relative_to_the_config_folder(tmp_path: Path, rules: Rules) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "github").write_text(SECRET + "\n")
    verify = {"scheme": "github", "secretFile": "secrets/github"}
    ruleset = rules.compile([_mapping(verify)], base_dir=tmp_path)
    request = make_request("hook", {}, headers=github(), raw_body=BODY)
    assert rules.outcome(ruleset, request).rule_id == "signed"
    with pytest.raises(Refusal, match="does not match"):
        rules.outcome(ruleset, make_request("hook", {}, headers=github(secret="x"), raw_body=BODY))


def test_secret_file_in_a_rule_file_is_relative_to_that_file(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "github.secret").write_text(SECRET)
    (tmp_path / "github.secret").write_text("the wrong one")
    rule = _mapping({"scheme": "github", "secretFile": "github.secret"})
    (folder / "github.yaml").write_text(yaml.safe_dump([rule]))
    ruleset = RuleSet.compile([], rule_files=["rules/*.yaml"], base_dir=tmp_path)
    try:
        request = make_request("hook", {}, headers=github(), raw_body=BODY)
        assert run(ruleset.evaluate(ruleset.select(request), request)).rule_id == "signed"
    finally:
        ruleset.close()


def _rule_file(tmp_path: Path, rule: dict[str, Any]) -> None:
    (tmp_path / "r.yaml").write_text(yaml.safe_dump([rule]))


def test_env_references_in_rule_files_come_from_the_given_env(tmp_path: Path) -> None:
    _rule_file(tmp_path, _mapping({"scheme": "github", "secret": "${GH_SECRET}"}))
    ruleset = RuleSet.compile(
        [], rule_files=["r.yaml"], base_dir=tmp_path, env={"GH_SECRET": SECRET}
    )
    try:
        request = make_request("hook", {}, headers=github(), raw_body=BODY)
        assert run(ruleset.evaluate(ruleset.select(request), request)).rule_id == "signed"
    finally:
        ruleset.close()


@pytest.mark.parametrize("env", [None, {"OTHER": "x"}], ids=["no env", "not set"])
def test_an_unset_env_reference_in_a_rule_file_fails_at_load(
    tmp_path: Path, env: dict[str, str] | None
) -> None:
    _rule_file(tmp_path, _mapping({"scheme": "github", "secret": "${GH_SECRET}"}))
    with pytest.raises(ConfigError) as caught:
        RuleSet.compile([], rule_files=["r.yaml"], base_dir=tmp_path, env=env)
    assert str(caught.value) == (
        "r.yaml: rule 'signed': [0].verify.secret: environment variable GH_SECRET is not set"
    )


def test_an_env_reference_set_to_empty_is_an_empty_secret(tmp_path: Path) -> None:
    _rule_file(tmp_path, _mapping({"scheme": "github", "secret": "${GH_SECRET}"}))
    with pytest.raises(ConfigError) as caught:
        RuleSet.compile([], rule_files=["r.yaml"], base_dir=tmp_path, env={"GH_SECRET": ""})
    assert [(i.file, i.rule_id, i.path) for i in caught.value.issues] == [
        ("r.yaml", "signed", "[0].verify.secret")
    ]
    assert "must not be empty" in str(caught.value)


# --- load-time errors: rule id and key path, never the secret -----------------------------------

LOAD_ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    ("empty secret", {"scheme": "github", "secret": ""}, "secret", "must not be empty"),
    ("blank secret", {"scheme": "stripe", "secret": "   "}, "secret", "must not be empty"),
    ("no secret", {"scheme": "github"}, "secret", "is required (or verify.secretFile, or verify.secrets)"),
    ("both", {"scheme": "github", "secret": SECRET, "secretFile": "s"}, "secretFile", "give one of verify.secret, verify.secretFile or verify.secrets"),
    ("missing file", {"scheme": "github", "secretFile": "nope.txt"}, "secretFile", "cannot read"),
    ("empty file", {"scheme": "github", "secretFile": "empty.txt"}, "secretFile", "is empty"),
    ("hmac without header", {"scheme": "hmac-sha256", "secret": SECRET}, "header", "is required for the hmac-sha256 scheme"),
    ("hmac blank header", {"scheme": "hmac-sha256", "secret": SECRET, "header": " "}, "header", "is required"),
    ("header on github", {**GITHUB, "header": "X-Sig"}, "header", "applies to the hmac schemes only, not github"),
    ("prefix on stripe", {**STRIPE, "prefix": "x"}, "prefix", "applies to the hmac schemes only"),
    ("encoding on standard", {**STANDARD, "encoding": "hex"}, "encoding", "applies to the hmac schemes only"),
    ("tolerance on github", {**GITHUB, "tolerance": "5m"}, "tolerance", "signs no timestamp"),
    ("zero tolerance", {**STRIPE, "tolerance": 0}, "tolerance", "must be positive"),
        ("whsec not base64", {"scheme": "standard-webhooks", "secret": "whsec_not base64!"}, "secret", "whsec_ followed by base64"),
    ("whsec empty", {"scheme": "standard-webhooks", "secret": "whsec_"}, "secret", "whsec_ followed by base64"),
    ("whsec file not base64", {"scheme": "standard-webhooks", "secretFile": "bad-whsec.txt"}, "secretFile", "whsec_ followed by base64"),
]  # fmt: skip


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    (tmp_path / "empty.txt").write_text("\n")
    (tmp_path / "bad-whsec.txt").write_text("whsec_%%%\n")
    return tmp_path


@pytest.mark.parametrize(
    ("block", "key", "message"), [c[1:] for c in LOAD_ERRORS], ids=[c[0] for c in LOAD_ERRORS]
)
def test_a_bad_verify_block_fails_at_load_with_rule_id_and_key_path(
    rules: Rules, secrets_dir: Path, block: dict[str, Any], key: str, message: str
) -> None:
    mappings = [{"id": "other", "messageTemplate": "m"}, _mapping(block)]
    with pytest.raises(ConfigError) as caught:
        rules.compile(mappings, base_dir=secrets_dir)
    issues = caught.value.issues
    assert [(i.rule_id, i.path) for i in issues] == [("signed", f"hooks.mappings[1].verify.{key}")]
    assert message in issues[0].message
    for secret in (block.get("secret"), "%%%"):
        if secret and len(secret.strip()) > len("whsec_"):
            assert secret not in str(caught.value)


def test_a_bad_verify_block_in_a_rule_file_names_the_file(tmp_path: Path) -> None:
    _rule_file(tmp_path, _mapping({"scheme": "hmac-sha256", "secret": SECRET, "tolerance": 5}))
    with pytest.raises(ConfigError) as caught:
        RuleSet.compile([], rule_files=["r.yaml"], base_dir=tmp_path)
    assert [str(i) for i in caught.value.issues] == [
        "r.yaml: rule 'signed': [0].verify.header: is required for the hmac-sha256 scheme "
        "(the header that holds it)",
        "r.yaml: rule 'signed': [0].verify.tolerance: the hmac-sha256 scheme signs no timestamp; "
        "remove tolerance",
    ]


def test_an_unknown_scheme_fails_at_config_load_with_its_key_path() -> None:
    data = {"hooks": {"mappings": [_mapping({"scheme": "nope", "secret": SECRET})]}}
    with pytest.raises(ConfigError) as caught:
        load_data(data, env={})
    assert [str(i) for i in caught.value.issues] == [
        "hooks.mappings[0].verify.scheme: must be one of " + ", ".join(NAMES)
    ]


def test_an_unknown_scheme_in_a_rule_file_names_file_and_rule(tmp_path: Path) -> None:
    _rule_file(tmp_path, _mapping({"scheme": "nope", "secret": SECRET, "secrt": 1}))
    with pytest.raises(ConfigError) as caught:
        RuleSet.compile([], rule_files=["r.yaml"], base_dir=tmp_path)
    assert sorted(str(i) for i in caught.value.issues) == [
        "r.yaml: rule 'signed': [0].verify.scheme: must be one of " + ", ".join(NAMES),
        "r.yaml: rule 'signed': [0].verify.secrt: unknown key; did you mean 'secret'?",
    ]


def test_config_mappings_resolve_env_in_verify_secret() -> None:
    data = {"hooks": {"mappings": [_mapping({"scheme": "github", "secret": "${GH_SECRET}"})]}}
    loaded = load_data(data, env={"GH_SECRET": SECRET})
    verify = loaded.config.hooks.mappings[0].verify
    assert verify is not None and verify.secret == SECRET


# --- the rule file schema agrees with the model ---------------------------------------------

SCHEMA = json.loads((REPO / "schemas" / "mapping.schema.json").read_text())


def test_the_schema_has_exactly_the_verify_keys() -> None:
    assert set(SCHEMA["$defs"]["Verify"]["properties"]) == {
        data_key(f) for f in attrs.fields(VerifyConfig)
    }
    assert SCHEMA["$defs"]["Mapping"]["properties"]["verify"] == {"$ref": "#/$defs/Verify"}
    assert data_key(attrs.fields_dict(MappingConfig)["verify"]) == "verify"


VALID_BLOCKS = [
    GITHUB,
    STRIPE,
    {**STRIPE, "tolerance": "10m"},
    STANDARD,
    {**STANDARD, "tolerance": 60},
    CUSTOM,
    {"scheme": "hmac-sha256", "secret": SECRET, "header": "X-Sig", "encoding": "base64"},
]
INVALID_BLOCKS = [
    {"scheme": "nope", "secret": SECRET},
    {"scheme": "github"},
    {"scheme": "github", "secret": ""},
    {"scheme": "github", "secret": SECRET, "secretFile": "x"},
    {"scheme": "hmac-sha256", "secret": SECRET},
    {"scheme": "hmac-sha256", "secret": SECRET, "header": "X", "encoding": "base32"},
    {**GITHUB, "header": "X-Sig"},
    {**GITHUB, "tolerance": "5m"},
    {**STRIPE, "tolerance": "soon"},
    {**STRIPE, "tolerance": 0},
    {**GITHUB, "secrt": "x"},
]


def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


@pytest.mark.parametrize("block", VALID_BLOCKS, ids=lambda b: b["scheme"])
def test_a_valid_verify_block_passes_both_the_schema_and_the_compiler(
    rules: Rules, block: dict[str, Any]
) -> None:
    assert not list(_validator().iter_errors([_mapping(block)]))
    rules.compile([_mapping(block)])


@pytest.mark.parametrize("block", INVALID_BLOCKS, ids=str)
def test_an_invalid_verify_block_fails_both_the_schema_and_the_compiler(
    tmp_path: Path, block: dict[str, Any]
) -> None:
    assert list(_validator().iter_errors([_mapping(block)]))
    _rule_file(tmp_path, _mapping(block))
    with pytest.raises(ConfigError):
        RuleSet.compile([], rule_files=["r.yaml"], base_dir=tmp_path).close()


# --- the commented `verify` examples in rules/examples stay correct ---------------------------


def _uncommented(path: Path) -> str:
    text = path.read_text()
    text = re.sub(r"^(\s*)# (verify:.*)$", r"\1\2", text, flags=re.M)
    return re.sub(r"^(\s*)#   (scheme|secret|tolerance)\b", r"\1  \2", text, flags=re.M)


@pytest.mark.parametrize(("name", "scheme", "count"), [("stripe.yaml", "stripe", 1)])
def test_the_commented_verify_examples_work_when_uncommented(
    tmp_path: Path, name: str, scheme: str, count: int
) -> None:
    text = _uncommented(REPO / "rules" / "examples" / name)
    data = yaml.safe_load(text)
    assert [m["verify"]["scheme"] for m in data] == [scheme] * count
    _validator().validate(data)
    (tmp_path / name).write_text(text)
    env = {"GITHUB_WEBHOOK_SECRET": SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET}
    ruleset = RuleSet.compile(
        [], rule_files=[name], base_dir=tmp_path, transforms_dir=REPO / "transforms", env=env
    )
    try:
        assert [r.verifier.name for r in ruleset.rules if r.verifier] == [scheme] * count
        if scheme == "github":
            payload = json.loads((REPO / "rules" / "examples" / "github-issue.json").read_text())
            body = json.dumps(payload).encode()
            headers = {"X-GitHub-Event": "issues", **github(body)}
        else:
            payload = {"type": "invoice.payment_failed", "livemode": False}
            body = json.dumps(payload).encode()
            headers = stripe(body)
        request = make_request(scheme, payload, headers=headers, raw_body=body)
        rule = ruleset.select(request)
        assert rule is not None
        run(ruleset.evaluate(rule, request))
        tampered = make_request(scheme, payload, headers=headers, raw_body=body + b" ")
        with pytest.raises(Refusal) as caught:
            run(ruleset.evaluate(rule, tampered))
        assert (caught.value.code, caught.value.rule_id) == ("invalid_signature", rule.id)
    finally:
        ruleset.close()


# --- provider-published test vectors -----------------------------------------------------------


def test_githubs_published_test_vector() -> None:
    # docs.github.com, "Validating webhook deliveries", "Testing the webhook payload validation"
    block = structure({"scheme": "github", "secret": "It's a Secret to Everybody"}, VerifyConfig)
    verifier = compile_verifier(block, REPO, "verify")
    signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    headers = {"X-Hub-Signature-256": signature}
    verifier.verify(make_request("hook", {}, headers=headers, raw_body=b"Hello, World!"))
    with pytest.raises(SignatureError, match="does not match"):
        verifier.verify(make_request("hook", {}, headers=headers, raw_body=b"Hello, World?"))


# --- the new keys: rotation, public keys, handshake tokens, URLs, dedupe, doors ----------------

NEW_KEY_ERRORS = [
    ("secret and secrets", {"scheme": "github", "secret": SECRET, "secrets": [SECRET]}, "secrets", "give one of"),
    ("empty secrets", {"scheme": "github", "secrets": []}, "secrets", "at least one"),
    ("blank rotated secret", {"scheme": "github", "secrets": [SECRET, " "]}, "secrets[1]", "must not be empty"),
    ("discord without key", {"scheme": "discord"}, "publicKey", "is required for the discord scheme"),
    ("discord key not hex", {"scheme": "discord", "publicKey": "zz"}, "publicKey", "64 hex digits"),
    ("discord with a secret", {"scheme": "discord", "publicKey": "00" * 32, "secret": "x"}, "secret", "checks a publicKey"),
    ("sendgrid bad key", {"scheme": "sendgrid", "publicKey": "bm90IGEga2V5"}, "publicKey", "ECDSA P-256"),
    ("v1a bad key", {"scheme": "standard-webhooks", "publicKey": "whpk_AAAA"}, "publicKey", "32-byte Ed25519"),
    ("publicKey on github", {"scheme": "github", "secret": SECRET, "publicKey": "00"}, "publicKey", "shared secret"),
    ("verifyToken on slack", {"scheme": "slack", "secret": SECRET, "verifyToken": "t"}, "verifyToken", "meta scheme"),
    ("publicUrl on github", {"scheme": "github", "secret": SECRET, "publicUrl": "https://x"}, "publicUrl", "does not sign the URL"),
    ("publicUrl not a URL", {"scheme": "twilio", "secret": SECRET, "publicUrl": "x.example"}, "publicUrl", "http:// or https://"),
    ("hmac without {body}", {"scheme": "hmac", "secret": SECRET, "header": "X", "signed": "{timestamp}"}, "signed", "must contain {body}"),
    ("hmac unknown placeholder", {"scheme": "hmac", "secret": SECRET, "header": "X", "signed": "{nope}.{body}"}, "signed", "knows only"),
    ("hmac timestamp without header", {"scheme": "hmac", "secret": SECRET, "header": "X", "signed": "{timestamp}.{body}"}, "timestampHeader", "is required"),
    ("hmac-sha256 sha1", {"scheme": "hmac-sha256", "secret": SECRET, "header": "X", "algorithm": "sha1"}, "algorithm", "use the hmac scheme"),
    ("signed on slack", {"scheme": "slack", "secret": SECRET, "signed": "{body}"}, "signed", "hmac schemes only"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("block", "key", "message"), [c[1:] for c in NEW_KEY_ERRORS], ids=[c[0] for c in NEW_KEY_ERRORS]
)
def test_new_keys_are_checked_at_load(block: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        compile_verifier(structure(block, VerifyConfig), REPO, "v")
    assert any(i.path == f"v.{key}" and message in i.message for i in caught.value.issues), [
        str(i) for i in caught.value.issues
    ]
    assert SECRET not in str(caught.value)


def test_a_rotated_secret_list_accepts_any_of_its_secrets() -> None:
    block = structure({"scheme": "github", "secrets": ["new-secret", SECRET]}, VerifyConfig)
    verifier = compile_verifier(block, REPO, "verify")
    # who signed: the scheme and the index of the secret that matched (budgets by sender)
    assert verifier.verify(make_request("hook", {}, headers=github(), raw_body=BODY)) == "github#1"
    second = make_request("hook", {}, headers=github(secret="new-secret"), raw_body=BODY)
    assert verifier.verify(second) == "github#0"
    with pytest.raises(SignatureError):
        verifier.verify(make_request("hook", {}, headers=github(secret="older"), raw_body=BODY))


def test_an_unpadded_whsec_secret_is_accepted_as_the_sdk_does() -> None:
    key = b"thirty-one-bytes-of-key-materia"
    unpadded = "whsec_" + base64.b64encode(key).decode().rstrip("=")
    verifier = compile_verifier(
        structure({"scheme": "standard-webhooks", "secret": unpadded}, VerifyConfig), REPO, "v"
    )
    verifier.verify(make_request("hook", {}, headers=standard(key=key), raw_body=BODY))


def test_svix_header_names_are_accepted() -> None:
    verifier = compile_verifier(structure(STANDARD, VerifyConfig), REPO, "v")
    headers = {k.replace("webhook-", "svix-"): v for k, v in standard().items()}
    request = make_request("hook", {}, headers=headers, raw_body=BODY)
    verifier.verify(request)
    assert verifier.delivery_id(request) == "msg_1"


@pytest.mark.parametrize(
    ("dedupe", "message"),
    [
        ("sometimes", "must be off, provider"),
        ({"header": "X", "jsonpath": "$.id"}, "exactly one of header or jsonpath"),
        ({"jsonpath": "$[["}, "dedupe.jsonpath"),
    ],
)
def test_a_bad_dedupe_fails_at_load(rules: Rules, dedupe: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        rules.compile([{**_mapping(GITHUB), "dedupe": dedupe}])
    assert message in str(caught.value)


def test_auth_signature_needs_a_path(rules: Rules) -> None:
    mapping = _mapping({**GITHUB, "auth": "signature"})
    mapping["match"] = {"source": "x"}
    with pytest.raises(ConfigError) as caught:
        rules.compile([mapping])
    assert "verify.auth: auth: signature needs match.path" in str(caught.value)


def test_path_level_blocks_name_a_mapped_path() -> None:
    with pytest.raises(ConfigError) as caught:
        RuleSet.compile([], verify={"wake": structure(GITHUB, VerifyConfig)})
    assert "hooks.verify.wake: must name a mapped path" in str(caught.value)


def test_the_door_of_a_path_is_its_path_level_block_else_its_first_signed_rule(
    rules: Rules,
) -> None:
    ruleset = rules.compile([_mapping(GITHUB)])
    door = ruleset.door("hook")
    assert door is not None and (door.rule_id, door.path_level) == ("signed", False)
    assert not door.checks_every_request
    path_level = rules.compile(
        [_mapping(GITHUB)], verify={"/hook/": structure(STRIPE, VerifyConfig)}
    )
    door = path_level.door("hook")
    assert door is not None and door.path_level and door.checks_every_request
    assert door.verifier.name == "stripe"


def test_the_delivery_id_is_taken_only_after_verification(rules: Rules) -> None:
    ruleset = rules.compile(
        [_mapping(GITHUB), {**_mapping(None), "id": "open", "match": {"path": "o"}}]
    )
    headers = {**github(), "X-GitHub-Delivery": "d-1"}
    signed = rules.outcome(ruleset, make_request("hook", {}, headers=headers, raw_body=BODY))
    assert signed.delivery_id == "d-1"
    unsigned = rules.outcome(ruleset, make_request("o", {}, headers=headers, raw_body=BODY))
    assert unsigned.delivery_id is None  # no verify block: no provider id


# --- `sign` is the inverse of `verify` for every shared-secret scheme --------------------------

SIGNABLE = sorted(
    set(NAMES)
    - {"discord", "sendgrid", "mailgun", "msgraph", "google-pubsub", "sns", "paypal", "plaid"}
    - {"adyen", "braintree", "figma"}  # proofs inside the body
)


@pytest.mark.parametrize("scheme", SIGNABLE)
def test_what_sign_makes_verifies(scheme: str) -> None:
    block: dict[str, Any] = {"scheme": scheme, "secrets": ["current-secret", "old-secret"]}
    if scheme in ("standard-webhooks", "svix", "clerk", "resend"):
        block["secrets"] = [SW_SECRET]
    if scheme in ("hmac", "hmac-sha256"):
        block.update(header="X-Sig", prefix="sha256=")
    if SCHEMES.get(scheme) is not None and SCHEMES[scheme].key == "base64-secret":
        block["secrets"] = ["Y3VycmVudC1zZWNyZXQ=", "b2xkLXNlY3JldA=="]
    if SCHEMES.get(scheme) is not None and SCHEMES[scheme].key == "hex-secret":
        block["secrets"] = ["c0ffee00" * 4, "0badf00d" * 4]
    if scheme in ("okta", "auth0", "brevo", "monday", "atlassian-connect"):
        block["auth"] = "signature"  # they read the Authorization header
    verifier = compile_verifier(structure(block, VerifyConfig), REPO, "v")
    body = json.dumps({"webhookTimestamp": int(NOW.timestamp() * 1000), "id": "evt_1"}).encode()
    url = "https://example.com/hooks/x?token=t"
    signed = sign(verifier, body, now=NOW, delivery_id="dlv-1", url=url)
    request = make_request("x", {"id": "evt_1"}, headers=signed.headers, raw_body=body)
    request = attrs.evolve(request, url=signed.url or url)
    verifier.verify(request)
    if SCHEMES.get(scheme) is not None and SCHEMES[scheme].algorithm == "token":
        return  # a shared token (GitLab, Telegram, Cloudflare, ...): the body is not signed
    if scheme in ("monday", "atlassian-connect"):
        return  # a JWT over the request's context (and URL), not over the body
    with pytest.raises(SignatureError):
        verifier.verify(attrs.evolve(request, raw_body=body + b" "))


@pytest.mark.parametrize("scheme", ["discord", "mailgun", "msgraph"])
def test_sign_refuses_what_it_cannot_sign(scheme: str) -> None:
    block = (
        {"scheme": scheme, "publicKey": "00" * 32}
        if scheme == "discord"
        else {"scheme": scheme, "secret": "s"}
    )
    verifier = compile_verifier(structure(block, VerifyConfig), REPO, "v")
    with pytest.raises(SignError):
        sign(verifier, b"{}", now=NOW, delivery_id="d")


def test_auth_signature_on_a_block_that_does_not_guard_the_path_fails_at_load(
    rules: Rules,
) -> None:
    second = {**_mapping({**GITHUB, "auth": "signature"}), "id": "second"}
    with pytest.raises(ConfigError) as caught:
        rules.compile([_mapping(GITHUB), second])
    [issue] = caught.value.issues
    assert (issue.path, issue.rule_id) == ("hooks.mappings[1].verify.auth", "second")
    assert "must be on the block that guards the path 'hook'" in issue.message


@pytest.mark.parametrize(
    ("query", "code", "status"),
    [
        ({"hub.verify_token": "wrong", "hub.challenge": "c"}, "invalid_verify_token", 403),
        ({"hub.verify_token": "vt-1", "hub.challenge": "\x00"}, "invalid_handshake", 400),
    ],
)
def test_a_refused_handshake_is_a_typed_refusal_whose_status_the_ingress_chooses(
    query: dict[str, str], code: str, status: int
):
    from hookwise.engine.signatures import HandshakeRefused, answer

    config = structure({"scheme": "meta", "secret": SECRET, "verifyToken": "vt-1"}, VerifyConfig)
    verifier = compile_verifier(config, REPO, "verify")
    with pytest.raises(HandshakeRefused) as caught:
        answer(verifier, "GET", make_request(query={"hub.mode": "subscribe", **query}))
    refused = caught.value
    assert isinstance(refused, Refusal) and not hasattr(refused, "status")
    assert (refused.code, status_of(refused.code)) == (code, status)
