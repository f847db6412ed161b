"""The `command` provider: a local program, prompt on stdin, reply on stdout.

The program is `models.providers.<id>.command`, an argv list run without a shell. Its
environment is the gateway's plus `HOOKWISE_PROVIDER`, `HOOKWISE_MODEL` (the part after
`<provider>/`) and `HOOKWISE_THINKING` (`off` when none was asked for). The prompt on stdin is
UTF-8 text, one section per message, each headed by its role in brackets on a line of its own
and separated by a blank line:

    [system]
    You are ...

    [user]
    What happened?

The reply is stdout, decoded as UTF-8 with surrounding whitespace removed; an empty stdout is an
error. A non-zero exit is an error quoting the last lines of stderr. The program (and its
process group) is killed at the deadline or at `timeoutSeconds`, whichever comes first, and when
the call is cancelled. Usage is not reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Sequence

from ....engine.config.models import ProviderConfig
from .base import (
    ChatMessage,
    Completion,
    ProviderError,
    ProviderTimeout,
    check_thinking,
)
from .transport import clip

_STDERR_LINES = 5
_STDERR_CHARS = 500


def render_prompt(messages: Sequence[ChatMessage]) -> str:
    """The stdin text for these messages (see the module docstring for the format)."""
    return "\n\n".join(f"[{m.role}]\n{m.content.rstrip()}" for m in messages) + "\n"


class CommandProvider:
    """Runs `command` once per completion."""

    def __init__(self, provider_id: str, config: ProviderConfig) -> None:
        if not config.command:
            raise ValueError(f"provider {provider_id!r}: command is required for api 'command'")
        self.provider_id = provider_id
        self._argv = tuple(config.command)
        self._timeout = config.timeout_seconds

    async def complete(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        thinking: str | None,
        deadline: float,
    ) -> Completion:
        level = check_thinking(self.provider_id, thinking) or "off"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ProviderTimeout(
                f"Provider {self.provider_id!r} was not called: the deadline had passed."
            )
        env = dict(os.environ)
        env.update(
            HOOKWISE_PROVIDER=self.provider_id, HOOKWISE_MODEL=model, HOOKWISE_THINKING=level
        )
        program = os.path.basename(self._argv[0])
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            raise ProviderError(
                f"Provider {self.provider_id!r} could not start {program!r}: "
                f"{e.strerror or type(e).__name__}."
            ) from None

        budget = min(remaining, self._timeout)
        try:
            async with asyncio.timeout(budget):
                stdout, stderr = await _exchange(proc, render_prompt(messages).encode())
        except TimeoutError:
            await _kill(proc)
            if remaining <= self._timeout:
                raise ProviderTimeout(
                    f"Provider {self.provider_id!r}: {program!r} was killed at the deadline."
                ) from None
            raise ProviderError(
                f"Provider {self.provider_id!r}: {program!r} was killed after its timeout of "
                f"{self._timeout:g} seconds."
            ) from None
        except BaseException:
            await _kill(proc)
            raise

        if proc.returncode != 0:
            raise ProviderError(
                f"Provider {self.provider_id!r}: {program!r} {_exit_text(proc.returncode)}"
                f"{_stderr_tail(stderr)}"
            )
        text = stdout.decode("utf-8", errors="replace").strip()
        if not text:
            raise ProviderError(f"Provider {self.provider_id!r}: {program!r} wrote no reply.")
        return Completion(text=text, model=model, usage=None)

    async def aclose(self) -> None:
        return None


async def _exchange(proc: asyncio.subprocess.Process, prompt: bytes) -> tuple[bytes, bytes]:
    """`proc.communicate(prompt)`, except that a program that exits without reading all of its
    prompt is judged by its exit status, not failed on the closed pipe (asyncio ignores
    BrokenPipeError there, but uvloop raises RuntimeError when the pipe closed first)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin = proc.stdin

    async def feed() -> None:
        try:
            stdin.write(prompt)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            pass  # the program stopped reading: its exit status tells what happened
        finally:
            with contextlib.suppress(Exception):
                stdin.close()

    stdout, stderr, _ = await asyncio.gather(proc.stdout.read(), proc.stderr.read(), feed())
    await proc.wait()
    return stdout, stderr


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(Exception):
        await asyncio.shield(proc.wait())


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _stderr_tail(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode("utf-8", errors="replace").splitlines()]
    tail = " | ".join([ln for ln in lines if ln][-_STDERR_LINES:])
    return f": {clip(tail, _STDERR_CHARS)}" if tail else " (no output on stderr)."
