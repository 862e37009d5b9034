"""Where a log entry begins, shared by the ingest that folds continuation lines into their
entry (ingest/log_format.py) and the capture harness that rolls logs in whole entries
(capture/runlogs.py). No Spark."""

# A line that starts with a date: the Java (log4j) and C++ clients' layouts.
STARTS_WITH_DATE = r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d"
# A line of Go's logrus layout: `time="…" level=… msg=…`.
STARTS_GO_ENTRY = r"^time="
