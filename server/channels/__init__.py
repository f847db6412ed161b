"""Delivery of text to messaging channels: the `Channel` contract, the adapters, the registry.

`load_channels(config["channels"])` builds the configured channels; the delivery worker calls
`channel.send(client, to, text)` and gets a `SendResult` or a `DeliveryError` saying whether to
retry. Adapters live one per module; plugins add more through the `hookwise.channels` entry points.
"""

from .base import Channel, DeliveryError, SendResult
from .registry import (
    ALIASES,
    ChannelSpec,
    available_channels,
    canonical_id,
    load_channels,
)

__all__ = [
    "ALIASES",
    "Channel",
    "ChannelSpec",
    "DeliveryError",
    "SendResult",
    "available_channels",
    "canonical_id",
    "load_channels",
]
