"""The Spark session: local with Delta from the jar cache, or the cluster's own on Databricks."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import re
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from pyspark import SparkContext, StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from pulsar_audit.config import Config
from pulsar_audit.errors import SetupError
from pulsar_audit.jvm_archive import driver_options
from pulsar_audit.paths import jars_dir
from pulsar_audit.py4j_lookups import cache_jvm_lookups
from pulsar_audit.quiet import jvm_start_quiet, quiet_pyspark_errors
from pulsar_audit.spark_extension import EXTENSION_CLASS, LOCAL_FS_CONF, extension_jar
from pulsar_audit.storage import local_form

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # A table of an older contract (a lakehouse from before trace format v1.1) gains the
    # columns added since on its next write or merge: every write selects the contract's
    # columns, so nothing else can be added.
    "spark.databricks.delta.schema.autoMerge.enabled": "true",
    # A file's statistics of a string column keep its first 32 characters by default: every
    # input file's path shares more than that with the others of its landing folder, so the
    # statistics of `source_file` could not tell one file's rows from another's. With the
    # whole path, a replace of the rows of new input files is known to remove nothing
    # (pulsar_audit/deferred.py) and Delta's own data skipping can use them.
    "spark.databricks.io.skipping.stringPrefixLength": "256",
    # ... which reads the table's files from its checksum: Delta lists them there only for a
    # table of at most 50 files by default, a watch's bronze tables after ~50 micro-batches.
    # Measured on a table of 1,000 files (docs/performance.md, session 34): each commit
    # 0.47 -> 0.59 s with the list (a 271 KiB checksum), a replace of a new file's rows
    # 1.74 s as a replaceWhere against 0.59 s as the append the list allows.
    "spark.databricks.delta.allFilesInCrc.thresholdNumFiles": "2000",
}
# A JSON line with one field twice (`{"seq":1,"seq":2}`) must not fail the whole job when it is
# parsed into a map (the default policy raises DUPLICATED_MAP_KEY, even in PERMISSIVE mode):
# the map keeps the last value and the trace format refuses the line, naming the field.
SQL_CONF = {"spark.sql.mapKeyDedupPolicy": "LAST_WIN"}
# PySpark records the Python call site of every DataFrame and Column call in the driver, for
# error messages: four py4j round trips per call (the active session, this setting, then set
# and clear the origin), a third of the thousands of calls that build analyze's plans. Off:
# `analyze examples` 4 % less CPU, a tiny literal pipeline's plans built 27 % faster
# (docs/performance.md, "Session 25"). A static setting: a session's builder only (turn it
# back on under `spark.conf` in conf/*.yaml to see call sites in an error).
PYTHON_CONF = {"spark.python.sql.dataFrameDebugging.enabled": "false"}
R = TypeVar("R")
log = logging.getLogger(__name__)


# A job whose inputs are small (a chaos run, the examples, a test) is mostly fixed cost per
# Spark job: planning, adaptive re-planning, code generation, the JIT. For those, a local
# session plans without adaptive execution, evaluates without generated code, shuffles into
# one partition (each task costs more than the rows it holds) and runs a JVM that compiles
# with C1 only and collects with the serial collector (docs/performance.md: measured on the
# examples and a 10⁴-message run).
SMALL_INPUT_BYTES = 32 << 20
# a .gz input counts as the text its gzip trailer records, or this many times its size on disk
# when the trailer cannot say (see _text_bytes)
GZIP_EXPANSION = 8
# a gzip trailer records the text's size modulo this (RFC 1952's ISIZE)
GZIP_RECORD_WRAP = 1 << 32
# a Parquet input (the trace's columnar form) counts as the JSON text it stands for: 13-18x
# its size in the benchmark's traces (10^4: 0.9 MB against 12.1 MB; 10^5: 7.3 against 128)
PARQUET_EXPANSION = 16
# What a local session counts a file's opening as, in bytes read (see get_spark)
FILE_OPEN_COST_BYTES = 256 << 10
# HotSpot's limit (bytes of bytecode) for a method it compiles (-XX:+DontCompileHugeMethods)
JIT_METHOD_LIMIT = 8000
SMALL_INPUT_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.sql.adaptive.enabled": "false",
    # Without adaptive execution a broadcast's wait includes computing what it broadcasts.
    # A small input's job can still have large work: the table checks of a large run whose
    # ingest was stopped before them, taken up by the next job (jobs/ingest.py), e.g. one
    # given an empty folder. Over the 280 million records of a 10^8-message trace's first
    # run the checks' broadcast of the sole producers per topic failed at Spark's 300 s
    # (docs/performance.md, "Session 55"). Negative: no time limit.
    "spark.sql.broadcastTimeout": "-1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.driver.defaultJavaOptions": (
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
    ),
}

# The JVM of a local session for a larger input (the driver is the executor here: its
# threads share the two cores with the tasks'). With HotSpot's defaults (G1, tiered C1/C2)
# the pipeline of a 10^6-message trace spent 75-100 CPU s in C2's compilations and ~45 in G1's
# threads beside 150-220 of tasks: every stage's generated classes are new code that C2
# compiles once warm. With the throughput collector, and C2 only for methods 4x as often
# called and loops 10x as long as HotSpot's thresholds (the tasks' loops still reach it; the
# rest stays in C1's profiled code), the same rows: the pipeline 187 -> 145 s, the whole
# analyze 243 -> 213 s (docs/performance.md, "Session 51"). C1 only (the small-input
# session's) made the tasks twice as slow there. C2 also no longer inlines a callee already
# compiled to more than 1,000 bytes (HotSpot's default 2,500): on a 10^6-message JSONL analyze
# its CPU 30 % less, the tasks' the same, the wall 3 % less on average over three runs of each
# (within one run's spread; "Session 52", "Session 53"); at 500, C2 took 9 CPU s less again
# and the tasks 6 more. Nor does it inline at a call site that is not hot a callee of more
# than 20 bytes of bytecode (HotSpot's default 35; hot sites keep FreqInlineSize's 325): two
# pairs on the same trace, 220.8 / 219.8 s against 227.2 / 229.0, the tasks' CPU 9-14 s less
# ("Session 53"). The small-input session's options, a config's own
# `spark.driver.defaultJavaOptions` and a collector chosen anywhere else win (see
# local_jvm_conf).
LOCAL_JVM_OPTIONS = (
    "-XX:+UseParallelGC -XX:Tier4InvocationThreshold=50000 -XX:Tier4CompileThreshold=60000 "
    "-XX:Tier4BackEdgeThreshold=400000 -XX:InlineSmallCode=1000 -XX:MaxInlineSize=20"
)
# Where else a JVM's options come from: the driver's own in the config, and the environment
JVM_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions")
JVM_OPTION_VARIABLES = (
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "SPARK_SUBMIT_OPTS",
)
_CHOOSES_A_COLLECTOR = re.compile(r"-XX:[+-]Use\w+GC\b")


def local_jvm_conf(conf: dict[str, str]) -> dict[str, str]:
    """LOCAL_JVM_OPTIONS as a local driver's default options, without the collector when the
    session's `conf` or the environment chooses one (HotSpot refuses to start with two)."""
    elsewhere = [conf.get(k, "") for k in JVM_OPTION_KEYS]
    elsewhere += [os.environ.get(v, "") for v in JVM_OPTION_VARIABLES]
    options = LOCAL_JVM_OPTIONS
    if any(_CHOOSES_A_COLLECTOR.search(o) for o in elsewhere):
        options = _CHOOSES_A_COLLECTOR.sub("", options).strip()
    return {"spark.driver.defaultJavaOptions": options}


# The ingest of a small input (the trace parse, the staged rows' writes and checks: wide
# projections per record) runs with generated code once the input holds some 20,000 records:
# compiling it costs seconds in the small-input JVM, interpreting the projections costs more
# from about that size. Cold `analyze` runs, with against without (docs/performance.md,
# "Session 29"): 3-5 s slower at 0.3 and 1.3 MB of trace text, the same on examples/ (4.0 MB
# with its logs), 6-10 s faster on a 10^4-message run (13 MB, either form). The rest of the
# job keeps interpreting: with generated code throughout, the 10^4 run gained no more.
INGEST_CODEGEN_BYTES = 6 << 20
GENERATED_CODE_CONF = {
    "spark.sql.codegen.factoryMode": "FALLBACK",
    "spark.sql.codegen.wholeStage": "true",
}

# What a running session can take of SMALL_INPUT_CONF (its SQL settings), for a small job
# inside a session made for larger ones: a `watch` micro-batch of a small input, whose every
# shuffle would otherwise be its own adaptive job over mostly empty partitions.
# Not the broadcast's lifted time limit: a micro-batch's frames are small, and on a cluster a
# broadcast held up by a lost executor should still fail rather than wait forever.
SMALL_FRAMES_CONF = {
    k: v
    for k, v in SMALL_INPUT_CONF.items()
    if k.startswith("spark.sql.") and k != "spark.sql.broadcastTimeout"
}
# The settings a running session takes at any time (SQL's and Delta's); the JVM's options and
# the SparkContext's (e.g. spark.default.parallelism) are fixed when the session starts.
RUNTIME_PREFIXES = ("spark.sql.", "spark.databricks.delta.")


def runtime_settings(conf: dict[str, str]) -> dict[str, str]:
    """The settings of `conf` a running session can take (see RUNTIME_PREFIXES)."""
    return {k: v for k, v in conf.items() if k.startswith(RUNTIME_PREFIXES)}


def running_session() -> SparkSession | None:
    """This process's running Spark session (the warm server's, a test's), or None: a job
    started now shares it, JVM and settings, instead of building its own."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:  # noqa: SLF001 - no public probe
        return None
    return SparkSession.getActiveSession() or SparkSession._instantiatedSession  # noqa: SLF001


# A local driver's threads (the scheduler's, which serializes each task, and the executor's,
# which deserializes it) recurse once per level of a stage's RDD lineage: without code
# generation (small inputs, tests) every operator is a level. The JVM's default 1 MB stack
# overflowed at a lineage of 300 levels here (StackOverflowError in ObjectOutputStream), less
# while the JIT has not compiled the serializer yet; 16 MB holds a thousand. Stacks are
# reserved, not committed: a thread uses only the memory it touches.
LOCAL_THREAD_STACK = "-Xss16m"


def local_input_bytes(path: str) -> int | None:
    """The size of the local input `path` (a file or a folder's files; gzip and Parquet
    counted as their likely text size); None for a path on another file system."""
    local = local_form(path)
    if local is None or not os.path.exists(local):
        return None
    files = (
        [os.path.join(d, f) for d, _, names in os.walk(local) for f in names]
        if os.path.isdir(local)
        else [local]
    )
    return sum(_text_bytes(f) for f in files)


def _text_bytes(path: str) -> int:
    """The text a local file stands for: a gzip file's own record of its uncompressed size
    (the last 4 bytes: the size modulo 2^32, of the last member), else an estimate."""
    size = os.path.getsize(path)
    if path.endswith(".gz"):
        try:
            with open(path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                recorded = int.from_bytes(f.read(4), "little")
        except OSError:  # shorter than a gzip trailer: not a gzip file ingest can read
            recorded = 0
        # a recorded size below the file's (beyond 4 GiB, or several members) is not the text's,
        # nor is any record of a file whose estimate reaches 4 GiB: the record is the size
        # modulo 4 GiB, always below that estimate
        if size <= recorded and size * GZIP_EXPANSION < GZIP_RECORD_WRAP:
            return recorded
    return text_size(path, size)


def file_text_bytes(path: str, size_bytes: int) -> int:
    """The text the file `path` (a path or URI) of `size_bytes` stands for: a local file's own
    record (`_text_bytes`), else the estimate from its name (`text_size`)."""
    local = local_form(path)
    if local is not None and os.path.isfile(local):
        return _text_bytes(local)
    return text_size(path, size_bytes)


def text_size(path: str, size_bytes: int) -> int:
    """An estimate of the text a file of `size_bytes` stands for, from its name alone (a file
    that may not be local: see _text_bytes for a local file's own record)."""
    if path.endswith(".gz"):
        return size_bytes * GZIP_EXPANSION
    return size_bytes * PARQUET_EXPANSION if path.endswith(".parquet") else size_bytes


def large_text(files: Iterable[tuple[str, int]]) -> bool:
    """Whether files of (path, size in bytes) stand for more text than a small input
    (SMALL_INPUT_BYTES): enough to pay for a larger plan that costs less per line."""
    return sum(text_size(path, size) for path, size in files) > SMALL_INPUT_BYTES


def for_input(config: Config, input_bytes: int | None) -> Config:
    """`config` with the small-input session settings when Spark is local and the input is
    small, and generated code for its ingest when it is large enough to pay for it; settings
    the config sets itself win (its own code generation settings: also for the ingest)."""
    master = config.spark.master or ""
    if input_bytes is None or input_bytes > SMALL_INPUT_BYTES or not master.startswith("local"):
        return config
    own = config.spark.conf
    generated = input_bytes >= INGEST_CODEGEN_BYTES and not own.keys() & GENERATED_CODE_CONF.keys()
    spark = replace(
        config.spark,
        shuffle_partitions=min(config.spark.shuffle_partitions, 1),
        conf={**SMALL_INPUT_CONF, **own},
        ingest_conf={**(GENERATED_CODE_CONF if generated else {}), **config.spark.ingest_conf},
    )
    return replace(config, spark=spark)


def delta_jars(directory: Path | None = None) -> list[Path]:
    """The cached Delta jars; fail with what to run when the cache is empty."""
    directory = directory or jars_dir()
    jars = sorted(directory.glob("delta-*.jar"))
    if not any(j.name.startswith("delta-spark") for j in jars):
        raise SetupError(
            f"Delta jars not found in {directory} (expected delta-spark_*.jar and "
            f"delta-storage-*.jar); run `bash scripts/setup.sh` to resolve them with Maven"
        )
    return jars


def utc_process_clock() -> bool:
    """Put this Python process on UTC, as the sessions are (`spark.sql.session.timeZone`);
    whether it was on another zone. `collect()` gives a timestamp as a naive datetime in the
    process's zone, and `local_frame` (like the sessions) takes a naive datetime as UTC: on
    another zone a row collected and written back (a finding judged from memory, an alert
    raised from it) would move by the zone's offset. Child processes started later inherit
    TZ=UTC."""
    if time.timezone == 0 and time.altzone == 0:  # UTC, or a zone always at UTC
        return False
    log.info("this process's clock is put on UTC (it was on %s)", "/".join(time.tzname))
    os.environ["TZ"] = "UTC"
    time.tzset()
    return True


def get_spark(config: Config, extra_conf: dict[str, str] | None = None) -> SparkSession:
    """Build (or reuse) the session for `config`; local sessions load Delta from the cache.
    The process's clock is put on UTC first (`utc_process_clock`)."""
    utc_process_clock()
    cache_jvm_lookups()
    if config.spark.master is None:
        active = SparkSession.getActiveSession()
        if active is None:
            active = SparkSession.builder.appName(config.spark.app_name).getOrCreate()
        quiet_pyspark_errors()
        for key, value in SQL_CONF.items():
            active.conf.set(key, value)
        return active
    jars = [str(j) for j in delta_jars()]
    extensions = [DELTA_CONF["spark.sql.extensions"]]
    # pulsar_audit/spark_extension.py: fewer stages for small jobs, in this process's own JVM
    # (whose threads have the stacks a one-stage lineage needs), never on a cluster's executors
    narrow = extension_jar() if config.spark.master.startswith("local") else None
    if narrow is not None:
        jars.append(str(narrow))
        extensions.append(EXTENSION_CLASS)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_conf = Path(__file__).with_name("log4j2.properties")
    java_options = f"-Dlog4j2.configurationFile=file:{log_conf}"
    if config.spark.master.startswith("local"):  # this process's own driver JVM
        java_options = f"{java_options} {LOCAL_THREAD_STACK} {driver_options()}".strip()
        # a local Python worker (only tests' pickled frames need one) runs this interpreter,
        # not whichever `python3` is first on PATH (a pyenv shim here: a bash script)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(config.spark.master)
        .appName(config.spark.app_name)
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.shuffle.partitions", str(config.spark.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        # A local job has no one to look at its web UI; starting it costs about a second.
        .config("spark.ui.enabled", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # HotSpot does not JIT-compile a method of more than 8,000 bytes of bytecode; Spark
        # lets generated code grow to 65,535 before it falls back, so a wide projection (the
        # columnar trace's stage: parse, checks, row rules) ran in the bytecode interpreter.
        # At this limit Spark gives up whole-stage code for such a part of a plan and runs
        # its operators one by one (each with its own generated code, in methods HotSpot
        # compiles): the stage of a 10^6-message columnar trace 62 -> 31 s (docs/
        # performance.md, "Session 42"). A Databricks session (getOrCreate) keeps its own.
        .config("spark.sql.codegen.hugeMethodLimit", str(JIT_METHOD_LIMIT))
        # An aggregation with collect_set or collect_list (message history, the detectors'
        # blocks, poll skip; percentile_approx too) runs as an object hash aggregate, which
        # keeps 128 groups per task in a map of Java objects, then sorts the rest of its
        # input and aggregates it by sort anyway: keyed per message, nearly every row. As a
        # sort aggregate it sorts from the start: the silver and anomaly steps of a
        # 10^6-message trace 13 % faster (~18 s), the same rows. An aggregation of few groups
        # (per consumer, per subscription) now sorts where it hashed: ~2 s slower at 10^6.
        # Small inputs: no change (docs/performance.md, "Session 44"). Raising the 128
        # instead made message history twice as slow (its Java objects' GC).
        .config("spark.sql.execution.useObjectHashAggregateExec", "false")
        .config("spark.driver.extraJavaOptions", java_options)
    )
    if config.spark.master.startswith("local"):
        # Spark packs a read's files into tasks counting each file as its size plus the cost
        # of opening it, 4 MB by default (HDFS's). A trace of small Parquet files (the
        # harness rolls them) then went to the two cores here in shares of 50 and 21 MB (14
        # of its 40 files, 8-17 KB each, weighed 56 MB): the parse's checkpoint ran 22 s on
        # one core and 38 s on the other, and the bronze files it wrote carried the skew into
        # the pipeline's reads. A local file opens for about what reading 256 KB costs: the
        # 10^6-message columnar ingest 74 -> 61 s warm in one JVM, analyze 336 -> 308 s (mean
        # of two each), the same findings (docs/performance.md, "Session 45"). A cluster's
        # (standalone, Databricks) keeps Spark's default.
        builder = builder.config("spark.sql.files.openCostInBytes", str(FILE_OPEN_COST_BYTES))
    if config.storage == "path":  # a catalog env keeps its managed tables where Spark says
        builder = builder.config(
            "spark.sql.warehouse.dir", str(config.lakehouse_path / "_warehouse")
        )
    if config.spark.driver_memory:
        builder = builder.config("spark.driver.memory", config.spark.driver_memory)
    # this process's own JVM runs the tasks (see LOCAL_JVM_OPTIONS)
    own = {**config.spark.conf, **(extra_conf or {})}
    local = local_jvm_conf(own) if config.spark.master.startswith("local") else {}
    for key, value in {
        **DELTA_CONF,
        "spark.sql.extensions": ",".join(extensions),
        **SQL_CONF,
        **PYTHON_CONF,
        **local,
        **own,
    }.items():
        builder = builder.config(key, value)
    with jvm_start_quiet():  # the JVM's and Spark's start-up lines: only with -v
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    quiet_pyspark_errors()
    if narrow is not None:
        use_local_fs(spark)
    if config.spark.ship_package and spark.sparkContext.applicationId not in _SHIPPED:
        ship_package(spark)
        _SHIPPED.add(spark.sparkContext.applicationId)
    return spark


def use_local_fs(spark: SparkSession) -> None:
    """The local file system of the extension's jar (`LOCAL_FS_CONF`) for every local file
    the session reads or writes from here on, when its JVM can load it.

    Set once the session has started: spark-submit opens the local file system before the
    session's jars are on its class path (to find them), so the setting cannot come with the
    session's own. The instance Spark opened and cached meanwhile is closed (a local file
    system holds no state) and opened again with the setting, so that the JVM's cache holds
    the new one. A session whose JVM cannot load the class (getOrCreate returned one started
    without the jar) keeps Hadoop's."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001 - no Python API for it
    if all(conf.get(key) == value for key, value in LOCAL_FS_CONF.items()):
        return  # getOrCreate returned a session set up so already
    jvm = spark.sparkContext._jvm  # noqa: SLF001
    try:
        for name in LOCAL_FS_CONF.values():
            jvm.java.lang.Class.forName(name, False, conf.getClassLoader())
    except Exception:  # noqa: BLE001 - a JVM started without the jar: Hadoop's, as before
        log.info("the session's JVM has no %s: Hadoop's local file system", EXTENSION_CLASS)
        return
    for key, value in LOCAL_FS_CONF.items():
        conf.set(key, value)
    hadoop_fs = jvm.org.apache.hadoop.fs
    hadoop_fs.FileSystem.getLocal(conf).close()
    hadoop_fs.FileSystem.getLocal(conf)  # cached now with this setting, before any other


_SHIPPED: set[str] = set()  # applications the package was shipped to (getOrCreate reuses one)


def ship_package(spark: SparkSession, packages: tuple[str, ...] | None = None) -> Path:
    """Zip the installed pulsar-audit packages and add the zip to every executor's Python path.

    What `spark-submit --py-files` does for a job submitted to a cluster whose executors do
    not have the package installed. Returns the zip.
    """
    packages = packages or installed_packages()
    target = Path(tempfile.mkdtemp(prefix="pulsar-audit-pyfiles-")) / "pulsar_audit_pkg.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in packages:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                raise SetupError(f"package {name!r} to ship to executors is not importable")
            root = Path(next(iter(spec.submodule_search_locations)))
            for file in sorted(root.rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts:
                    archive.write(file, Path(name) / file.relative_to(root))
    spark.sparkContext.addPyFile(str(target))
    return target


def installed_packages() -> tuple[str, ...]:
    """The top-level packages of the pulsar-audit distribution (its top_level.txt)."""
    try:
        listed = importlib.metadata.distribution("pulsar-audit").read_text("top_level.txt")
    except importlib.metadata.PackageNotFoundError:
        listed = None
    names = tuple(sorted(n.strip() for n in (listed or "").splitlines() if n.strip()))
    return names or ("pulsar_audit",)


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Run the enclosed Spark actions with `settings`, then restore what the session had
    (also when setting one of them fails: those set before it are restored)."""
    before: dict[str, str | None] = {}
    try:
        for key, value in settings.items():
            before[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


STAGE_PROPERTY = "pulsar_audit.stage"
# Inside a stage, the table or step a job computes (e.g. the pipeline's "anomalies"): the
# event log then gives each its own figures (bench/stage_profile.py).
STEP_PROPERTY = "pulsar_audit.step"


@contextmanager
def _tagged(prop: str, name: str | None) -> Iterator[None]:
    """Tag the Spark jobs this thread starts inside with `prop` = `name`. A no-op without a
    local SparkContext (none started yet, or Spark Connect) or without a name."""
    context = SparkContext._active_spark_context
    if context is None or name is None:
        yield
        return
    before = context.getLocalProperty(prop)
    context.setLocalProperty(prop, name)
    try:
        yield
    finally:
        context.setLocalProperty(prop, before)  # type: ignore[arg-type]


def spark_stage(name: str | None) -> AbstractContextManager[None]:
    """Tag the Spark jobs this thread starts inside with the job stage `name`: the event log
    then says which stage ran each job (bench/stage_profile.py)."""
    return _tagged(STAGE_PROPERTY, name)


def spark_step(name: str | None) -> AbstractContextManager[None]:
    """Tag the Spark jobs this thread starts inside with the step `name` of its stage (the
    table it computes or writes)."""
    return _tagged(STEP_PROPERTY, name)


def side_by_side(*calls: Callable[[], R]) -> list[R]:
    """Run independent steps each in its own thread, so that Spark runs their jobs, and the
    driver plans and commits them, at the same time; their results in order.

    Each step runs to its end; the first step's failure (in order) is then raised. A step
    writes only tables no other step of the same call writes, or relies on Delta's commit
    conflict retry (pulsar_audit.commit_retry). Jobs keep the caller's stage and step tags.
    """
    return side_by_side_bounded(list(calls), max(len(calls), 1))


def side_by_side_bounded(calls: list[Callable[[], R]], threads: int) -> list[R]:
    """`side_by_side` with at most `threads` steps running at once (many small commits: more
    threads than cores only make each one slower)."""
    if len(calls) <= 1:
        return [call() for call in calls]
    context = SparkContext._active_spark_context
    stage = context.getLocalProperty(STAGE_PROPERTY) if context is not None else None
    step = context.getLocalProperty(STEP_PROPERTY) if context is not None else None

    def tagged(call: Callable[[], R]) -> R:
        with spark_stage(stage), spark_step(step):
            return call()

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="side-by-side") as pool:
        futures = [pool.submit(tagged, call) for call in calls]
        wait(futures)
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return [future.result() for future in futures]


def observed_metrics(observation: Observation, *names: str) -> dict[str, object]:
    """The metrics `names` of an observation whose action has run, one py4j call each.

    `Observation.get` reads the whole metrics map entry by entry and ends the iteration with
    a Java exception PySpark converts (some twenty py4j calls, ~20 ms on the 2-core machine);
    a job observes each table it writes.
    """
    metrics = observation._jo.getAsJava()  # noqa: SLF001 - what `get` reads, without iterating
    return {name: metrics.get(name) for name in names}


def checkpointed(df: DataFrame, level: StorageLevel | None = None) -> DataFrame:
    """`df` computed once and kept (at `level`) as a frame with a one-node plan.

    For a frame several jobs read whose plan is expensive to carry: a persisted frame keeps
    its whole plan, which every job built on it analyzes and matches against the cache again
    (seconds per job for the trace parse or the log pattern chain); a checkpoint does not.

    level: where its blocks go; None: Spark's default for a local checkpoint (rows as objects
    in memory, what does not fit on disk). `StorageLevel.DISK_ONLY` for a frame of many wide
    rows that would not fit in memory anyway (the ingest's staged rows).
    """
    return df.localCheckpoint(eager=True, storageLevel=level)


def without_estimate(df: DataFrame) -> DataFrame:
    """A `checkpointed` frame as a leaf without the size estimate its plan carried (Spark's
    default for a leaf it knows nothing of, instead); any other frame as it is.

    A checkpoint keeps the optimizer's estimate of the plan it computed, and the estimate of a
    join is the product of its sides'. A frame kept from one computation into the next, built
    from it again and kept again (a watch's live state, micro-batch after micro-batch) carries
    a product of products: a number with thousands of digits after a few micro-batches, which
    the planner multiplies again in every join it plans (session 37: 83 s of one micro-batch's
    fold spent in Java's `BigInteger` multiplying such estimates)."""
    jdf = getattr(df, "_jdf", None)
    plan = jdf.queryExecution().analyzed() if jdf is not None else None
    if plan is None or plan.getClass().getSimpleName() != "LogicalRDD":
        return df
    session = df.sparkSession
    leaf = session._jsparkSession.internalCreateDataFrame(plan.rdd(), jdf.schema(), False)  # noqa: SLF001
    return DataFrame(leaf, session)


def release(df: DataFrame) -> None:
    """Free a `checkpointed` frame's blocks now (else Spark frees them once the JVM collects
    the frame). A no-op for any other frame, and where the JVM is not reachable (Connect)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return
    plan = jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


def same_keys(keys: Iterable[str], left: str = "t", right: str = "s") -> Column:
    """`keys` equal between the frames aliased `left` and `right`, a null equal to a null (a
    join or merge condition on keys that may be null)."""
    condition = None
    for key in keys:
        clause = F.col(f"{left}.{key}").eqNullSafe(F.col(f"{right}.{key}"))
        condition = clause if condition is None else condition & clause
    return F.lit(True) if condition is None else condition
