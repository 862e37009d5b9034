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
}

# The Spark JVMs that tests start in child processes (`pulsar-audit analyze` killed at a point,
# run side by side, run as a user runs it) each live for one small job: the C1 compiler alone
# and the serial collector cost them less CPU than C2's compilations and G1's threads win back
# (about a quarter of a child's wall time on two shared cores). The tests' own session is
# long-lived and keeps the JVM's defaults.
CHILD_SPARK_CONF = {
    **TEST_SPARK_CONF,
    "spark.driver.defaultJavaOptions": (
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
    ),
}
