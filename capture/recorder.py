"""One client's stream of trace events: fills the required fields, ts and event_index."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from capture.spool import Spool


class Recorder:
    """Emits trace format v1 events of one client (producer, consumer or the run itself).

    `event_index` numbers the client's events in the order they were recorded; `ts` is epoch
    milliseconds with microsecond fraction, taken under the same lock so both agree.
    first_index: where `event_index` starts (a consumer started again under its name goes on
    from its previous process's last event).
    """

    def __init__(
        self, spool: Spool, run_id: str, topic: str, role: str, client: str, first_index: int = 0
    ):
        self.spool = spool
        self.base = {"run_id": run_id, "topic": topic, "role": role, "client": client}
        self.count = first_index
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: object) -> None:
        with self._lock:
            record = {
                **self.base,
                "event": event,
                "ts": round(time.time() * 1000, 3),
                "event_index": self.count,
                **{key: value for key, value in fields.items() if value is not None},
            }
            self.count += 1
            self.spool.write(record)

    @staticmethod
    def factory(spool: Spool, run_id: str) -> Callable[[str, str, str], Recorder]:
        """A maker of recorders for (topic, role, client) on the same spool and run."""
        return lambda topic, role, client: Recorder(spool, run_id, topic, role, client)
