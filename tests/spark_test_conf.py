"""The Spark settings of the tests' session (a module of its own: several test folders have a
conftest.py, so `from conftest import …` finds whichever comes first on sys.path)."""

TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    # One partition per shuffle and per local frame, as the product's small-input session
    # (pulsar_audit/spark.py SMALL_INPUT_CONF): a test's rows are a few thousand at most, so
    # a second task per stage is scheduling, serialization and a second output file for
    # nothing (docs/performance.md, "Session 22: the suite": 0.86 of the CPU of an analyze).
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "1",
    "spark.driver.memory": "2g",
    # Tests run many tiny multi-stage plans: adaptive execution and code generation only add
    # overhead there (about half of each test's time).
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # Every Spark JVM of the tests compiles with C1 only and collects with the serial
    # collector, as the product's small-input session does (pulsar_audit/spark.py): on tiny
    # plans C2's compilations and a parallel collector's threads cost more CPU than they win
    # back, in the JVMs tests start in child processes (`analyze` killed at a point, run side
    # by side, run as a user runs it) and in this session too, though it lives for a whole
    # test folder (docs/performance.md, "Session 21: the suite": the CPU of the whole process
    # tree).
    "spark.driver.defaultJavaOptions": (
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
    ),
}

# The Spark JVMs that tests start in child processes run with the same settings, but two
# partitions: the reliability suites' children (killed at a point, run side by side) keep the
# plans they were written and measured with (session 21: one partition was within the noise
# there).
CHILD_SPARK_CONF = {
    **TEST_SPARK_CONF,
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
}
