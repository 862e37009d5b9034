"""Trace format v1's columnar form (Parquet): the same records, rules and reasons as JSONL."""

from __future__ import annotations

import gzip
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from kept_blocks import kept_blocks
from pyspark.sql import Window as W
from pyspark.sql import functions as F
from pyspark.sql import types as T
from trace_lines import parse_lines, read_numbered_lines

from ingest import skeleton
from ingest.files import (
    COLUMNAR_RECORD_BYTES,
    InputFile,
    batch_weights,
    batches,
    parquet_schema,
)
from ingest.trace_format import (
    ALL_OPTIONAL,
    REQUIRED,
    columnar_problems,
    parse_columnar,
    to_columnar,
)
from jobs.ingest import ingest_traces
from pulsar_audit.errors import InputError
from pulsar_audit.schemas import TRACE_COLUMNAR
from pulsar_audit.spark import GZIP_EXPANSION

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
KIND_TYPES = {"long": "bigint", "int": "int", "bool": "boolean", "string": "string"}
LINEAGE = ("source_file", "line_number", "ingest_id", "ingested_at")


def _row(**fields):
    """A columnar row: every column of the form, null unless given."""
    return tuple(fields.get(name) for name in TRACE_COLUMNAR.names)


def test_columnar_schema_is_every_field_of_the_format_typed():
    types = {f.name: f.dataType.simpleString() for f in TRACE_COLUMNAR}
    expected = {name: "string" for name in REQUIRED} | {"ts": "timestamp"}
    expected |= {name: KIND_TYPES[kind] for name, kind in ALL_OPTIONAL.items()}
    expected["extra"] = "map<string,string>"
    assert types == expected


def test_columnar_rows_get_the_reasons_the_json_form_gives(spark):
    at = datetime(2025, 3, 4, 10, 15, 30)
    base = {"run_id": "r", "topic": "t", "client": "p", "ts": at}
    rows = [
        _row(**base, role="producer", event="send", seq=1, extra={"host": "h1"}),
        _row(**{**base, "client": None}, role="producer", event="send", seq=2),
        _row(**base, role="observer", event="send", seq=3),
        _row(**base, role="producer", event="receive", seq=4),
        _row(**base, role="producer", event="send", seq=-4),
        _row(**base, role="producer", event="send"),
        _row(**{**base, "ts": None}, role="run", event="config", ensemble_size=3),
    ]
    frame = spark.createDataFrame(
        [(n, *r) for n, r in enumerate(rows, 1)],
        T.StructType([T.StructField("line_number", T.LongType()), *TRACE_COLUMNAR]),
    )
    got = parse_columnar(frame, ("line_number",)).orderBy("line_number").collect()
    assert [r.reason for r in got] == [
        None,
        "missing required field 'client'",
        "unknown role 'observer' (expected producer, consumer or run)",
        "unknown event 'receive' for role 'producer'",
        "field 'seq' must be an integer >= 0, got -4",
        "missing required field 'seq' on a send event",
        "missing required field 'ts'",
    ]
    first = got[0]
    assert (first.seq, first.ts, first.extra, first._blank) == (1, at, {"host": "h1"}, False)
    assert got[6].ensemble_size == 3 and got[1].extra == {}


def test_columnar_problems_name_unknown_and_mistyped_columns():
    schema = T.StructType(
        [
            T.StructField("run_id", T.StringType()),
            T.StructField("seq", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("host", T.StringType()),
        ]
    )
    assert columnar_problems(schema) == [
        "column 'seq' is string, expected bigint",
        "unknown column 'host' (string): expected only the fields of trace format v1, "
        "others as text in the map column 'extra'",
    ]
    assert columnar_problems(TRACE_COLUMNAR) == []
    twice = T.StructType([T.StructField("seq", T.LongType()), T.StructField("SEQ", T.LongType())])
    assert columnar_problems(twice) == [
        "column 'seq' appears 2 times (case aside)",
        "unknown column 'SEQ' (bigint): expected only the fields of trace format v1, "
        "others as text in the map column 'extra'",
    ]


def _table(lakehouse, name: str, *order: str) -> list[dict]:
    rows = lakehouse.read(name).drop(*LINEAGE).orderBy(*order).collect()
    return [r.asDict(recursive=True) for r in rows]


def _assert_same_event_tables(got, expected) -> None:
    """The three event tables of two lakehouses hold the same rows (lineage aside)."""
    for table, order in (
        ("producer_events", ("client", "event", "seq")),
        ("consumer_events", ("client", "event", "seq")),
        ("run_events", ("event", "ts")),
    ):
        assert _table(got, table, *order) == _table(expected, table, *order), table


@pytest.mark.slow
def test_ingest_of_the_columnar_form_gives_the_jsonl_forms_tables(spark, tmp_path, monkeypatch):
    from pulsar_audit.config import load_config
    from pulsar_audit.delta_io import Lakehouse

    jsonl = tmp_path / "jsonl"
    shutil.copytree(FIXTURES, jsonl)
    # The fixture's records the format accepts (some break a row rule), as one Parquet file.
    records = parse_lines(read_numbered_lines(spark, [str(p) for p in sorted(jsonl.iterdir())]))
    accepted = records.filter(F.col("reason").isNull()).orderBy("source_file", "line_number")
    columnar = tmp_path / "columnar"
    to_columnar(accepted).coalesce(1).write.parquet(str(columnar / "_out"))
    (part,) = (columnar / "_out").glob("part-*.parquet")
    part.rename(columnar / "run-a.parquet")
    shutil.rmtree(columnar / "_out")

    from_jsonl = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "lh-j")))
    from_columnar = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "lh-c")))
    kept_before = kept_blocks(spark)
    by_jsonl = ingest_traces(from_jsonl, jsonl)
    by_columnar = ingest_traces(from_columnar, columnar)
    # what either ingest kept for its batch (the staged rows, the blocks' line offsets) is freed
    assert kept_blocks(spark) <= kept_before

    # JSONL: 22 records, 9 accepted, 13 quarantined (3 by a row rule, 10 by the format);
    # the columnar file holds the 12 the format accepts: the same 9 accepted, the same 3 refused
    assert (by_jsonl.records, by_jsonl.accepted, by_jsonl.quarantined) == (22, 9, 13)
    assert (by_columnar.files, by_columnar.records) == (1, 12)
    assert (by_columnar.accepted, by_columnar.quarantined) == (9, 3)
    _assert_same_event_tables(from_columnar, from_jsonl)
    refused = {
        (r.source_file, r.line_number): (r.target_table, r.check, r.reason)
        for r in from_jsonl.read("quarantine").collect()
        if r.check != "trace_format"
    }
    assert len(refused) == 3
    # the Parquet file's rows in order: row N is its line N
    where = {n: (r.source_file, r.line_number) for n, r in enumerate(accepted.collect(), start=1)}
    expected = {n: refused[at] for n, at in where.items() if at in refused}
    got = from_columnar.read("quarantine").collect()
    assert {r.line_number: (r.target_table, r.check, r.reason) for r in got} == expected
    # its text: the row as a JSON object
    assert all(r.raw.startswith('{"run_id":"run-a","topic":') for r in got)

    # The same 12 rows as two files of 6 (some 8 KB each): a batch bound of 10 records cuts them
    # into two batches, whose tables are the one file's, each batch with its own ingest id; a
    # bound of 12 records (384 bytes, far below the files' bytes) takes both in one batch: the
    # files are weighed by their records.
    halves = tmp_path / "halves"
    numbered = accepted.withColumn(
        "_n", F.row_number().over(W.orderBy("source_file", "line_number"))
    )
    for name, half in (("run-a-1", F.col("_n") <= 6), ("run-a-2", F.col("_n") > 6)):
        rows = numbered.filter(half).orderBy("_n").drop("_n")
        to_columnar(rows).coalesce(1).write.parquet(str(halves / "_out"))
        (part,) = (halves / "_out").glob("part-*.parquet")
        part.rename(halves / f"{name}.parquet")
        shutil.rmtree(halves / "_out")
    monkeypatch.setattr(skeleton, "BATCH_BYTES", 10 * COLUMNAR_RECORD_BYTES)
    in_halves = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "lh-h")))
    by_halves = ingest_traces(in_halves, halves)
    assert (by_halves.files, by_halves.records) == (2, 12)
    assert (by_halves.accepted, by_halves.quarantined) == (9, 3)
    _assert_same_event_tables(in_halves, from_columnar)
    manifest = in_halves.read("ingested_files").select("path", "records", "ingest_id").collect()
    assert sorted((Path(r.path).name, r.records) for r in manifest) == [
        ("run-a-1.parquet", 6),
        ("run-a-2.parquet", 6),
    ]
    assert len({r.ingest_id for r in manifest}) == 2
    monkeypatch.setattr(skeleton, "BATCH_BYTES", 12 * COLUMNAR_RECORD_BYTES)
    assert sum(f.stat().st_size for f in halves.iterdir()) > 12 * COLUMNAR_RECORD_BYTES
    in_one = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "lh-o")))
    assert ingest_traces(in_one, halves).records == 12
    manifest = in_one.read("ingested_files").select("ingest_id").collect()
    assert len(manifest) == 2
    assert len({r.ingest_id for r in manifest}) == 1


@pytest.mark.slow
def test_a_parquet_file_of_another_shape_is_an_input_error(lakehouse, spark, tmp_path):
    folder = tmp_path / "bad"
    spark.createDataFrame([("r", "seven")], "run_id string, seq string").coalesce(1).write.parquet(
        str(folder / "_out")
    )
    (part,) = (folder / "_out").glob("part-*.parquet")
    part.rename(folder / "trace.parquet")
    shutil.rmtree(folder / "_out")
    with pytest.raises(
        InputError,
        match=r"trace\.parquet: not trace format v1's columnar form.*"
        r"column 'seq' is string, expected bigint",
    ):
        ingest_traces(lakehouse, folder)


def test_a_parquet_files_schema_is_read_from_its_footer_as_spark_reads_it(
    spark, tmp_path, monkeypatch
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    by_spark = tmp_path / "spark"
    spark.createDataFrame([_row(run_id="r", seq=7)], TRACE_COLUMNAR).coalesce(1).write.parquet(
        str(by_spark)
    )
    (spark_file,) = by_spark.glob("part-*.parquet")
    arrow_file = tmp_path / "arrow.parquet"  # no Spark schema in its metadata
    pq.write_table(
        pa.table({"run_id": ["r"], "seq": pa.array([7], pa.int64()), "ts": [datetime(2026, 1, 1)]}),
        arrow_file,
    )
    files = [InputFile(str(f), 0, "", f"file:{f}") for f in (spark_file, arrow_file)]
    spark.sparkContext.setJobGroup("footers", "parquet_schema")
    try:
        read = [parquet_schema(spark, file) for file in files]
    finally:
        spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("footers") == []  # no job
    for file, schema in zip(files, read, strict=True):
        # Spark's read makes every column nullable; the names and types are the same
        assert schema.simpleString() == spark.read.parquet(file.uri).schema.simpleString(), file
    assert read[0] == TRACE_COLUMNAR
    assert read[1].simpleString() == "struct<run_id:string,seq:bigint,ts:timestamp_ntz>"

    # a Spark whose internals differ (its footer reader not found): Spark's own read
    def missing(*_):
        raise TypeError("'JavaPackage' object is not callable")

    monkeypatch.setattr("ingest.files._footer_schema", missing)
    assert parquet_schema(spark, files[1]) == spark.read.parquet(files[1].uri).schema


def test_a_parquet_file_spark_cannot_read_is_an_input_error(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    not_parquet = tmp_path / "trace.parquet"
    not_parquet.write_text('{"run_id": "r"}\n')
    nanos = tmp_path / "nanos.parquet"  # pandas' unit, kept in Parquet 2.6: no Spark type
    pq.write_table(pa.table({"ts": pa.array([1], pa.timestamp("ns"))}), nanos)
    for file, found in (
        (not_parquet, r"trace\.parquet is not a Parquet file"),
        (nanos, r"TIMESTAMP\(NANOS"),
    ):
        with pytest.raises(
            InputError,
            match=rf"{file.name}: cannot be read as Parquet \(a columnar trace file\): .*{found}",
        ):
            parquet_schema(spark, InputFile(str(file), 0, "", f"file:{file}"))


def test_a_file_named_parquet_that_is_not_parquet_is_an_input_error(lakehouse, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "trace.parquet").write_text('{"run_id": "r"}\n')
    with pytest.raises(
        InputError,
        match=r"trace\.parquet: cannot be read as Parquet \(a columnar trace file\): "
        r".*trace\.parquet is not a Parquet file",
    ):
        ingest_traces(lakehouse, folder)
    assert lakehouse.read("ingested_files").count() == 0


def test_a_trace_in_a_folder_spark_listings_leave_out_is_an_input_error(lakehouse, tmp_path):
    spark = lakehouse.spark
    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / "run.jsonl").write_text((FIXTURES / "run-a.jsonl").read_text())
    # a columnar write stopped before renaming its part: a trace file Spark reads when named
    records = parse_lines(read_numbered_lines(spark, [str(FIXTURES / "run-a.jsonl")]))
    staging = folder / "_trace-run.parquet.tmp"
    to_columnar(records.filter(F.col("reason").isNull())).coalesce(1).write.parquet(str(staging))
    assert len(list(staging.glob("part-*.parquet"))) == 1
    with pytest.raises(InputError, match=r"it lies in the folder '_trace-run\.parquet\.tmp'"):
        ingest_traces(lakehouse, folder)
    assert lakehouse.read("ingested_files").count() == 0


def test_a_trace_file_spark_would_leave_out_by_its_name_is_an_input_error(lakehouse, tmp_path):
    folder = tmp_path / "hidden"
    folder.mkdir()
    (folder / "run.jsonl").write_text("")
    for name in ("_run.jsonl", ".run.parquet"):  # Spark would read neither, records or not
        (folder / name).write_text((FIXTURES / "run-a.jsonl").read_text())
    with pytest.raises(
        InputError, match=r"/hidden/\.run\.parquet \(and 1 more\): a file whose name begins"
    ):
        ingest_traces(lakehouse, folder)
    assert lakehouse.read("ingested_files").count() == 0


def test_a_batch_is_bounded_by_its_files_weights():
    files = [InputFile(f"f{i}", 1, "h") for i in range(4)]
    got = [[f.path for f in g] for g in batches(files, batch_bytes=10, weights=[4, 5, 9, 30])]
    assert got == [["f0", "f1"], ["f2"], ["f3"]]


def test_a_gzip_file_weighs_the_text_it_holds(spark, tmp_path):
    text = "".join(f'{{"run_id": "r", "seq": {n}}}\n' for n in range(2000))
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    plain = tmp_path / "t.jsonl"
    plain.write_text(text)
    size = packed.stat().st_size
    assert size * 8 < len(text)  # repetitive lines: the trailer's record, not an estimate
    files = [
        InputFile(str(packed), size, "h"),
        InputFile(str(plain), len(text), "h"),
        # not here (a file elsewhere): the estimate from its name
        InputFile(str(tmp_path / "gone.jsonl.gz"), 100, "h"),
    ]
    assert batch_weights(spark, files) == [len(text), len(text), 100 * GZIP_EXPANSION]
    # cut by the text, as the plain file is
    weights = batch_weights(spark, files)
    got = batches(files[:2], batch_bytes=len(text), weights=weights[:2])
    assert [[f.path for f in g] for g in got] == [[str(packed)], [str(plain)]]


@pytest.mark.slow
def test_a_parquet_file_weighs_its_records_once_its_bytes_could_hold_a_batch(spark, tmp_path):
    rows = [_row(run_id="r", seq=n) for n in range(1000)]
    spark.createDataFrame(rows, TRACE_COLUMNAR).coalesce(1).write.parquet(str(tmp_path / "_out"))
    (part,) = (tmp_path / "_out").glob("part-*.parquet")
    parquet = tmp_path / "t.parquet"
    part.rename(parquet)
    text = tmp_path / "t.jsonl"
    text.write_text("{}\n" * 5)
    files = [
        InputFile(str(parquet), parquet.stat().st_size, "h"),
        InputFile(str(text), 15, "h"),
        InputFile(str(tmp_path / "not-parquet.parquet"), 7, "h"),  # no footer: its size
    ]
    (tmp_path / "not-parquet.parquet").write_text("not Parquet")
    size = parquet.stat().st_size
    # bytes that could hold more records than a batch: the footer's 1,000 records are read
    assert batch_weights(spark, files, batch_bytes=size) == [1000 * COLUMNAR_RECORD_BYTES, 15, 7]
    # bytes that cannot (a record takes at least a byte): sizes, no footer read
    whole = (size + 7) * COLUMNAR_RECORD_BYTES
    assert batch_weights(spark, files, batch_bytes=whole) == [size, 15, 7]
