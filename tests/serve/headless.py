"""Headless Chromium (Debian's package) behind a proxy that records and refuses every request.

Every request, to anywhere (loopback included), has to go through the proxy, which answers
none. The browser itself still calls its vendor's services (component updates, accounts)
whatever the flags, so a page is judged by the hosts it adds to those of a blank page.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlsplit

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
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--no-pings",
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate,"
    "AutofillServerCommunication,CertificateTransparencyComponentUpdater",
]


class RefusingProxy:
    """A loopback listener that records each request line made to it, then closes."""

    def __init__(self) -> None:
        self.requests: list[str] = []
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
            conn.settimeout(2)
            try:
                first = conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
            except OSError:
                first = "(connection without a request)"
            self.requests.append(first)
            conn.close()

    def hosts(self) -> set[str]:
        """The hosts asked for so far ('CONNECT h:443' or 'GET http://h/...')."""
        found = set()
        for line in self.requests:
            parts = line.split()
            if len(parts) < 2:
                found.add(line)
            elif parts[0] == "CONNECT":
                found.add(parts[1].rsplit(":", 1)[0])
            else:
                found.add(urlsplit(parts[1]).hostname or parts[1])
        return found

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
