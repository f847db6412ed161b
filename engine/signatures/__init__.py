"""Providers at the door: signature schemes as data, verified, rotated, deduplicated generically.

- `core`: the generic machinery (`Scheme`, `Verifier`, HMAC/token/Ed25519/ECDSA checks,
  timestamps, delivery ids).
- `schemes`: every provider's scheme as a small description, registered by name.
- `handshakes`: the verification handshakes the gateway answers itself.
- `compile`: a verify block -> a `Verifier`, every problem with its key path.
- `sign`: what a provider would send (for `hookwise webhooks sign` and tests).
"""

from .compile import compile_verifier
from .core import DEFAULT_TOLERANCE, Scheme, SignatureError, Verifier
from .handshakes import (
    HandshakeAnswer,
    HandshakeRefused,
    answer,
    answers_get,
)
from .schemes import ALIASES, NAMES, SCHEMES

__all__ = [
    "ALIASES",
    "DEFAULT_TOLERANCE",
    "NAMES",
    "SCHEMES",
    "HandshakeAnswer",
    "HandshakeRefused",
    "Scheme",
    "SignatureError",
    "Verifier",
    "answer",
    "answers_get",
    "compile_verifier",
]
