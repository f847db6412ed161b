"""Senders, as budgets by sender (`budget: {by: sender}`) count them: who the door verified.

A run's `sender` (migration 0026) is stamped when its request is accepted, from what authenticated
it, never from what it says about itself: `<scheme>#<n>` when a `verify` block's signature
checked it (the scheme, and the index of the secret that matched in the block's `secrets`; the
scheme alone for a public key), `token` for the hook token, `source:<name>` for a message of a
broker source without a signature, `replay` for an operator's replay. So a sender key is one of
a set the configuration bounds, never a payload's value, and never a secret.

A budget by sender gives each sender its own allowance: its spend is summed from the model calls
of that sender's runs (`model_calls.sender`, and the running totals of kinds `mapping-sender` and
`agent-sender` in `budget_usage`, named `<mapping or agent>/<sender>`), and a sender past it is
held by a pause of the same kind and name, which holds only that sender's runs of the mapping
or agent. Runs from before the migration have no sender: they count as `none`.
"""

from __future__ import annotations

#: the sender of a request authenticated by the hook token (no signature checked)
TOKEN_SENDER = "token"
#: the sender of a run an operator replayed from a kept request
REPLAY_SENDER = "replay"
#: what a run without a sender (from before migration 0026) counts as
NO_SENDER = "none"
#: the longest sender key kept (they come from the configuration: far shorter in practice)
MAX_SENDER = 120

#: the scope kind of a budget by sender, by the kind of the budget it divides
SENDER_KIND: dict[str, str] = {"mapping": "mapping-sender", "agent": "agent-sender"}
#: the budget's kind of a scope kind by sender
BASE_KIND: dict[str, str] = {v: k for k, v in SENDER_KIND.items()}
#: SQL over `runs` or `model_calls`: the name a by-sender scope gives a row (NULL: none)
SENDER_NAME_SQL: dict[str, str] = {
    "mapping-sender": "rule_id || '/' || COALESCE(sender, 'none')",
    "agent-sender": "agent_id || '/' || COALESCE(sender, 'none')",
}


def source_sender(source: str) -> str:
    """The sender of a broker source's message that no signature checked."""
    return bounded(f"source:{source}")


def bounded(sender: str) -> str:
    """`sender` cut to `MAX_SENDER` characters, without `/` (which ends a scope's name)."""
    return sender.replace("/", "_")[:MAX_SENDER]


def scope_name(name: str, sender: str | None) -> str:
    """The name of the by-sender scope of `sender` in the mapping or agent `name`."""
    return f"{name}/{sender or NO_SENDER}"


def split_name(scoped: str) -> tuple[str, str]:
    """(mapping or agent, sender) of a by-sender scope's name (a sender holds no `/`)."""
    name, _, sender = scoped.rpartition("/")
    return name, sender
