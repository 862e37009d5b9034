"""The admin REST calls the harness makes, against a real HTTP server that records them
(no Pulsar: what goes on the wire is the contract)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from capture.admin import Admin, AdminError, TopicName


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, str, object]], list[int]]]:
    """A real HTTP server answering every request with the next status of `statuses` (204 once
    they run out); each request as (method, path, JSON body)."""
    seen: list[tuple[str, str, object]] = []
    statuses: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802 - the http.server protocol
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            seen.append((self.command, self.path, body))
            self.send_response(statuses.pop(0) if statuses else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen, statuses
    finally:
        server.shutdown()
        server.server_close()


def test_create_subscription_puts_the_latest_position_as_pulsar_admin_does(recorder) -> None:  # noqa: ANN001
    """apache/pulsar#18236's first step, `pulsar-admin topics create-subscription -s abc t`:
    a PUT of the subscription with MessageId.latest (ledger and entry Long.MAX_VALUE)."""
    url, seen, statuses = recorder
    admin = Admin(url)
    admin.create_subscription(TopicName.parse("persistent://public/default/t1"), "abc")
    latest = 2**63 - 1
    assert seen == [
        (
            "PUT",
            "/admin/v2/persistent/public/default/t1/subscription/abc",
            {"ledgerId": latest, "entryId": latest, "partitionIndex": -1},
        )
    ]
    statuses.append(409)  # the subscription exists already: an error naming the call
    with pytest.raises(AdminError, match="PUT .*/subscription/abc: HTTP 409"):
        admin.create_subscription(TopicName.parse("t1"), "abc")
