"""Which channels exist and building the configured ones.

Ten channels are built in (`webhook` posts signed webhooks, `github` and `gitlab` comment); more come from plugins, found
through the Python entry-point group `hookwise.channels` (the entry point's name is the channel
id, its object a `Channel` class). Mattermost is such a plugin. A plugin cannot replace a built-in channel. Aliases (`imsg`,
`teams`, from `hookwise.engine.config.channels.ALIASES`) are accepted wherever a channel id is.

`load_channels(config)` builds the channels configured under `channels`, raising `ConfigError`
with every problem and its key path (`channels.telegram.botToken: required key is missing`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any, Literal

import attrs

from ...engine.config.channels import ALIASES
from ...engine.errors import ConfigError, ConfigIssue
from .base import Channel
from .discord import DiscordChannel
from .github import GitHubChannel
from .gitlab import GitLabChannel
from .imessage import IMessageChannel
from .msteams import MSTeamsChannel
from .signal import SignalChannel
from .slack import SlackChannel
from .telegram import TelegramChannel
from .webhook import WebhookChannel
from .whatsapp import WhatsAppChannel

ENTRY_POINT_GROUP = "hookwise.channels"

BUILTIN: dict[str, type] = {
    "whatsapp": WhatsAppChannel,
    "telegram": TelegramChannel,
    "discord": DiscordChannel,
    "slack": SlackChannel,
    "signal": SignalChannel,
    "imessage": IMessageChannel,
    "msteams": MSTeamsChannel,
    "webhook": WebhookChannel,
    "github": GitHubChannel,
    "gitlab": GitLabChannel,
}


@attrs.frozen
class ChannelSpec:
    """A channel hookwise knows: its id, where it comes from, and how to get its class.

    For a plugin, `entry_point` is the entry point's value (`module:attr`) and `distribution` the
    name of the package that declares it; the class is imported on first `load()`.
    """

    id: str
    origin: Literal["builtin", "plugin"]
    _load: Callable[[], Any] = attrs.field(repr=False)
    entry_point: str | None = None
    distribution: str | None = None

    def load(self) -> type:
        return self._load()


def available_channels() -> dict[str, ChannelSpec]:
    """Every known channel by canonical id: the built-ins, then plugins (read afresh each call)."""
    specs = {cid: ChannelSpec(cid, "builtin", _constant(cls)) for cid, cls in BUILTIN.items()}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cid = ep.name.strip().lower()
        if cid in specs or cid in ALIASES:
            continue  # a plugin cannot shadow a built-in channel or an alias
        dist = ep.dist.name if ep.dist is not None else None
        specs[cid] = ChannelSpec(cid, "plugin", ep.load, entry_point=ep.value, distribution=dist)
    return specs


def canonical_id(name: str, known: Mapping[str, ChannelSpec] | None = None) -> str | None:
    """The canonical id for a channel name or alias (case-insensitive), or None if unknown."""
    known = available_channels() if known is None else known
    cid = name.strip().lower()
    cid = ALIASES.get(cid, cid)
    return cid if cid in known else None


def load_channels(config: Mapping[str, Mapping[str, Any]]) -> dict[str, Channel]:
    """Build the channels configured under `channels`, keyed by canonical id.

    Raises `ConfigError` listing every problem: unknown channel names (with a suggestion), a
    channel configured twice (once by its alias), settings that are missing, unknown or invalid,
    and plugins that fail to import or do not provide a channel class.
    """
    if not isinstance(config, Mapping):
        raise ConfigError([ConfigIssue("channels", "must be a mapping of channel id to settings")])
    known = available_channels()
    issues: list[ConfigIssue] = []
    channels: dict[str, Channel] = {}
    seen: dict[str, str] = {}
    for name, settings in config.items():
        path = f"channels.{name}"
        cid = canonical_id(str(name), known)
        if cid is None:
            names = [*known, *ALIASES]
            hint = difflib.get_close_matches(str(name).lower(), names, n=1, cutoff=0.6)
            more = (
                f"; did you mean {hint[0]!r}?" if hint else f"; known: {', '.join(sorted(known))}"
            )
            issues.append(ConfigIssue(path, "unknown channel" + more))
            continue
        if cid in seen:
            message = f"configures the same channel as channels.{seen[cid]}"
            issues.append(ConfigIssue(path, message))
            continue
        seen[cid] = str(name)
        try:
            cls = _channel_class(known[cid], cid, path)
            channel = cls.from_config(settings, path)
        except ConfigError as exc:
            issues.extend(exc.issues)
            continue
        channels[cid] = channel
    if issues:
        raise ConfigError(issues)
    return channels


def _channel_class(spec: ChannelSpec, cid: str, path: str) -> Any:
    try:
        cls = spec.load()
    except Exception as exc:
        message = f"the plugin {spec.entry_point} ({spec.distribution}) failed to load: {exc!r}"
        raise ConfigError([ConfigIssue(path, message)]) from None
    missing = [a for a in ("from_config", "validate_recipient", "send") if not hasattr(cls, a)]
    if missing or not isinstance(getattr(cls, "max_chars", None), int):
        message = f"the plugin {spec.entry_point} does not provide a channel class"
        raise ConfigError([ConfigIssue(path, message)])
    if getattr(cls, "id", None) != cid:
        message = f"the plugin {spec.entry_point} names its channel {getattr(cls, 'id', None)!r}, not {cid!r}"
        raise ConfigError([ConfigIssue(path, message)])
    return cls


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


__all__ = [
    "ALIASES",
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "ChannelSpec",
    "available_channels",
    "canonical_id",
    "load_channels",
]
