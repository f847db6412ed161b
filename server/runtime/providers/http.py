"""What the HTTP model providers (OpenAI-compatible, Anthropic) share: the endpoint, the
headers, the per-request timeout, the retry policy and the client they own, and one call made
of retried POSTs within the run's deadline. Each protocol module builds its request body and
reads its own answers (`_parse`)."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from ....engine.config.models import ProviderConfig
from ...version import outbound_client
from .base import Completion
from .retry import RetryPolicy
from .transport import post_json


class HttpProvider:
    """An HTTP chat endpoint. Owns its `httpx.AsyncClient` unless one is given."""

    def __init__(
        self,
        provider_id: str,
        config: ProviderConfig,
        *,
        url: str,
        headers: Mapping[str, str],
        client: httpx.AsyncClient | None,
        retry: RetryPolicy | None,
    ) -> None:
        self.provider_id = provider_id
        self._url = url
        # the configured headers last: they may replace any of the protocol's own
        self._headers = {**headers, **{k.lower(): v for k, v in config.headers.items()}}
        self._timeout = config.timeout_seconds
        self._retry = retry or RetryPolicy(max_retries=config.max_retries)
        self._client = client or outbound_client()

    async def _call(
        self, body: object, model: str, *, deadline: float, retries: bool = True
    ) -> Completion:
        """POST `body`, retried by the policy within `deadline` (once only without `retries`:
        a fallback chain with a next model moves on instead); the answer `_parse`d."""

        async def attempt() -> Completion:
            response = await post_json(
                self._client,
                self._url,
                provider_id=self.provider_id,
                headers=self._headers,
                body=body,
                deadline=deadline,
                timeout_seconds=self._timeout,
            )
            return self._parse(response, model)

        if not retries:
            return await attempt()
        return await self._retry.run(attempt, deadline=deadline)

    def _parse(self, response: httpx.Response, model: str) -> Completion:
        raise NotImplementedError

    async def aclose(self) -> None:
        await self._client.aclose()
