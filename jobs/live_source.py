"""`watch`'s stream of input files — traces, logs and ZooKeeper captures, by the names
`analyze` takes them — which file source lists the landing folder, with which options
(`file_source`, pure), and the stream itself (`input_files`).

Locally Spark's file source (`binaryFile`); on Databricks (config `watch.source:
auto_loader`) Auto Loader (`cloudFiles` with `cloudFiles.format` binaryFile), which lists a
volume or a bucket incrementally instead of re-listing the whole folder every trigger. Both
hand out each file once, remembered in the query's checkpoint, and read no content here.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ingest.logs import LOG_SUFFIXES
from ingest.traces import TRACE_SUFFIXES
from pulsar_audit.delta_io import Lakehouse

# The binaryFile source's own columns (a stream is never schema-inferred); `content` is not
# selected, so not read: the ingest reads each file once.
BINARY_FILE = T.StructType(
    [
        T.StructField("path", T.StringType(), False),
        T.StructField("modificationTime", T.TimestampType(), False),
        T.StructField("length", T.LongType(), False),
        T.StructField("content", T.BinaryType(), True),
    ]
)


def input_glob() -> str:
    """The file-name filter of the input files: `*.{jsonl,jsonl.gz,parquet,log,log.gz,out}`
    (ZooKeeper captures, `*.zk.jsonl`, end as traces do; which of the files are traces, logs
    of a source or captures is decided by `ingest.inputs.classify`, as for `analyze`)."""
    suffixes = ",".join(s.lstrip(".") for s in (*TRACE_SUFFIXES, *LOG_SUFFIXES))
    return f"*.{{{suffixes}}}"


def file_source(source: str, max_files: int) -> tuple[str, dict[str, str]]:
    """The stream's format and options for config `watch.source` ("files" or "auto_loader").

    Auto Loader lists subfolders by default (its globber matches `/a/b` to `/a/b/c/f`), so it
    takes no `recursiveFileLookup`; binaryFile has a fixed schema, so it needs no
    `cloudFiles.schemaLocation`. `cloudFiles.includeExistingFiles` is said explicitly: the
    files already there when a watch first starts are part of the run.
    """
    if source == "files":
        return "binaryFile", {
            "pathGlobFilter": input_glob(),
            "recursiveFileLookup": "true",
            "maxFilesPerTrigger": str(max_files),
        }
    if source == "auto_loader":
        return "cloudFiles", {
            "cloudFiles.format": "binaryFile",
            "pathGlobFilter": input_glob(),
            "cloudFiles.includeExistingFiles": "true",
            "cloudFiles.maxFilesPerTrigger": str(max_files),
        }
    raise ValueError(f"watch source {source!r}: expected 'files' or 'auto_loader'")


def input_files(lakehouse: Lakehouse, path: str, max_files: int, source: str) -> DataFrame:
    """A stream of the input files appearing under `path` through `source` (config
    `watch.source`); their content is not read here."""
    fmt, options = file_source(source, max_files)
    return (
        lakehouse.spark.readStream.format(fmt)
        .schema(BINARY_FILE)
        .options(**options)
        .load(path)
        .select("path")
    )
