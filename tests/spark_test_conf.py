"""The Spark settings of the tests' session (a module of its own: several test folders have a
conftest.py, so `from conftest import …` finds whichever comes first on sys.path)."""

TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
    "spark.driver.memory": "2g",
    # Tests run many tiny multi-stage plans: adaptive execution and code generation only add
    # overhead there (about half of each test's time).
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # Every Spark JVM of the tests compiles with C1 only and collects with the serial
    # collector, as the product's small-input session does (pulsar_audit/spark.py): on tiny
    # plans C2's compilations and G1's threads cost more CPU than they win back, in the JVMs
    # tests start in child processes (`analyze` killed at a point, run side by side, run as a
    # user runs it) and in this session too, though it lives for a whole test folder
    # (docs/performance.md, "Session 21: the suite": the CPU of the whole process tree).
    "spark.driver.defaultJavaOptions": (
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
    ),
}

# The Spark JVMs that tests start in child processes run with the same settings.
CHILD_SPARK_CONF = dict(TEST_SPARK_CONF)
