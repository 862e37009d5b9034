"""One job, one commit per table: a Lakehouse whose writes wait for `commit()`.

A small job (a chaos run, the examples) is mostly fixed cost per Delta commit and per read of
a table just written. `DeferredLakehouse` takes the same calls as `Lakehouse`, so every stage
runs the same code, but:

- a write computes its rows once, into a checkpoint (its row count observed on the way), and
  is *pending*: nothing reaches Delta yet (a local frame's rows, held in its plan, and rows
  its caller computed already, `overwrite_computed`, are pended as they are: no Spark job);
- a read of a table with pending writes is answered from them, applied to the table as it
  stood when the job began (read without Spark when that was a new, empty table): the job
  never reads back what it has just written;
- `commit()` writes each table once, whatever the number of stages that wrote it: its pending
  replaces become one `replaceWhere` whose predicate is the OR of theirs (Delta still refuses
  a row outside it), its merges one MERGE, an update of rows a replace of the same job wrote
  is folded into that replace. Independent tables are written side by side.

Commit order keeps what a crash leaves recoverable and what `--as-of` reads consistent:
the data tables first, side by side; then gold.anomalies (its version marks a finished
recomputation, serve/forensics.py); then the manifest (bronze.ingested_files: a file is
"ingested" only once everything derived from it is written, so a job killed before it takes
the same files in again and recomputes) beside `watch`'s live state (folded from the
micro-batch's bronze rows, committed before both: a watch killed before the state's commit
folds them again; killed after it but before the manifest's, it takes the files in again,
the same rows, and finds the micro-batch in the state, `jobs/live_state.py:already_folded`,
so it does not fold them twice); then the state tables that let later jobs skip work
(run_state, stage_state), whose fingerprints are computed from the committed versions.

Only for a local (path) lakehouse and an input of about one ingest batch (`defers`), and for
one job at a time (the caller holds the lakehouse's ingest lock until `commit()` returns): the
pending rows live in the driver's block manager.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse, Match, check_contract, match_column, match_filter
from pulsar_audit.delta_log import local_table_state
from pulsar_audit.local_frames import local_frame, local_rows
from pulsar_audit.spark import (
    observed_metrics,
    release,
    same_keys,
    side_by_side_bounded,
    spark_stage,
)

log = logging.getLogger(__name__)

# The largest input (as text: pulsar_audit.spark.local_input_bytes) a job defers: about one
# ingest batch (ingest/files.py BATCH_BYTES). A larger input is written as it is computed, batch
# by batch, and read back from Delta: its pending rows would not fit the driver's memory, and
# the fixed costs deferral saves are small beside its work.
MAX_DEFERRED_BYTES = 1 << 30
# Tables committed after all others, in this order (see the module docstring).
LATE_TABLES = (
    ("anomalies",),
    ("ingested_files", "live_state"),
    ("run_state", "stage_state"),
)
COMMIT_THREADS = 4


@dataclass(frozen=True)
class _Write:
    """One pending write: `frame` (checkpointed, contract columns) and what it does.

    kind: "replace" (rows matching any of `matches` are replaced by `frame`; no matches: the
    whole table), "append", "merge" (upsert on `keys`), "update" (set `columns` of existing
    rows matched on `keys`).
    """

    kind: str
    frame: DataFrame
    rows: int = -1  # rows of `frame` (-1: not counted)
    matches: tuple[Match, ...] = ()
    keys: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    compared: tuple[str, ...] = ()  # an update: set `columns` where these differ (all: none)
    owned: bool = True  # `frame` is released with the job's (False: its caller's to release)


@dataclass
class _Table:
    writes: list[_Write] = field(default_factory=list)
    base_version: int | None = None  # the table's version when the job first touched it
    base_empty: bool = False
    committed: bool = False
    commits: int = 0  # this job's commits of the table


def defers(lakehouse: Lakehouse, input_bytes: int | None) -> bool:
    """Whether a job on `input_bytes` of input defers its writes (a local lakehouse, a local
    input of at most MAX_DEFERRED_BYTES)."""
    return (
        lakehouse.config.storage == "path"
        and input_bytes is not None
        and input_bytes <= MAX_DEFERRED_BYTES
    )


class DeferredLakehouse(Lakehouse):
    """A Lakehouse whose writes are pending until `commit()` (see the module docstring)."""

    def __init__(self, lakehouse: Lakehouse):
        if lakehouse.config.storage != "path":
            raise ValueError("deferred writes need a local (path) lakehouse")
        super().__init__(lakehouse.spark, lakehouse.config)
        self._existing = lakehouse._existing
        self._verified = lakehouse._verified
        self._tables: dict[str, _Table] = {}
        self._stages: dict[str, Callable[[], str]] = {}
        self._guard = threading.RLock()
        # commits started before the job's end (`commit_behind`): one at a time, each
        # committing its tables side by side
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commit-behind")
        self._behind: list[Future] = []

    # ------------------------------------------------------------------ state
    def _table(self, name: str) -> _Table:
        with self._guard:
            entry = self._tables.get(name)
            if entry is None:
                self.create(name)
                state = local_table_state(Path(self.location(name)))
                entry = _Table(base_version=state.version, base_empty=state.empty)
                if state.empty and state.schema is not None:
                    check_contract(name, self.location(name), state.schema, self.spec(name))
                self._tables[name] = entry
            return entry

    def pending(self) -> list[str]:
        """Tables with writes not yet committed (nor being committed)."""
        with self._guard:
            return sorted(t for t, e in self._tables.items() if e.writes and not e.committed)

    def written(self, table: str) -> bool:
        """Whether the table holds (or will, once committed) rows written after its creation."""
        with self._guard:
            entry = self._tables.get(table)
            if entry is not None and entry.writes:
                return True
        return super().written(table)

    # ------------------------------------------------------------------ read
    def read(self, table: str, version: int | None = None) -> DataFrame:
        if version is not None:
            return super().read(table, version)
        entry = self._table(table)
        with self._guard:
            writes = list(entry.writes)
        if entry.base_empty and not writes:  # a new table, still empty: no Spark job
            return local_frame(self.spark, [], self.spec(table).schema)
        if not writes:
            return super().read(table)
        if entry.base_empty:
            base = local_frame(self.spark, [], self.spec(table).schema)
        else:
            base = super().read(table, entry.base_version)
        return _apply(base, writes)

    def may_hold(self, table: str, matches: list[Match], version: int | None = None) -> bool:
        """As committed or pending: a table with pending writes may hold anything."""
        with self._guard:
            entry = self._tables.get(table)
            if entry is not None and entry.writes and version is None:
                return True
        return super().may_hold(table, matches, version)

    def read_matching(self, table: str, match: Match) -> DataFrame:
        """Without the table when no committed row `match` selects is left: the pending
        writes replace every such row (a micro-batch's bronze rows of its own files, just
        ingested), or the statistics of the version the job began from rule every such row
        out (the rows of runs this job takes in for the first time) and the pending writes,
        if any, only replace and append. Then from the pending frames alone (none: no row):
        no Delta snapshot, no file-filtering job, no scan of the committed version."""
        writes = self._without_table(table, match)
        if writes is not None:
            empty = local_frame(self.spark, [], self.spec(table).schema)
            return _apply(empty, writes).filter(match_filter(match))
        return super().read_matching(table, match)

    def held_in_memory(self, table: str, match: Match) -> bool:
        return self._without_table(table, match) is not None

    def _without_table(self, table: str, match: Match) -> list[_Write] | None:
        """The pending writes `read_matching(table, match)` is answered from alone (none: no
        row), or None when it reads the table."""
        entry = self._table(table)
        with self._guard:
            writes = list(entry.writes)
        if (writes and _replaced(writes, match)) or self._base_lacks(table, entry, writes, match):
            return writes
        return None

    def _base_lacks(self, table: str, entry: _Table, writes: list[_Write], match: Match) -> bool:
        """Whether the committed version the job began from holds no row `match` selects,
        by its files' statistics (read without Spark), and `writes` cannot bring one in
        (replaces and appends only: a merge or an update is not reasoned about)."""
        if not writes:  # nothing pending: the table as committed now, as `read` gives it
            return not Lakehouse.may_hold(self, table, [match])
        if not _only_replaces_and_appends(writes):
            return False
        if entry.base_empty:
            return True
        return entry.base_version is not None and not Lakehouse.may_hold(
            self, table, [match], entry.base_version
        )

    def versions(self, tables):  # type: ignore[override]
        """Committed versions: pending writes of `tables` are committed first."""
        tables = list(tables)
        waiting = [t for t in tables if t in self.pending()]
        if waiting:
            log.info("deferred: committing %s early (their versions were asked for)", waiting)
            self._commit_tables(waiting)
        return super().versions(tables)

    # ------------------------------------------------------------------ write
    def _pend(self, table: str, write: _Write) -> None:
        entry = self._table(table)
        with self._guard:
            if entry.committed:
                raise RuntimeError(f"{table}: written again after the job committed it")
            entry.writes.append(write)

    def _kept(self, table: str, df: DataFrame, match: Match | None = None) -> tuple[DataFrame, int]:
        """`df`'s contract columns computed once into a checkpoint; and its rows.

        match: a replace's match; a row outside it fails the write, as Delta's replaceWhere
        refuses it (counted in the same pass).
        """
        columns = self.spec(table).schema.fieldNames()
        rows = local_rows(df)
        if rows is not None:  # rows held in the plan (a manifest's, a check's): no job
            local = df.select(*columns)
            if match is not None and rows:
                # a filter of a local frame is evaluated on the driver: its rows collected
                # without a Spark job
                outside = len(local.filter(~match_column(match)).select(F.lit(1)).collect())
                if outside:
                    raise ValueError(_outside_error(table, outside, match))
            return local, rows
        observed = Observation(f"pending_{table}")
        outside = F.lit(0) if match is None else F.when(~match_column(match), 1).otherwise(0)
        kept = df.select(*columns).observe(
            observed, F.count(F.lit(1)).alias("rows"), F.sum(outside).alias("outside")
        )
        kept = kept.localCheckpoint(eager=True)
        counts = observed_metrics(observed, "rows", "outside")
        if counts.get("outside"):
            release(kept)
            raise ValueError(_outside_error(table, counts["outside"], match))
        return kept, int(counts.get("rows", 0))

    def replace_where(self, table: str, df: DataFrame, match: Match) -> int:
        if not match:
            raise ValueError("replace_where needs at least one column to match")
        if any(not values for values in match.values()):
            return 0
        self.check_match(table, match)
        frame, rows = self._kept(table, df, match)
        self._pend(table, _Write("replace", frame, rows, matches=(match,)))
        log.info("%s: %d rows pending (replace)", table, rows)
        return rows

    def overwrite(self, table: str, df: DataFrame) -> int:
        frame, rows = self._kept(table, df)
        self._pend(table, _Write("replace", frame, rows))
        return rows

    def overwrite_computed(self, table: str, rows: DataFrame) -> None:
        """Pends `rows` as they are (computed already, the caller's: not released here)."""
        columns = self.spec(table).schema.fieldNames()
        frame = rows if rows.columns == columns else rows.select(*columns)
        self._pend(table, _Write("replace", frame, owned=False))

    def merge(self, table: str, df: DataFrame, keys=None) -> None:  # type: ignore[override]
        keys = tuple(keys or self.spec(table).key)
        if not keys:
            raise ValueError(f"table {table!r} declares no natural key to merge on")
        frame, rows = self._kept(table, df)
        self._pend(table, _Write("merge", frame, rows, keys=keys))

    def update_changed(  # type: ignore[override]
        self, table: str, df: DataFrame, columns: list[str], compared: list[str] | None = None
    ) -> None:
        keys = tuple(self.spec(table).key)
        frame = df.select(*keys, *columns).localCheckpoint(eager=True)
        update = _Write("update", frame, keys=keys, columns=tuple(columns))
        self._pend(table, replace(update, compared=tuple(compared or ())))

    def append(self, table: str, df: DataFrame) -> int:
        frame, rows = self._kept(table, df)
        self._pend(table, _Write("append", frame, rows))
        return rows

    def insert_new(self, table: str, df: DataFrame, keys=None) -> None:  # type: ignore[override]
        """Refused by design, not unfinished: an idempotent insert decides what is new from
        the committed table, which a pending write would hide; the tables written so (alerts,
        provisional findings) are written at once, through the plain Lakehouse, after
        `commit()`."""
        raise TypeError(
            f"insert_new({table!r}) on a deferred lakehouse: write it through the plain "
            "Lakehouse after commit() (an idempotent insert must see the committed rows)"
        )

    def record_stage(self, stage: str, fingerprint: str | Callable[[], str]) -> None:
        """Remembered now, written last: a fingerprint given as a function is computed from
        the versions the job's commits left."""
        with self._guard:
            self._stages[stage] = fingerprint if callable(fingerprint) else (lambda: fingerprint)

    def stage_is_current(self, stage: str, fingerprint: str) -> bool:
        with self._guard:
            if stage in self._stages:  # recorded by this job: computed from its own writes
                return False
        return super().stage_is_current(stage, fingerprint)

    # ------------------------------------------------------------------ commit
    def commit_behind(self, tables: list[str]) -> None:
        """Start committing `tables` now, in the background, while the job goes on computing
        from them (it reads them as before: their pending writes over the version it began
        from). Their writes must be complete: a later write to one of them fails. None of
        LATE_TABLES."""
        late = {t for group in LATE_TABLES for t in group}
        chosen = [t for t in tables if t in self.pending() and t not in late]
        with self._guard:
            for table in chosen:
                self._tables[table].committed = True  # no more writes from here on
            if chosen:
                self._behind.append(self._background.submit(self._commit_behind, chosen))

    def _commit_behind(self, tables: list[str]) -> None:
        with spark_stage("commit behind"):
            self._commit_tables(tables, mark=False)

    def commit(self) -> None:
        """Write every pending table once, in the order of LATE_TABLES (see the docstring)."""
        for started in self._behind:
            started.result()
        self._behind.clear()
        late = [t for group in LATE_TABLES for t in group]
        self._commit_tables([t for t in self.pending() if t not in late])
        for group in LATE_TABLES:
            if "stage_state" in group and self._stages:
                stages = {s: f() for s, f in self._stages.items()}
                self._stages.clear()
                Lakehouse.record_stage_rows(self, stages)
            self._commit_tables([t for t in group if t in self.pending()])

    def _commit_tables(self, tables: list[str], mark: bool = True) -> None:
        if mark:
            with self._guard:
                for table in tables:
                    self._tables[table].committed = True
        side_by_side_bounded([lambda t=t: self._commit_table(t) for t in tables], COMMIT_THREADS)

    def _commit_table(self, table: str) -> None:
        with self._guard:
            entry = self._tables[table]
            writes = list(entry.writes)
        path = Path(self.location(table))
        if entry.base_empty and local_table_state(path).version == entry.base_version:
            # Empty when the job began and untouched since (the lock keeps other writers
            # out): what the job's writes leave is all the table holds, so one append
            # commits it, without Delta's search for the files a replace or merge removes.
            if all(w.rows == 0 or w.kind == "update" for w in writes):
                return  # nothing to add to an empty table: no commit
            rows = _apply(local_frame(self.spark, [], self.spec(table).schema), writes)
            Lakehouse.append(self, table, rows)
            entry.commits += 1
            return
        for write in _coalesced(self, writes):
            if write.kind == "replace" and write.matches and self._holds_none(table, write):
                # no committed row can match (the table's file statistics say so): nothing to
                # remove, so the rows are appended, without Delta's search for the files a
                # replace removes (a snapshot of the whole table computed by Spark jobs);
                # none to add, no commit. A watch's micro-batch takes new files in so.
                if write.rows == 0:
                    log.info("%s: nothing to replace or add: no commit", table)
                    continue
                Lakehouse.append(self, table, write.frame)
            else:
                _write_through(self, table, write)
            entry.commits += 1

    def _holds_none(self, table: str, write: _Write) -> bool:
        """Whether no row of `table` as committed can match `write`'s matches, by the
        statistics of its files its newest checksum lists; only while no other job has
        committed to it since this one began (the lock keeps them out until `commit()`
        returns), as for an empty table."""
        entry = self._tables[table]
        version = local_table_state(Path(self.location(table))).version
        # the versions this job made (a MERGE that changed nothing made none)
        made = self._commits[table]
        if entry.base_version is None or version != entry.base_version + made:
            return False
        return not Lakehouse.may_hold(self, table, list(write.matches), version)

    def committed_alone(self) -> bool:
        """Whether every table this job committed is at the version its commits alone lead
        to: no other job wrote any of them in between (then what the job read from its own
        writes is what the tables hold)."""
        with self._guard:
            entries = {t: e for t, e in self._tables.items() if e.committed}
        now = super().versions(list(entries))
        return all(
            e.base_version is not None and now[t] == e.base_version + e.commits
            for t, e in entries.items()
        )

    def release(self) -> None:
        """Free every pending frame's blocks (after `commit`, or when the job failed: a
        commit started in the background is waited for first)."""
        for started in self._behind:
            started.exception()
        self._background.shutdown(wait=True)
        with self._guard:
            for entry in self._tables.values():
                for write in entry.writes:
                    if write.owned:
                        release(write.frame)
            self._tables.clear()


def _outside_error(table: str, rows: object, match: Match | None) -> str:
    return (
        f"{table}: {rows} row(s) to write fall outside the rows replaced ({match}); "
        "nothing was written"
    )


def _apply(base: DataFrame, write: _Write | list[_Write]) -> DataFrame:
    """The table `base` after `write` (or several in turn), as Delta would leave it."""
    if isinstance(write, list):
        for each in write:
            base = _apply(base, each)
        return base
    columns = base.columns
    if write.kind == "append":
        return base.unionByName(write.frame.select(*columns))
    if write.kind == "replace":
        if not write.matches:
            return write.frame.select(*columns)
        removed = F.lit(False)
        for match in write.matches:
            removed = removed | match_column(match)
        return base.filter(~removed).unionByName(write.frame.select(*columns))
    keys = write.keys
    if write.kind == "merge":
        kept = base.alias("t").join(
            write.frame.select(*keys).alias("s"), same_keys(keys, "t", "s"), how="left_anti"
        )
        return kept.unionByName(write.frame.select(*columns))
    # update: the matched rows take the new values of `columns` (where the `compared` ones
    # differ, when given), the rest keep theirs
    updates = write.frame.withColumn("_hit", F.lit(True))
    joined = base.alias("t").join(updates.alias("s"), same_keys(keys, "t", "s"), how="left")
    hit = F.col("s._hit").isNotNull()
    if write.compared:
        differs = F.lit(False)
        for c in write.compared:
            differs = differs | ~F.col(f"t.{c}").eqNullSafe(F.col(f"s.{c}"))
        hit = hit & differs
    return joined.select(
        *[
            F.when(hit, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c)
            if c in write.columns
            else F.col(f"t.{c}").alias(c)
            for c in columns
        ]
    )


def _only_replaces_and_appends(writes: list[_Write]) -> bool:
    """Whether every one of `writes` is a replace or an append: a merge or an update could
    bring a committed row into a match, and is not reasoned about."""
    return all(w.kind in ("replace", "append") for w in writes)


def _replaced(writes: list[_Write], match: Match) -> bool:
    """Whether `writes` (a table's pending ones, in order) leave none of the table's committed
    rows that `match` selects: one of them is a replace whose own match selects all those rows
    (or the whole table), and every one is a replace or an append (a merge or an update could
    not bring a committed row into `match` then, but is not reasoned about)."""
    if not _only_replaces_and_appends(writes):
        return False

    def covers(replaced: Match) -> bool:
        return all(
            column in match and set(match[column]) <= set(values)
            for column, values in replaced.items()
        )

    return any(
        w.kind == "replace" and (not w.matches or any(covers(m) for m in w.matches)) for w in writes
    )


def _coalesced(lakehouse: DeferredLakehouse, writes: list[_Write]) -> list[_Write]:
    """Consecutive replaces as one replace (a later one wins over an earlier one's rows),
    consecutive merges on the same keys as one merge, and an update folded into the replace
    before it (what it leaves, rows the job did not write, is kept as an update)."""
    out: list[_Write] = []
    for write in writes:
        last = out[-1] if out else None
        if last is not None and last.kind == write.kind == "replace" and last.matches:
            if not write.matches:
                out[-1] = write
                continue
            merged = _apply(last.frame, write)
            out[-1] = _Write("replace", merged, matches=(*last.matches, *write.matches))
        elif last is not None and last.kind == write.kind == "merge" and last.keys == write.keys:
            out[-1] = _Write("merge", _apply(last.frame, write), keys=write.keys)
        elif last is not None and last.kind == "replace" and write.kind == "update":
            folded = _apply(last.frame, write)
            out[-1] = _Write("replace", folded, matches=last.matches)
            rest = write.frame.alias("s").join(
                last.frame.select(*write.keys).alias("t"),
                same_keys(write.keys, "s", "t"),
                how="left_anti",
            )
            if not rest.isEmpty():
                out.append(replace(write, frame=rest))
        else:
            out.append(write)
    return out


def _write_through(lakehouse: DeferredLakehouse, table: str, write: _Write) -> None:
    """One Delta commit of `write`, through the plain Lakehouse's methods."""
    if write.kind == "append":
        Lakehouse.append(lakehouse, table, write.frame)
    elif write.kind == "replace" and not write.matches:
        Lakehouse.overwrite(lakehouse, table, write.frame)
    elif write.kind == "replace":
        rows = Lakehouse.replace_matching(lakehouse, table, write.frame, list(write.matches))
        log.info("%s: %d rows committed", table, rows)
    elif write.kind == "merge":
        Lakehouse.merge(lakehouse, table, write.frame, write.keys)
    else:
        Lakehouse.update_changed(
            lakehouse, table, write.frame, list(write.columns), list(write.compared) or None
        )
