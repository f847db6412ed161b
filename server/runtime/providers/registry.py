"""The configured providers by id, and the resolution of `<provider>/<model>` to one of them.

`Providers.from_config` builds one provider per `models.providers.<id>` (each HTTP provider with
its own `httpx.AsyncClient`), plus the built-in `echo` provider, always present under id `echo`.
API keys come from `apiKey` or from `apiKeyFile` (relative to the config file's directory).
Configuration problems raise `ConfigError` with the key path; an unknown provider at call time is
a `ProviderError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import httpx

from ....engine.config.models import ModelsConfig, ProviderConfig
from ....engine.errors import ConfigError, ConfigIssue
from ...version import outbound_client
from .anthropic import AnthropicProvider
from .base import Provider, ProviderError
from .command import CommandProvider
from .echo import EchoProvider
from .openai import OpenAIProvider
from .retry import RetryPolicy

ECHO_ID = "echo"


class Providers:
    """The providers by id; `resolve` picks one for a model reference."""

    def __init__(self, providers: Mapping[str, Provider]) -> None:
        self._providers = dict(providers)
        self._providers.setdefault(ECHO_ID, EchoProvider())

    @classmethod
    def from_config(
        cls,
        config: ModelsConfig,
        *,
        base_dir: Path | None = None,
        retry: RetryPolicy | None = None,
    ) -> Providers:
        """Build every configured provider. `retry` overrides each provider's retry policy."""
        issues: list[ConfigIssue] = []
        usable: list[tuple[str, ProviderConfig, str | None]] = []
        for pid, pc in config.providers.items():
            path = f"models.providers.{pid}"
            if not pid or "/" in pid:
                issues.append(ConfigIssue(path, "a provider id must be non-empty and without '/'"))
            elif pid == ECHO_ID and pc.api != "echo":
                issues.append(ConfigIssue(path, "the id 'echo' is reserved for the echo provider"))
            elif pc.api == "command" and not pc.command:
                issues.append(ConfigIssue(f"{path}.command", "is required when api is 'command'"))
            elif pc.max_tokens is not None and pc.max_tokens < 1:
                issues.append(ConfigIssue(f"{path}.maxTokens", "must be at least 1"))
            else:
                usable.append((pid, pc, _api_key(pc, path, base_dir or Path.cwd(), issues)))
        if issues:
            raise ConfigError(issues)
        return cls({pid: _build(pid, pc, key, retry) for pid, pc, key in usable})

    @property
    def ids(self) -> tuple[str, ...]:
        """The provider ids, sorted."""
        return tuple(sorted(self._providers))

    def get(self, provider_id: str) -> Provider | None:
        return self._providers.get(provider_id)

    def resolve(self, model_ref: str) -> tuple[Provider, str]:
        """Split `<provider>/<model>` and return the provider and the model name."""
        provider_id, sep, model = model_ref.partition("/")
        if not sep or not provider_id or not model:
            raise ProviderError(f"Model {model_ref!r} is not of the form <provider>/<model>.")
        provider = self._providers.get(provider_id)
        if provider is None:
            raise ProviderError(
                f"Model {model_ref!r} names the unknown provider {provider_id!r}; "
                f"configured providers: {', '.join(self.ids)}."
            )
        return provider, model

    async def aclose(self) -> None:
        """Close every provider (their HTTP clients), even if one fails to close."""
        errors: list[BaseException] = []
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]


def _api_key(
    pc: ProviderConfig, path: str, base_dir: Path, issues: list[ConfigIssue]
) -> str | None:
    if not pc.api_key_file:
        return pc.api_key
    if pc.api_key:
        issues.append(ConfigIssue(f"{path}.apiKeyFile", "give apiKey or apiKeyFile, not both"))
        return None
    p = Path(pc.api_key_file)
    if not p.is_absolute():
        p = base_dir / p
    try:
        value = p.read_text(encoding="utf-8").strip()
    except OSError as e:
        issues.append(ConfigIssue(f"{path}.apiKeyFile", f"cannot read {p}: {e.strerror}"))
        return None
    if not value:
        issues.append(ConfigIssue(f"{path}.apiKeyFile", f"{p} is empty"))
        return None
    return value


def _build(pid: str, pc: ProviderConfig, key: str | None, retry: RetryPolicy | None) -> Provider:
    if pc.api == "echo":
        return EchoProvider()
    if pc.api == "command":
        return CommandProvider(pid, pc)
    if retry is not None:
        retry = RetryPolicy(
            max_retries=pc.max_retries,
            base_delay=retry.base_delay,
            max_delay=retry.max_delay,
            sleep=retry.sleep,
            random=retry.random,
        )
    client = outbound_client(limits=httpx.Limits(max_connections=32, max_keepalive_connections=8))
    if pc.api == "anthropic":
        return AnthropicProvider(pid, pc, api_key=key, client=client, retry=retry)
    return OpenAIProvider(pid, pc, api_key=key, client=client, retry=retry)
