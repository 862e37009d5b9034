"""What a log pattern is, and the regex pieces patterns share (pipelines.log_patterns*)."""

from __future__ import annotations

import re
from dataclasses import dataclass

SERVER = ("broker", "bookie")  # standalone writes broker and bookie lines to one file
CLIENT = ("client",)
JAVA_CLIENT = ("client", "broker")  # the broker embeds a Java client (system topics)

# a quote ends a topic too: the Go client writes `topic="persistent://…"`
TOPIC = r"(?P<topic>(?:non-)?persistent://[^\s\],}\"]+)"
ML = r"(?P<ml>[^\s\[\]/]+/[^\s\[\]/]+/(?:non-)?persistent/[^\s\]]+)"
BUNDLE = r"(?P<bundle>[^\s\[\](),]+/0x[0-9a-f]{8}_0x[0-9a-f]{8})"
LEDGER = r"(?P<ledger_id>\d+)"
COLUMN_GROUPS = ("topic", "ml", "bundle", "ledger_id", "bookie")


@dataclass(frozen=True)
class LogPattern:
    """One known message text: which event it is, whose logs hold it, and where it comes from.

    source: the source file(s) and versions the text was read from, for patterns derived from
    the projects' sources (notes says what was seen in real logs).
    """

    event_type: str
    sources: tuple[str, ...]
    logger: str
    message: str
    notes: str = ""
    source: str = ""

    def groups(self) -> dict[str, int]:
        """Named group → group number (Spark's regexp_extract takes numbers)."""
        return dict(re.compile(self.message).groupindex)

    def java_message(self) -> str:
        """The message regex for Java (Spark): named groups become plain numbered groups."""
        return re.sub(r"\(\?P<\w+>", "(", self.message)


def cls(*names: str) -> str:
    """Logger regex for classes by simple name (any package)."""
    return rf"(?:^|\.)(?:{'|'.join(names)})$"


def java_cls(*names: str) -> str:
    """Logger regex for Java classes: a package is required (C++ loggers are bare file names)."""
    return rf"\.(?:{'|'.join(names)})$"


def cpp_file(*names: str) -> str:
    """Logger regex for the C++ client's source file base names (no package)."""
    return rf"^(?:{'|'.join(names)})$"
