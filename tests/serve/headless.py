"""Headless Chromium (Debian's package) behind a proxy that refuses and counts every connection.

Every request the page makes, to anywhere (loopback included), has to go through the proxy;
the proxy accepts nothing, so a page that loads only from itself shows no connection at all.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from pathlib import Path

CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]


class RefusingProxy:
    """A loopback listener that records and closes every connection made to it."""

    def __init__(self) -> None:
        self.connections = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._sock.close()


def run_chromium(
    page: Path, profile: Path, proxy: RefusingProxy, *args: str, timeout_s: float = 180
) -> subprocess.CompletedProcess:
    """Open `page` (a local file) with a fresh profile and every request sent to `proxy`."""
    command = [
        CHROMIUM,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--proxy-server=http://127.0.0.1:{proxy.port}",
        "--proxy-bypass-list=<-loopback>",
        *args,
        page.resolve().as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
