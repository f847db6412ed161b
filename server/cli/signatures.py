"""`hookwise webhooks sign`: print the headers a provider would send with a payload;
`hookwise webhooks schemes`: the table of schemes a verify block may name (`--json`: a list).

For curl and for tests: `hookwise webhooks sign --scheme stripe --secret-file s --payload e.json`
prints `Stripe-Signature: t=...,v1=...` (one `Name: value` line per header, ready for `curl -H`).
The secret comes from `--secret-file`, the `HOOKWISE_SIGN_SECRET` environment variable, or
`--secret` (visible to other users of the machine in the process list). `rules_test_sign` is
the same signing for `hookwise rules test --sign`, with the secret of the block guarding the path.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from ...engine.config.convert import structure
from ...engine.config.mapping import VerifyConfig
from ...engine.errors import ConfigError
from ...engine.request import InboundRequest
from ...engine.rules.ruleset import RuleSet
from ...engine.signatures import NAMES, Verifier, compile_verifier
from ...engine.signatures.sign import SignError, sign

_EPILOG = """\
example (a path guarded by `auth: signature`, as GitHub's should be: no hook token; on a path
that also wants the token, add -H "Authorization: Bearer $HOOK_TOKEN"):
  hookwise webhooks sign --scheme github --secret-file gh.secret --payload push.json --curl \\
    | curl -K - "$URL/hooks/github" -H 'Content-Type: application/json' \\
        -H 'X-GitHub-Event: push' --data-binary @push.json

--curl prints a curl config (`header = "Name: value"`, and `url = "..."` for the schemes that
sign the URL: then give curl no URL of its own) for `curl -K -`, so no header is split on
its spaces.
"""


def _curl_quoted(value: str) -> str:
    """`value` as a double-quoted string of a curl config file."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t") + '"'


def _secret(args: argparse.Namespace) -> str:
    if args.secret_file:
        try:
            return Path(args.secret_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise SystemExit(
                f"hookwise: cannot read {args.secret_file}: {e.strerror or e}"
            ) from None
    value = args.secret or os.environ.get("HOOKWISE_SIGN_SECRET")
    if not value:
        raise SystemExit("hookwise: give --secret-file, HOOKWISE_SIGN_SECRET or --secret")
    return value


def _private_key(path: str) -> Any:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        return load_pem_private_key(Path(path).read_bytes(), password=None)
    except OSError as e:
        raise SystemExit(f"hookwise: cannot read {path}: {e.strerror or e}") from None
    except (ValueError, TypeError):
        raise SystemExit(f"hookwise: {path} is not an unencrypted PEM private key") from None


def _public_key_text(scheme: str, private: Any) -> str:
    """The public key of `private` as the scheme's verify block takes it."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = private.public_key()
    if isinstance(private, ed25519.Ed25519PrivateKey):
        raw = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
        return raw.hex() if scheme == "discord" else "whpk_" + base64.b64encode(raw).decode()
    if isinstance(private, ec.EllipticCurvePrivateKey):
        der = public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        return base64.b64encode(der).decode()
    raise SystemExit("hookwise: the private key must be Ed25519 or ECDSA P-256")


def cmd_sign(args: argparse.Namespace) -> int:
    try:
        body = sys.stdin.buffer.read() if args.payload == "-" else Path(args.payload).read_bytes()
    except OSError as e:
        raise SystemExit(f"hookwise: cannot read {args.payload}: {e.strerror or e}") from None
    private = None
    block: dict[str, Any] = {"scheme": args.scheme, "auth": "signature"}  # auth: no effect here
    if args.private_key_file:
        private = _private_key(args.private_key_file)
        block["publicKey"] = _public_key_text(args.scheme, private)
    elif args.scheme in ("discord", "sendgrid"):
        raise SystemExit(
            f"hookwise: the {args.scheme} scheme signs with the provider's private key:"
            " give --private-key-file (PEM)"
        )
    else:
        block["secret"] = _secret(args)
    if args.scheme in ("hmac", "hmac-sha256"):
        block.update(header=args.header or "X-Signature", prefix=args.prefix or "")
    try:
        verifier = compile_verifier(structure(block, VerifyConfig, "verify"), Path.cwd(), "verify")
        signed = sign(
            verifier,
            body,
            now=datetime.now(UTC),
            delivery_id=args.id or str(uuid.uuid4()),
            url=args.url or "",
            form=args.form,
            private_key=private,
        )
    except ConfigError as e:
        raise SystemExit(f"hookwise: {'; '.join(str(i) for i in e.issues)}") from None
    except SignError as e:
        raise SystemExit(f"hookwise: {e}") from None
    if args.curl:
        if signed.url is not None:
            print(f"url = {_curl_quoted(signed.url)}")
        for name, value in signed.headers.items():
            print(f"header = {_curl_quoted(f'{name}: {value}')}")
        return 0
    if signed.url is not None:
        print(f"# POST {signed.url}")
    for name, value in signed.headers.items():
        print(f"{name}: {value}")
    return 0


def _tolerance(row: dict[str, Any]) -> str:
    if row["timestamped"] is False:
        return "-"
    value = row["tolerance"]
    return f"{value:g}s" if value is not None else "unchecked"


def cmd_schemes(args: argparse.Namespace) -> int:
    from ...engine.signatures.catalogue import catalogue
    from .admin import table

    rows = catalogue()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    shown = [
        {
            **row,
            "name": row["name"] + (f" (= {row['aliasOf']})" if "aliasOf" in row else ""),
            "tolerance": _tolerance(row),
            "deliveryId": row["deliveryId"] or "-",
            "handshake": row["handshake"] or "-",
        }
        for row in rows
    ]
    columns = [("NAME", "name"), ("HEADERS", "headers"), ("SIGNED", "signed")]
    columns += [("ALGORITHM", "algorithm"), ("TOLERANCE", "tolerance")]
    columns += [("DELIVERY ID", "deliveryId"), ("HANDSHAKE", "handshake")]
    table(shown, columns, sys.stdout)
    return 0


def rules_test_sign(ruleset: RuleSet, request: InboundRequest, url: str | None) -> InboundRequest:
    """`request` signed with the secret of the verify block guarding its path (or of the rule
    it selects), as the provider would sign it."""
    door = ruleset.door(request.path)
    verifier: Verifier | None = door.verifier if door is not None else None
    if verifier is None:
        rule = ruleset.select(request)
        verifier = rule.verifier if rule is not None else None
    if verifier is None:
        raise SystemExit(f"hookwise: --sign: no verify block guards the path {request.path!r}")
    ctype = request.headers.get("content-type", "")
    try:
        signed = sign(
            verifier,
            request.raw_body,
            now=request.now or datetime.now(UTC),
            delivery_id=f"rules-test-{uuid.uuid4()}",
            url=url or f"https://localhost/hooks/{request.path}",
            form=ctype.startswith("application/x-www-form-urlencoded"),
        )
    except SignError as e:
        raise SystemExit(f"hookwise: --sign: {e}") from None
    headers = {**request.headers, **{k.lower(): v for k, v in signed.headers.items()}}
    final_url = signed.url or url or f"https://localhost/hooks/{request.path}"
    return attrs.evolve(request, headers=headers, url=final_url)


def add_cli(providers: Any) -> None:
    """Add `sign` and `schemes` under `hookwise webhooks`."""
    listing = providers.add_parser(
        "schemes",
        help="list the signature schemes a verify block may name",
        description="The signature schemes a verify block may name: the headers each reads, "
        "what it signs, its algorithm, the default tolerance of its signed timestamp, the "
        "delivery id that deduplicates retries, and the handshake hookwise answers.",
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="a JSON list of objects (name, headers, signed, algorithm, encoding, tolerance, "
        "timestamped, deliveryId, handshake, key, doc; aliasOf for an alias)",
    )
    listing.set_defaults(func=cmd_schemes)
    p = providers.add_parser(
        "sign",
        help="print the headers a provider would send with a payload",
        description="Sign a payload as the provider of SCHEME would and print the headers it "
        "would send, one 'Name: value' per line.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scheme", required=True, choices=NAMES, metavar="SCHEME")
    p.add_argument("--payload", required=True, metavar="FILE", help="the body ('-' reads stdin)")
    p.add_argument("--secret-file", metavar="FILE", help="a file holding the secret")
    p.add_argument("--secret", help="the secret (prefer --secret-file or HOOKWISE_SIGN_SECRET)")
    p.add_argument(
        "--private-key-file",
        metavar="FILE",
        help="discord, sendgrid, standard-webhooks (v1a): a PEM private key (Ed25519, or ECDSA "
        "P-256 for sendgrid) to sign with, e.g. a pair made for a test",
    )
    p.add_argument("--url", help="the URL the provider calls (twilio, square)")
    p.add_argument("--id", help="the delivery id to send (default: a random UUID)")
    p.add_argument("--form", action="store_true", help="the body is a form (twilio)")
    p.add_argument("--header", help="hmac: the signature header (default X-Signature)")
    p.add_argument("--prefix", help="hmac: the text before the digest, e.g. sha256=")
    p.add_argument(
        "--curl", action="store_true", help="print a curl config for `curl -K -` (see below)"
    )
    p.set_defaults(func=cmd_sign)
