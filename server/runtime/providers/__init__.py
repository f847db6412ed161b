"""Model providers: one wire protocol per module, behind the `Provider` protocol in `base`.

`registry.Providers` builds them from `models.providers` and resolves `<provider>/<model>`.
"""

from .base import (
    THINKING_LEVELS,
    ChatMessage,
    Completion,
    Provider,
    ProviderError,
    ProviderTimeout,
    Usage,
)
from .registry import Providers

__all__ = [
    "THINKING_LEVELS",
    "ChatMessage",
    "Completion",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "Providers",
    "Usage",
]
