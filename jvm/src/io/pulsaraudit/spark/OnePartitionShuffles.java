package io.pulsaraudit.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.CoalesceExec;
import org.apache.spark.sql.execution.ColumnarRule;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.exchange.ENSURE_REQUIREMENTS$;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec;
import org.apache.spark.sql.internal.SQLConf;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * A Spark session extension (`spark.sql.extensions`) for small jobs: a shuffle into one
 * partition becomes a narrow coalesce into one partition.
 *
 * <p>A small job (pulsar-audit's small-input session, a `watch` micro-batch, the tests) shuffles
 * into one partition (`spark.sql.shuffle.partitions` 1) without adaptive execution. Spark still
 * plans an exchange wherever an operator needs its rows clustered (an aggregate, a join, a
 * window) and the child's partitioning does not already say so: each is a stage boundary, so
 * that a plan of ten joins and aggregates runs as some fifty stages, each with its own tasks to
 * serialize, schedule and deserialize and its rows written to and read from shuffle files. Into
 * one partition, a hash or range shuffle puts every row into that partition: so does a
 * coalesce to one partition, without a stage boundary. Any order an operator needs is a sort
 * Spark has placed above the exchange already, and stays.
 *
 * <p>Only the shuffles Spark inserts to meet a distribution (`ENSURE_REQUIREMENTS`), into one
 * partition, while the session shuffles into one partition and adaptive execution is off; a
 * session shuffling into more partitions (a large input) keeps its plans as they are.
 */
public final class OnePartitionShuffles extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectColumnar(new AbstractFunction1<SparkSession, ColumnarRule>() {
      @Override
      public ColumnarRule apply(SparkSession session) {
        return new Columnar();
      }
    });
    return BoxedUnit.UNIT;
  }

  /** Runs after Spark has placed its exchanges and sorts (EnsureRequirements). */
  static final class Columnar extends ColumnarRule {
    @Override
    public Rule<SparkPlan> preColumnarTransitions() {
      return new Narrow();
    }
  }

  static final class Narrow extends Rule<SparkPlan> {
    @Override
    public SparkPlan apply(SparkPlan plan) {
      SQLConf conf = SQLConf.get();
      if (conf.numShufflePartitions() != 1 || conf.adaptiveExecutionEnabled()) {
        return plan;
      }
      try {
        return narrowed(plan);
      } catch (LinkageError e) {
        // compiled against another Spark than the one running (setup not run again since
        // pyspark changed): the plan as Spark made it, never a failed query
        return plan;
      }
    }

    private static SparkPlan narrowed(SparkPlan plan) {
      List<SparkPlan> children = CollectionConverters.asJava(plan.children());
      List<SparkPlan> rewritten = new ArrayList<>(children.size());
      boolean changed = false;
      for (SparkPlan child : children) {
        SparkPlan next = narrowed(child);
        changed |= next != child;
        rewritten.add(next);
      }
      SparkPlan node = changed
          ? plan.withNewChildren((Seq<SparkPlan>) CollectionConverters.asScala(rewritten).toList())
          : plan;
      if (node instanceof ShuffleExchangeExec exchange
          && exchange.shuffleOrigin() == ENSURE_REQUIREMENTS$.MODULE$
          && exchange.outputPartitioning().numPartitions() == 1) {
        return new CoalesceExec(1, exchange.child());
      }
      return node;
    }
  }
}
