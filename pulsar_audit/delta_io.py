"""Delta I/O at the edges: every job reads and writes its tables through this module."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, DataFrameWriter, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType

from pulsar_audit import faults, locks
from pulsar_audit.commit_retry import retry_commit
from pulsar_audit.config import Config
from pulsar_audit.delta_log import (
    checksum_files,
    clear_uncommitted_log,
    create_local_table,
    files_may_hold,
    local_versions,
    log_version,
)
from pulsar_audit.errors import EnvironmentProblem
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import RETIRED_TABLES, TABLES, TableSpec
from pulsar_audit.spark import observed_metrics, same_keys

log = logging.getLogger(__name__)
R = TypeVar("R")

RETRY_FIRST_S, RETRY_MAX_S = 0.5, 8.0
# A replace's match: column → values, ANDed across columns (`Lakehouse.replace_where`).
Match = dict[str, list[str]]
SESSION_CATALOG = "spark_catalog"


class Lakehouse:
    """Resolves contract tables to Delta paths (local) or catalog names (Databricks)."""

    def __init__(self, spark: SparkSession, config: Config):
        self.spark = spark
        self.config = config
        self._existing: set[str] = set()
        self._verified: set[str] = set()  # tables whose schema was checked against the contract
        self._commits: Counter[str] = Counter()  # this object's own commits per table (no create)
        self._commits_lock = threading.Lock()

    # ------------------------------------------------------------------ naming
    def spec(self, table: str) -> TableSpec:
        spec = TABLES.get(table) or RETIRED_TABLES.get(table)
        if spec is None:
            raise KeyError(f"unknown table {table!r}; known tables: {sorted(TABLES)}")
        return spec

    def location(self, table: str) -> str:
        """Path of a local table, or `catalog.schema.table` on a catalog."""
        spec = self.spec(table)
        if self.config.storage == "path":
            return str(self.config.lakehouse_path / spec.layer / spec.name)
        return f"{self.config.catalog}.{self.config.schemas[spec.layer]}.{spec.name}"

    def _delta(self, table: str) -> DeltaTable:
        if self.config.storage == "path":
            return DeltaTable.forPath(self.spark, self.location(table))
        return DeltaTable.forName(self.spark, self._delta_name(table))

    def _delta_name(self, table: str) -> str:
        """The name Delta's own API takes: open-source Delta parses only `schema.table`, so
        a table of Spark's session catalog is named without it (Databricks takes all three).
        """
        if self.config.catalog == SESSION_CATALOG:
            spec = self.spec(table)
            return f"{self.config.schemas[spec.layer]}.{spec.name}"
        return self.location(table)

    def exists(self, table: str) -> bool:
        """Whether the table exists (remembered once seen: tables are never dropped by a job)."""
        if table in self._existing:
            return True
        if self.config.storage == "path":
            found = log_version(Path(self.location(table))) is not None
        else:
            found = self.spark.catalog.tableExists(self.location(table))
        if found:
            self._existing.add(table)
        return found

    # ------------------------------------------------------------------ create
    def create_all(self, threads: int = 8) -> list[dict[str, object]]:
        """Create every contract table that does not exist yet; report what was done.

        Tables are independent Delta logs, so they are created concurrently (each creation
        is a small commit whose cost is mostly waiting on the file system and the JVM).
        """
        names = list(TABLES)
        missing = [name for name in names if not self.exists(name)]
        # one job at a time creates a local lakehouse's tables: `create` may then clear what
        # an interrupted creation left without a commit (see `delta_log.clear_uncommitted_log`)
        lock = self.exclusive("create") if missing else nullcontext()
        # the session's settings read once, not once per table (a py4j round trip per setting)
        defaults = bool(missing) and self._property_defaults()
        with lock, ThreadPoolExecutor(max_workers=threads) as pool:
            created = list(pool.map(lambda name: self.create(name, defaults), names))
        return [
            {"table": name, "location": self.location(name), "created": made}
            for name, made in zip(names, created, strict=True)
        ]

    def create(self, table: str, property_defaults: bool | None = None) -> bool:
        """Create `table` if it does not exist; True if created.

        property_defaults: whether the session sets default table properties, when the
        caller has read it already (see `_property_defaults`).
        """
        spec = self.spec(table)
        if self.exists(table):
            return False
        if property_defaults is None:
            property_defaults = self._property_defaults()
        if self.config.storage == "path" and not property_defaults:
            # the first commit written directly, as Delta's CREATE TABLE writes it: no Spark
            # job (23 of them cost a new lakehouse about 13 s on 2 cores)
            made = self._retry(
                table,
                "create",
                lambda: create_local_table(
                    Path(self.location(table)), spec.schema, spec.properties()
                ),
            )
            self._existing.add(table)
            if made:
                log.info("created table %s at %s", table, self.location(table))
            return made
        builder = DeltaTable.createIfNotExists(self.spark).addColumns(spec.schema)
        for key, value in spec.properties().items():
            builder = builder.property(key, value)
        if self.config.storage == "path":
            clear_uncommitted_log(Path(self.location(table)))
            builder = builder.location(self.location(table))
        else:
            self.spark.sql(
                "CREATE SCHEMA IF NOT EXISTS IDENTIFIER(:schema)",
                args={"schema": f"{self.config.catalog}.{self.config.schemas[spec.layer]}"},
            )
            builder = builder.tableName(self._delta_name(table))

        def execute() -> None:
            # after a conflict the other job may have created it: createIfNotExists is a no-op
            builder.execute()

        self._retry(table, "create", execute)
        self._existing.add(table)
        log.info("created table %s at %s", table, self.location(table))
        return True

    def upgrade(self, tables: Iterable[str]) -> list[str]:
        """Bring existing `tables` of an older contract up to the current one where Delta
        can do it in place: nullable columns added since are added, and a column the contract
        now allows to be null loses its NOT NULL. The tables changed.

        A read already shows the added columns as null (`with_added_columns`), but a MERGE
        names the table's own columns, and an overwrite keeps its NOT NULL constraints; one
        schema read per table, so a job calls it only for the tables whose contract grew."""
        changed = []
        for table in tables:
            if not self.exists(table):
                continue
            found = {f.name: f for f in self._delta(table).toDF().schema.fields}
            name = self._sql_name(table)
            statements = []
            added = [
                f for f in self.spec(table).schema.fields if f.name not in found and f.nullable
            ]
            if added:
                columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in added)
                statements.append(f"ALTER TABLE {name} ADD COLUMNS ({columns})")
            for f in self.spec(table).schema.fields:
                if f.nullable and f.name in found and not found[f.name].nullable:
                    statements.append(f"ALTER TABLE {name} ALTER COLUMN `{f.name}` DROP NOT NULL")
            for statement in statements:
                self._retry(table, "upgrade", lambda s=statement: self.spark.sql(s))
                log.info("upgraded %s: %s", table, statement)
            if statements:
                changed.append(table)
        return changed

    def _sql_name(self, table: str) -> str:
        """The table as Spark SQL names it."""
        if self.config.storage == "path":
            return f"delta.`{self.location(table)}`"
        return self._delta_name(table)

    def _property_defaults(self) -> bool:
        """Whether the session sets default table properties (Delta's CREATE TABLE would
        write them into a new table's metadata: then Delta creates the tables itself)."""
        prefix = "spark.databricks.delta.properties.defaults."
        return any(key.startswith(prefix) for key in self.spark.conf.getAll)

    # ------------------------------------------------------------------ read
    def read(self, table: str, version: int | None = None) -> DataFrame:
        """The table now, or as of an earlier `version` (Delta time travel).

        A table never written is read as empty with its contract schema (it is created by
        its first write, or by `init`), so reading costs no Delta commit.
        """
        if version is None and not self.exists(table):
            return local_frame(self.spark, [], self.spec(table).schema)
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        if self.config.storage == "path":
            df = reader.load(self.location(table))
        else:
            df = reader.table(self.location(table))
        if table not in self._verified:
            check_contract(table, self.location(table), df.schema, self.spec(table))
            self._verified.add(table)
        return with_added_columns(df, self.spec(table).schema)

    def may_hold(self, table: str, matches: list[Match], version: int | None = None) -> bool:
        """Whether `table` as committed (at `version`, default its newest) may hold a row one
        of `matches` selects. False only for a local table that does not exist, or whose
        checksum at that version lists its files with statistics that rule every match out
        (read without Spark: no snapshot, no job); True when that cannot be told (a table
        elsewhere, no checksum, a file without statistics of a matched column)."""
        if self.config.storage != "path":
            return True
        path = Path(self.location(table))
        version = log_version(path) if version is None else version
        if version is None:
            return False
        files = checksum_files(path, version)
        strings = [f.name for f in self.spec(table).schema.fields if f.dataType == StringType()]
        return files is None or files_may_hold(files, matches, strings)

    def read_matching(self, table: str, match: Match) -> DataFrame:
        """The rows of `table` that `match` selects (as a replace's match: every column's
        value among the listed ones). A deferred job answers it without the table when its
        pending writes replace all such rows (pulsar_audit/deferred.py)."""
        return self.read(table).filter(match_filter(match))

    def held_in_memory(self, table: str, match: Match) -> bool:
        """Whether `read_matching(table, match)` reads only frames the job keeps in memory (a
        deferred job's pending writes): no table, nothing worth a checkpoint of its own."""
        return False

    def read_runs(self, table: str, runs: list[str] | None = None) -> DataFrame:
        """`table`'s rows of `runs` (None: every row), through `read_matching`."""
        return self.read(table) if runs is None else self.read_matching(table, {"run_id": runs})

    def version(self, table: str) -> int:
        self.create(table)
        return int(self._delta(table).history(1).select("version").first()[0])

    def commits(self, table: str) -> list[tuple[int, datetime]]:
        """(version, commit timestamp) of every commit of `table`, oldest first.

        One row per commit, never per data row: small enough to collect.
        """
        if not self.exists(table):
            return []
        history = self._delta(table).history().select("version", "timestamp")
        return sorted((int(r["version"]), r["timestamp"]) for r in history.collect())

    def version_at(self, table: str, at: datetime) -> int | None:
        """The last version of `table` committed at or before `at` (None: created later)."""
        versions = [version for version, ts in self.commits(table) if ts <= at]
        return versions[-1] if versions else None

    def read_as_of(self, table: str, at: datetime | None) -> DataFrame:
        """The table as it stood at `at` (now when None; empty if it did not exist yet)."""
        if at is None:
            return self.read(table)
        version = self.version_at(table, at)
        if version is None:
            return local_frame(self.spark, [], self.spec(table).schema)
        return self.read(table, version)

    def versions(self, tables: Iterable[str]) -> dict[str, int]:
        """The current version of each table; -1 for a table never written (not created).

        Local tables: read from the names in `_delta_log/` (no Spark job), so that a job can
        tell cheaply whether its inputs changed since it last ran.
        """
        if self.config.storage == "path":
            return local_versions(self.config, tables)
        return {t: self.version(t) if self.exists(t) else -1 for t in tables}

    def committed_versions(self, tables: Iterable[str]) -> dict[str, int]:
        """The tables' committed versions, as `versions` gives them, never committing a
        pending write first (see pulsar_audit/deferred.py)."""
        return Lakehouse.versions(self, tables)

    def commit_counts(self, tables: Iterable[str]) -> dict[str, int]:
        """How many versions this object's commits have written to each table (creations
        aside; a MERGE that changed nothing writes none): a table's version moved by more
        than that was written by another job meanwhile."""
        with self._commits_lock:
            return {t: self._commits[t] for t in tables}

    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Hold the lakehouse's lock `name` (local lakehouses; a no-op on a catalog)."""
        if self.config.storage != "path":
            return nullcontext()
        return locks.exclusive(self.config.lakehouse_path, name)

    # ------------------------------------------------------------------ stage state
    def stage_is_current(self, stage: str, fingerprint: str) -> bool:
        """Whether `stage` last ran on inputs with this fingerprint (then it can be skipped)."""
        state = self.read("stage_state").filter(F.col("stage") == stage)
        row = state.select("input_fingerprint").first()
        return row is not None and row[0] == fingerprint

    def record_stage(self, stage: str, fingerprint: str | Callable[[], str]) -> None:
        """Remember the fingerprint of the inputs `stage` has just been computed from.

        fingerprint: the value, or a function computing it from the lakehouse as it now is
        (a job whose writes are deferred computes it once they are committed).
        """
        self.record_stage_rows({stage: fingerprint() if callable(fingerprint) else fingerprint})

    def record_stage_rows(self, stages: dict[str, str]) -> None:
        """Remember several stages' fingerprints in one write."""
        rows = local_frame(
            self.spark, sorted(stages.items()), "stage string, input_fingerprint string"
        ).withColumn("computed_at", F.current_timestamp())
        self.merge("stage_state", rows)

    def pending(self) -> list[str]:
        """Tables with writes not yet committed: none (see pulsar_audit/deferred.py)."""
        return []

    def commit_behind(self, tables: list[str]) -> None:
        """Start committing `tables`' pending writes: nothing to do, writes commit at once."""

    def written(self, table: str) -> bool:
        """Whether `table` was ever written after its creation (a version above 0)."""
        return self.versions([table])[table] > 0

    # ------------------------------------------------------------------ write
    def append(self, table: str, df: DataFrame) -> int:
        """Append `df`; return the rows written."""
        self.create(table)
        return self._save(table, df, "append")

    def overwrite(self, table: str, df: DataFrame) -> int:
        """Replace the whole table with `df` (one Delta commit; earlier versions stay readable)."""
        self.create(table)
        return self._save(table, df, "overwrite")

    def overwrite_computed(self, table: str, rows: DataFrame) -> None:
        """`overwrite` with `rows`, a `checkpointed` frame the caller owns (it keeps or releases
        it after the commit): a deferred lakehouse pends it as it is, without computing the
        rows again into a checkpoint of its own (pulsar_audit/deferred.py)."""
        self.overwrite(table, rows)

    def merge(self, table: str, df: DataFrame, keys: Iterable[str] | None = None) -> None:
        """Upsert on the natural key: rows already present are updated, new ones inserted."""
        keys = tuple(keys or self.spec(table).key)
        if not keys:
            raise ValueError(f"table {table!r} declares no natural key to merge on")
        self.create(table)
        condition = same_keys(keys)
        self._retry(
            table,
            "merge",
            lambda: (
                self._delta(table)
                .alias("t")
                .merge(df.select(*self.spec(table).schema.fieldNames()).alias("s"), condition)
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            ),
        )

    def update_changed(
        self, table: str, df: DataFrame, columns: list[str], compared: list[str] | None = None
    ) -> None:
        """Set `columns` of existing rows (matched on the natural key) where they differ (where
        the `compared` ones differ, when given: e.g. a value and when it last changed)."""
        keys = self.spec(table).key
        differs = None
        for column in compared or columns:
            clause = ~F.col(f"t.{column}").eqNullSafe(F.col(f"s.{column}"))
            differs = clause if differs is None else differs | clause
        self._retry(
            table,
            "update",
            lambda: (
                self._delta(table)
                .alias("t")
                .merge(df.select(*keys, *columns).alias("s"), same_keys(keys))
                .whenMatchedUpdate(condition=differs, set={c: F.col(f"s.{c}") for c in columns})
                .execute()
            ),
        )

    def insert_new(self, table: str, df: DataFrame, keys: Iterable[str] | None = None) -> None:
        """Insert only rows whose natural key is absent (idempotent append)."""
        keys = tuple(keys or self.spec(table).key)
        self.create(table)
        self._retry(
            table,
            "insert",
            lambda: (
                self._delta(table)
                .alias("t")
                .merge(df.select(*self.spec(table).schema.fieldNames()).alias("s"), same_keys(keys))
                .whenNotMatchedInsertAll()
                .execute()
            ),
        )

    def replace_runs(self, table: str, df: DataFrame, run_ids: list[str]) -> int:
        """Atomically replace every row of `run_ids` with `df` (one Delta commit)."""
        return self.replace_where(table, df, {"run_id": run_ids})

    def replace_where(self, table: str, df: DataFrame, match: dict[str, list[str]]) -> int:
        """Atomically replace the rows whose columns hold the given values with `df`.

        match: column → values (ANDed across columns). Delta refuses the write if `df`
        holds a row outside the match, so a job can only replace what it owns. Returns the
        rows written, counted by the write itself.
        """
        self.create(table)
        if not match:
            raise ValueError("replace_where needs at least one column to match")
        if any(not values for values in match.values()):
            return 0
        self.check_match(table, match)
        return self._save(table, df, "overwrite", {"replaceWhere": match_predicate(match)})

    def replace_matching(self, table: str, df: DataFrame, matches: list[Match]) -> int:
        """Like `replace_where`, with the rows matching any of `matches` replaced (one commit)."""
        self.create(table)
        for match in matches:
            self.check_match(table, match)
        predicate = " OR ".join(f"({match_predicate(m)})" for m in matches)
        return self._save(table, df, "overwrite", {"replaceWhere": predicate})

    def check_match(self, table: str, match: Match) -> None:
        columns = self.spec(table).schema.fieldNames()
        unknown = [c for c in match if c not in columns]
        if unknown:
            raise ValueError(f"{table} has no columns {unknown}; columns are {columns}")

    def _save(
        self, table: str, df: DataFrame, mode: str, options: dict[str, str] | None = None
    ) -> int:
        """Write `df`'s contract columns in one Delta commit; return the rows it wrote.

        The count is observed on the write's own execution: no second pass over `df`.
        """
        columns = self.spec(table).schema.fieldNames()

        def write() -> int:
            written = Observation(f"rows_{table}")  # one per execution: a retry observes anew
            observed = df.select(*columns).observe(written, F.count(F.lit(1)).alias("rows"))
            writer: DataFrameWriter = observed.write.format("delta").mode(mode)
            for key, value in (options or {}).items():
                writer = writer.option(key, value)
            if self.config.storage == "path":
                writer.save(self.location(table))
            else:
                writer.saveAsTable(self.location(table))
            return int(observed_metrics(written, "rows")["rows"] or 0)

        rows = self._retry(table, mode, write)
        log.info("%s: wrote %d rows (%s)", table, rows, mode)
        return rows

    def _retry(self, table: str, what: str, commit: Callable[[], R]) -> R:
        """One Delta commit, retried when another job's commit conflicted with it; then the
        kill point `commit:<table>` (`create:<table>`), the crash suite's fault injection.
        A retired table (schemas.RETIRED_TABLES) is only read: a commit to it is refused."""
        if table in RETIRED_TABLES:
            raise ValueError(f"{table}: a retired table, only read now; nothing was written")
        result = retry_commit(f"{table} ({self.location(table)})", what, commit)
        if what != "create" and _made_a_version(result):
            with self._commits_lock:
                self._commits[table] += 1
        faults.point(f"{'create' if what == 'create' else 'commit'}:{table}")
        return result


def _made_a_version(result: object) -> bool:
    """Whether a commit's result says it wrote a version: a MERGE (its metrics frame) that
    affected no row writes none (Delta skips empty commits)."""
    if isinstance(result, DataFrame) and "num_affected_rows" in result.columns:
        row = result.first()
        return row is None or bool(row["num_affected_rows"])
    return True


def check_contract(table: str, location: str, found: StructType, spec: TableSpec) -> None:
    """Fail naming the table and its columns when it is another table altogether: its natural
    key or most of the contract's columns are missing. A table of an older contract version
    (a column added, dropped or retyped since) is left to the `schema` check (checks/)."""
    have = {f.name for f in found.fields}
    want = spec.schema.fieldNames()
    missing = [c for c in want if c not in have]
    if not (set(spec.key) & set(missing)) and len(missing) * 2 <= len(want):
        return
    raise EnvironmentProblem(
        f"{location} is not a pulsar-audit {table} table: it lacks the columns {missing} "
        f"(it has {sorted(have)}). Point --lakehouse (or the env's config) at a pulsar-audit "
        "lakehouse, or move that table away; nothing was written"
    )


def with_added_columns(df: DataFrame, contract: StructType) -> DataFrame:
    """A table of an older contract read as the current one: the nullable columns added since
    (trace format v1.1's, say) are null until its next write adds them (schema auto-merge)."""
    missing = [f for f in contract.fields if f.name not in df.columns and f.nullable]
    if not missing:
        return df
    return df.withColumns({f.name: F.lit(None).cast(f.dataType) for f in missing})


def match_predicate(match: Match) -> str:
    """A replace's match (column → values, ANDed across columns) as Delta's SQL predicate."""
    return " AND ".join(
        f"`{column}` IN ({', '.join(sql_string_literal(v) for v in sorted(set(values)))})"
        for column, values in match.items()
    )


def match_filter(match: Match) -> Column:
    """The same match as a filter: the rows a replace removes (a null value matches nothing).

    Plain `IN`s, ANDed: Delta skips the files whose statistics rule them out and Parquet
    skips row groups (a `coalesce` around it, as `match_column`, hides it from both: every
    file of the table is read)."""
    condition = None
    for column, values in match.items():
        clause = F.col(column).isin(sorted(set(values)))
        condition = clause if condition is None else condition & clause
    return F.lit(True) if condition is None else condition


def match_column(match: Match) -> Column:
    """The same match as a Column that is never null: true for the rows a replace removes,
    false for the others (null counts as not), so that its negation keeps the others."""
    return F.coalesce(match_filter(match), F.lit(False))


def sql_string_literal(value: str) -> str:
    """Quote `value` as a Spark SQL string literal (Delta's replaceWhere takes only SQL text)."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"
