"""What the reliability suites share: a small capture folder with every kind of input, a test
config, one clean reference run over it, `analyze` in a child process (to kill it), and an
order-free digest of every table.

The digest is computed in Spark: one job over every table, one row per table.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from literal_runs import RunSpec, write_run
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_audit.config import Config, load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import TABLES

ROOT = Path(__file__).resolve().parents[2]
UNLOAD_RUN = ROOT / "examples" / "unload-run"
CONF_LOCAL = ROOT / "conf" / "local.yaml"
FIGURES_VAR = "PULSAR_AUDIT_FIGURES"
LONG_VAR = "PULSAR_AUDIT_RELIABILITY"

# Columns that say when or by which attempt a row was written, not what it holds: a rerun
# after a crash writes them anew by design (ids of table-level check runs, write times, the
# stage fingerprints made of Delta versions, an alert's delivery times and attempt counts).
VOLATILE = {
    "ingest_id",
    "ingested_at",
    "quarantined_at",
    "checked_at",
    "computed_at",
    "created_at",
    "scored_at",
    "input_fingerprint",
}
# Delivery entries keep only where the alert went and how it stands there.
ALERT_DELIVERY_KEPT = ("sink", "state")
# ZooKeeper lines without a capture_id take the batch's ingest id.
ZK_CAPTURE_ID = "capture_id"


def is_long() -> bool:
    """The long versions run when PULSAR_AUDIT_RELIABILITY=long (scripts/reliability.py)."""
    return os.environ.get(LONG_VAR, "") == "long"


def record_figure(name: str, figure: dict) -> None:
    """Add one suite's figures to the JSON file named by $PULSAR_AUDIT_FIGURES (if set)."""
    target = os.environ.get(FIGURES_VAR)
    if not target:
        return
    path = Path(target)
    figures = json.loads(path.read_text()) if path.exists() else {}
    figures[name] = figure
    path.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- inputs and config
def zk_rows() -> list[dict]:
    """A few capture rows as `zk capture` writes them (bundle ownership, a ledger, a bookie)."""
    base = {"zookeeper": "127.0.0.1:2181", "capture_id": "cap-1", "ephemeral_owner": 0}
    owner = json.dumps({"nativeUrl": "pulsar://127.0.0.1:6650", "disabled": False})
    bundle = "/namespace/public/default/0x00000000_0x40000000"
    return [
        {
            **base,
            "ts": "2026-11-22T02:42:50.000Z",
            "path": bundle,
            "op": "create",
            "version": 0,
            "data": owner,
            "decoded": owner,
        },  # fmt: skip
        {
            **base,
            "ts": "2026-11-22T02:42:55.100Z",
            "path": bundle,
            "op": "delete",
            "version": 0,
            "data": None,
            "decoded": None,
        },  # fmt: skip
        {
            **base,
            "ts": "2026-11-22T02:42:55.300Z",
            "path": bundle,
            "op": "create",
            "version": 0,
            "data": owner,
            "decoded": owner,
        },  # fmt: skip
        {
            **base,
            "ts": "2026-11-22T02:42:51.000Z",
            "path": "/ledgers/available/127.0.0.1:3181",
            "op": "snapshot",
            "version": 0,
            "data": "",
            "decoded": None,
        },  # fmt: skip
    ]


def build_inputs(folder: Path) -> Path:
    """The one capture folder every suite uses, in three parts (the concurrency suite runs
    jobs over a part and over the whole folder at once):

    - part-a: a synthetic run with losses, a duplicate and an outage, and a file of three bad
      trace lines;
    - part-b: a second synthetic run (a loss, a duplicate);
    - shared: the broker and client logs of the committed real unload run and a ZooKeeper
      capture with one refused line.

    Small, so that each analyze, kill and rerun costs seconds of CPU."""
    part_a, part_b, shared = folder / "part-a", folder / "part-b", folder / "shared"
    write_run(
        part_a,
        RunSpec("run-faults", messages=80, lost={10, 11}, duplicated={20}, outages={40: 400}),
    )
    bad = [
        '{"run_id":"run-faults","topic":"t","role":"producer","client":"p1","event":"send"}',
        "not json at all",
        '{"run_id":"run-faults","topic":"t","role":"producer","client":"p1","event":"send",'
        '"ts":1741082400000,"seq":-5}',
    ]
    (part_a / "run-faults-bad.jsonl").write_text("\n".join(bad) + "\n")
    write_run(part_b, RunSpec("run-b", messages=40, lost={5}, duplicated={7}))
    shutil.copytree(UNLOAD_RUN / "logs", shared / "unload-run" / "logs")
    lines = [json.dumps(r) for r in zk_rows()] + ['{"ts":"yesterday","path":"/x","op":"touch"}']
    with gzip.open(shared / "unload-run" / "metadata.zk.jsonl.gz", "wt") as out:
        out.write("\n".join(lines) + "\n")
    return folder


@dataclass(frozen=True)
class Reference:
    """The suites' one clean run: its inputs, config, result, table digests and the kill
    points it passed (in order)."""

    root: Path
    inputs: Path
    conf_dir: Path
    result: dict
    digest: dict[str, tuple[int, int, str]]
    points: list[str]

    def config(self, lakehouse_dir: Path) -> Config:
        return suite_config(self.conf_dir, lakehouse_dir)


def clean_reference(spark, root: Path, spark_conf: dict[str, str]) -> Reference:
    """Build the inputs and run `analyze` over them once, in this process, listing the kill
    points it passes (pulsar_audit.faults)."""
    from jobs.analyze import analyze
    from pulsar_audit import faults

    inputs = build_inputs(root / "inputs")
    conf_dir = write_conf_dir(root / "conf", spark_conf)
    points_log = root / "points.log"
    reference = Lakehouse(spark, suite_config(conf_dir, root / "reference"))
    faults.reset()
    os.environ[faults.KILL_LOG_VAR] = str(points_log)
    try:
        result = analyze(reference, reference.config, inputs)
    finally:
        del os.environ[faults.KILL_LOG_VAR]
        faults.reset()
    points = points_log.read_text().splitlines()
    return Reference(root, inputs, conf_dir, result, digest(reference), points)


def write_conf_dir(conf_dir: Path, spark_conf: dict[str, str]) -> Path:
    """conf/local.yaml for tests: local[2] with the suite's Spark settings, a file alert sink."""
    conf = yaml.safe_load(CONF_LOCAL.read_text())
    conf["spark"].update(
        {"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "1g", "conf": spark_conf}
    )
    conf["alerts"]["sinks"] = [{"name": "file", "file": {"path": "{lakehouse}/alerts.jsonl"}}]
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "local.yaml").write_text(yaml.safe_dump(conf))
    return conf_dir


def suite_config(conf_dir: Path, lakehouse: Path) -> Config:
    return load_config("local", lakehouse=str(lakehouse), conf_dir=conf_dir)


# --------------------------------------------------------------------------- child processes
@dataclass(frozen=True)
class Child:
    returncode: int
    stdout: str
    stderr: str


def analyze_child(
    inputs: Path,
    lakehouse: Path,
    conf_dir: Path,
    env: dict[str, str] | None = None,
    timeout: int = 900,
    command: tuple[str, ...] = ("analyze",),
) -> Child:
    """`pulsar-audit analyze INPUTS --json` in a child process (SIGKILL-able)."""
    exe = Path(sys.executable).parent / "pulsar-audit"
    cmd = [str(exe), *command, str(inputs), "--lakehouse", str(lakehouse), "--json"]
    full_env = {**os.environ, "PULSAR_AUDIT_CONF_DIR": str(conf_dir), **(env or {})}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    return Child(done.returncode, done.stdout, done.stderr)


# --------------------------------------------------------------------------- table digests
def _content(df: DataFrame, table: str) -> DataFrame:
    """The table's rows without the columns a rerun writes anew, as one JSON text per row."""
    columns = [c for c in df.columns if c not in VOLATILE]
    if table == "alerts":
        kept = F.transform(
            "deliveries", lambda d: F.struct(*[d[f].alias(f) for f in ALERT_DELIVERY_KEPT])
        )
        df = df.withColumn("deliveries", F.array_sort(kept))
    if table == "zk_changes":
        df = df.withColumn(ZK_CAPTURE_ID, F.coalesce(ZK_CAPTURE_ID, F.lit("")))
    return df.select(F.to_json(F.struct(*columns)).alias("_row"))


def digest(lakehouse: Lakehouse) -> dict[str, tuple[int, int, str]]:
    """table → (rows, distinct rows, order-free hash of the rows), in one Spark job.

    The hash is the sum of every row's SHA-256 prefix (as a 60-bit number): equal for equal
    multisets of rows, whatever their order or file layout.
    """
    parts = []
    for table in TABLES:
        rows = _content(lakehouse.read(table), table).select(
            F.lit(table).alias("table"), F.sha2("_row", 256).alias("h")
        )
        parts.append(rows)
    union = _union(parts)
    number = F.conv(F.substring("h", 1, 15), 16, 10).cast("decimal(38,0)")
    summary = union.groupBy("table").agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct("h").alias("distinct"),
        F.coalesce(F.sum(number), F.lit(0)).cast("string").alias("hash"),
    )
    found = {r["table"]: (r["rows"], r["distinct"], r["hash"]) for r in summary.collect()}
    return {t: found.get(t, (0, 0, "0")) for t in TABLES}


def key_duplicates(lakehouse: Lakehouse) -> dict[str, int]:
    """table → rows beyond the first per natural key (0 everywhere: nothing doubled)."""
    parts = []
    for table, spec in TABLES.items():
        if spec.key:
            keys = F.to_json(F.struct(*spec.key))
            parts.append(lakehouse.read(table).select(F.lit(table).alias("table"), keys.alias("k")))
    counted = (
        _union(parts)
        .groupBy("table")
        .agg((F.count(F.lit(1)) - F.countDistinct("k")).alias("extra"))
    )
    return {r["table"]: r["extra"] for r in counted.collect() if r["extra"]}


FILE_TABLES = (
    "producer_events",
    "consumer_events",
    "run_events",
    "broker_log",
    "bookie_log",
    "client_log",
    "zk_changes",
    "quarantine",
    "run_files",
)
RUN_TABLES = ("message_history", "delivery", "anomalies", "outages", "run_summary", "run_state")


def orphans(lakehouse: Lakehouse) -> dict[str, int]:
    """Rows whose file is not in the manifest, or whose run has no ingested file."""
    manifest = lakehouse.read("ingested_files").select(F.col("path").alias("source_file"))
    runs = lakehouse.read("run_files").select("run_id").distinct()
    found: dict[str, int] = {}
    by_file = [
        lakehouse.read(t).select(F.lit(t).alias("table"), "source_file") for t in FILE_TABLES
    ]
    by_run = [lakehouse.read(t).select(F.lit(t).alias("table"), "run_id") for t in RUN_TABLES]
    lost_files = _union(by_file).join(manifest, on="source_file", how="left_anti")
    lost_runs = _union(by_run).join(runs, on="run_id", how="left_anti")
    both = lost_files.select("table").unionByName(lost_runs.select("table"))
    for row in both.groupBy("table").count().collect():
        found[row["table"]] = row["count"]
    return found


def unreconciled_files(lakehouse: Lakehouse) -> list[str]:
    """Manifest rows where records != accepted + quarantined."""
    bad = lakehouse.read("ingested_files").filter(
        F.col("records") != F.col("accepted") + F.col("quarantined")
    )
    return [r["path"] for r in bad.select("path").collect()]


def _union(parts: list[DataFrame]) -> DataFrame:
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def differing_tables(
    expected: dict[str, tuple[int, int, str]], got: dict[str, tuple[int, int, str]]
) -> dict[str, tuple]:
    return {t: (expected[t], got.get(t)) for t in expected if expected[t] != got.get(t)}
