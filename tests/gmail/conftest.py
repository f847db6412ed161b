"""Fixtures for the mail watcher: a real Dovecot on loopback, a recording hook receiver, and a
watcher running on its own thread.

Dovecot (Debian's `dovecot-imapd`) is started in the foreground (`dovecot -F`) with a throw-away
config, mail dir and passwd-file user under a fresh temp dir, on a free port of 127.0.0.1, plain
IMAP (`ssl = no`). As root, the login processes run as `dovenull` and the mail processes as
`nobody` (Dovecot refuses root for both); otherwise everything runs as the current user. The
tests skip only when the `dovecot` binary is absent.

`Receiver` is a small threaded HTTP server that records every request and answers with a
programmable status; it is reusable for the gateway integration test.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import pytest
from imapclient import IMAPClient

from hookwise.engine.config.convert import structure
from hookwise.engine.config.gmail import GmailConfig
from hookwise.server.gmail.watcher import run_watcher

DOVECOT = shutil.which("dovecot") or (
    "/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None
)
ACCOUNT = "alice@example.com"
PASSWORD = "correct horse battery staple"
HOOK_TOKEN = "test-hook-token-0123456789abcdefghij"

requires_dovecot = pytest.mark.skipif(
    DOVECOT is None, reason="dovecot is not installed (apt-get install dovecot-imapd)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `predicate` until truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# -- Dovecot ------------------------------------------------------------------------------------

_CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login xoauth2
auth_failure_delay = 0
default_internal_user = {internal_user}
default_internal_group = {internal_group}
default_login_user = {login_user}
first_valid_uid = 0
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={mail_uid} gid={mail_gid} home={root}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
  chroot =
}}
service anvil {{
  chroot =
}}
service auth {{
  user = {auth_user}
}}
namespace inbox {{
  inbox = yes
  mailbox Junk {{
    special_use = \\Junk
    auto = create
  }}
  mailbox Trash {{
    special_use = \\Trash
    auto = create
  }}
  mailbox Drafts {{
    special_use = \\Drafts
    auto = create
  }}
  mailbox Sent {{
    special_use = \\Sent
    auto = create
  }}
  mailbox Papierkorb {{
    special_use = \\Trash
    auto = create
  }}
}}
"""


class Dovecot:
    """A throw-away Dovecot IMAP server on 127.0.0.1 with one user, ACCOUNT / PASSWORD."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.host = "127.0.0.1"
        self._proc: subprocess.Popen[bytes] | None = None
        self._write_config()

    def _write_config(self) -> None:
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            login = "dovenull" if _user_exists("dovenull") else "nobody"
            internal = "dovecot" if _user_exists("dovecot") else "nobody"
            ids = dict(
                internal_user=internal,
                internal_group=grp.getgrgid(pwd.getpwnam(internal).pw_gid).gr_name,
                login_user=login,
                mail_uid=nobody.pw_uid,
                mail_gid=nobody.pw_gid,
                auth_user="root",
            )
        else:
            me = pwd.getpwuid(os.getuid())
            ids = dict(
                internal_user=me.pw_name,
                internal_group=grp.getgrgid(os.getgid()).gr_name,
                login_user=me.pw_name,
                mail_uid=me.pw_uid,
                mail_gid=me.pw_gid,
                auth_user=me.pw_name,
            )
        (self.root / "dovecot.conf").write_text(
            _CONFIG.format(root=self.root, port=self.port, **ids)
        )
        (self.root / "passwd").write_text(f"{ACCOUNT}:{{PLAIN}}{PASSWORD}\n")
        for sub in ("mail", "home"):
            d = self.root / sub
            d.mkdir(exist_ok=True)
            os.chown(d, ids["mail_uid"], ids["mail_gid"])

    def start(self) -> None:
        assert DOVECOT is not None
        self._proc = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.root / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while True:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise RuntimeError(f"dovecot exited: {err}\n{self.log()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as s:
                    s.settimeout(2)
                    if s.recv(100).startswith(b"* OK"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("dovecot did not start:\n" + self.log())
            time.sleep(0.05)

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5)
        if self._proc.stderr:
            self._proc.stderr.close()
        self._proc = None
        wait_for(lambda: not _listening(self.host, self.port), 10, "dovecot's port to close")

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        try:
            return (self.root / "dovecot.log").read_text(errors="replace")
        except OSError:
            return ""

    def client(self) -> IMAPClient:
        c = IMAPClient(self.host, port=self.port, ssl=False, timeout=10)
        c.login(ACCOUNT, PASSWORD)
        return c

    def append(
        self, raw: bytes, folder: str = "INBOX", flags: tuple[str, ...] = ()
    ) -> tuple[int, int]:
        """APPEND a message; returns (UIDVALIDITY, UID) from the APPENDUID answer."""
        with contextlib.closing(_Closing(self.client())) as c:
            answer = c.client.append(folder, raw, flags=flags)
        m = re.search(rb"APPENDUID (\d+) (\d+)", answer)
        assert m, answer
        return int(m.group(1)), int(m.group(2))

    def create_folder(self, name: str) -> None:
        with contextlib.closing(_Closing(self.client())) as c:
            c.client.create_folder(name)

    def delete_folder(self, name: str) -> None:
        with contextlib.closing(_Closing(self.client())) as c:
            c.client.delete_folder(name)

    def gmail_config(self, **overrides: Any) -> GmailConfig:
        """A GmailConfig for this server, structured like the config loader does."""
        data: dict[str, Any] = {
            "account": ACCOUNT,
            "imapHost": self.host,
            "imapPort": self.port,
            "tls": "none",
            "password": PASSWORD,
            "timeoutSeconds": 10,
            "reconnectMinSeconds": 0.1,
            "reconnectMaxSeconds": 0.5,
            "retryMinSeconds": 0.1,
            "retryMaxSeconds": 0.3,
        }
        data.update(overrides)
        data = {k: v for k, v in data.items() if v is not None}
        return structure(data, GmailConfig, "hooks.gmail")


class _Closing:
    def __init__(self, client: IMAPClient) -> None:
        self.client = client

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.logout()


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def dovecot() -> Iterator[Dovecot]:
    if DOVECOT is None:
        pytest.skip("dovecot is not installed (apt-get install dovecot-imapd)")
    # Not under pytest's tmp_path: its 0700 parents would keep Dovecot's unprivileged
    # login and mail processes out.
    root = Path(tempfile.mkdtemp(prefix="hookwise-dovecot-"))
    root.chmod(0o755)
    server = Dovecot(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- the hook receiver --------------------------------------------------------------------------


@attrs.frozen
class Received:
    """One request the receiver got, and the status it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int


class Receiver:
    """A recording HTTP server on 127.0.0.1. `respond` picks each answer's status (default 202)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.requests: list[Received] = []
        self.respond: Callable[[Received], int] = lambda _r: 202
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                headers = {k.lower(): v for k, v in self.headers.items()}
                probe = Received("POST", self.path, headers, body, 0)
                status = receiver.respond(probe)
                with receiver._lock:
                    receiver.requests.append(attrs.evolve(probe, status=status))
                out = json.dumps({"ok": 200 <= status < 300}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def accepted(self) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if 200 <= r.status < 300]

    def all(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    def wait_accepted(self, n: int, timeout: float = 20.0) -> list[Received]:
        wait_for(lambda: len(self.accepted()) >= n, timeout, f"{n} accepted POSTs")
        return self.accepted()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    try:
        yield r
    finally:
        r.stop()


# -- the watcher on a thread --------------------------------------------------------------------


class WatcherThread:
    """`run_watcher` on its own event loop and thread, stoppable from the test."""

    def __init__(
        self, config: GmailConfig, hook_url: str, state_dir: Path, token: str = HOOK_TOKEN
    ):
        self.config = config
        self.hook_url = hook_url
        self.state_dir = state_dir
        self.token = token
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await run_watcher(
                self.config,
                hook_url=self.hook_url,
                hook_token=self.token,
                state_dir=self.state_dir,
                stop=self._stop,
            )

        try:
            asyncio.run(main())
        except BaseException as e:
            self.error = e
        finally:
            self._ready.set()

    def start(self) -> WatcherThread:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self, timeout: float = 20.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the watcher did not stop"

    def join(self, timeout: float = 20.0) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


def checkpoint_file(state_dir: Path) -> Path | None:
    files = sorted((state_dir / "gmail").glob("*.json")) if (state_dir / "gmail").exists() else []
    return files[0] if files else None


def read_checkpoint(state_dir: Path) -> dict[str, Any]:
    path = checkpoint_file(state_dir)
    assert path is not None, "no checkpoint written"
    return json.loads(path.read_text())


@pytest.fixture
def start_watcher(tmp_path: Path) -> Iterator[Callable[..., WatcherThread]]:
    """Start a watcher (state in tmp_path/state) and wait until it has its checkpoint."""
    running: list[WatcherThread] = []

    def start(config: GmailConfig, hook_url: str, *, wait_ready: bool = True) -> WatcherThread:
        state = tmp_path / "state"
        w = WatcherThread(config, hook_url, state).start()
        running.append(w)
        if wait_ready:
            wait_for(
                lambda: checkpoint_file(state) is not None or not w.alive,
                20,
                "the watcher's first checkpoint",
            )
            if w.error is not None:
                raise w.error
        return w

    yield start
    for w in running:
        w.stop()
