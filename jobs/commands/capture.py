"""`pulsar-audit cluster|capture|chaos|zk ...`: a local Pulsar, trace capture, chaos scenarios
(each analyzed once captured), ZooKeeper capture."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from pathlib import Path

from capture.chaos import ACTIONS, DEFAULT_HOLD_S, NEEDS_NETNS
from capture.scenarios import (
    CHURN_MODES,
    CONSUMER_FAULTS,
    CONSUMERS,
    LIVE_DEFAULTS,
    NETNS_SESSION_MS,
    RATE,
    SCENARIOS,
    plan_chaos,
)
from jobs.context import EXIT_OK, Context
from pulsar_audit.errors import UsageError
from pulsar_audit.kinds import SUBSCRIPTION_TYPES
from pulsar_audit.output import format_table
from pulsar_audit.paths import cache_dir
from pulsar_audit.secrets import redact_url

ROLL_S = 2.0  # the trace files' rolling period: `watch` sees a run's events this late at most


def _workdir(ctx: Context) -> Path:
    from capture.cluster import default_workdir

    return Path(ctx.args.workdir) if ctx.args.workdir else default_workdir()


def cmd_cluster(ctx: Context) -> int:
    from capture import cluster

    action, workdir = ctx.args.action, _workdir(ctx)
    if action == "up":
        session_ms = NETNS_SESSION_MS if ctx.args.netns else None
        cluster.up(
            workdir, ctx.args.brokers, ctx.args.bookies, ctx.args.netns, session_ms,
            ctx.args.load_manager, ctx.args.session_expired, ctx.args.autorecovery,
            ctx.args.skip_lost_data, ctx.args.ledger_entries,
        )  # fmt: skip
    if action == "down":
        stopped = cluster.down(workdir)
        ctx.emit({"workdir": str(workdir), "stopped": stopped}, _down_text)
        return EXIT_OK
    ctx.emit(cluster.status(workdir), _status_text)
    return EXIT_OK


def _down_text(result: dict) -> str:
    if not result["stopped"]:
        return f"no cluster recorded in {result['workdir']}"
    return "\n".join(f"{name}: {how}" for name, how in result["stopped"].items())


def _status_text(result: dict) -> str:
    if not result["processes"]:
        return f"no cluster in {result['workdir']} (start one with `pulsar-audit cluster up`)"
    head = (
        f"{result['kind']} in {result['workdir']}: "
        f"{'running' if result['running'] else 'NOT all running'}, "
        f"service {redact_url(result['service_url'])}, admin {redact_url(result['admin_url'])}, "
        f"started in {result['startup_s']} s"
    )
    return (
        head + "\n" + format_table(result["processes"], ["name", "pid", "alive", "rss_mb", "log"])
    )


def _capture_options(ctx: Context, state, scenario: str, urls: tuple | None = None):  # noqa: ANN001, ANN202
    """The run's options from the arguments; `urls` (service, admin) stand in for a cluster's
    when the options are only checked, before any cluster is started."""
    from capture.chaos import parse_actions
    from capture.harness import CaptureOptions, new_run_id, parse_config

    args = ctx.args
    specs = parse_actions(args.chaos or [], hold_s=args.hold_s)
    service_url = args.service_url or (state.service_url if state else None)
    admin_url = args.admin_url or (state.admin_url if state else None)
    service_url, admin_url = urls or (service_url, admin_url)
    if not service_url or not admin_url:
        raise UsageError("no cluster: pass --service-url and --admin-url, or `cluster up` first")
    scenario = "+".join(spec.label for spec in specs) or scenario
    run_id = new_run_id(scenario.replace(":", "").replace("+", "-then-"))
    return CaptureOptions(
        service_url=service_url,
        admin_url=admin_url,
        topic=args.topic or f"audit-{run_id}",
        messages=args.messages,
        out=Path(args.out) if args.out else cache_dir() / "pulsar" / "traces" / run_id,
        in_flight=args.in_flight,
        config=parse_config(args.config or "1-1-1"),
        chaos=specs or None,
        consumer=_consumer_kind(args),
        deduplication=args.dedup,
        batching=args.batching,
        scenario=scenario,
        run_id=run_id,
        rate=args.rate or 0.0,
        subscription_type=args.subscription_type or "Exclusive",
        consumers=args.consumers,
        keys=args.keys,
        ordering_keys=args.ordering_keys,
        nack_every=args.nack_every,
        consumer_churn=args.consumer_churn,
        consume_rate=args.consume_rate,
        roll_s=_roll_s(args),
        roll_logs=args.watch,  # a watch beside the run takes the logs as they roll
    )


def _roll_s(args: argparse.Namespace) -> float | None:
    if args.roll_s < 0 or (args.watch and not args.roll_s):
        raise UsageError(f"--roll-s {args.roll_s}: expected seconds >= 0, and > 0 with --watch")
    return args.roll_s or None


def _consumer_kind(args: argparse.Namespace) -> str:
    """--consumer as given, else a Reader unless a subscription is asked for (a type other
    than Exclusive, or live consumers)."""
    if args.consumer:
        return args.consumer
    wants_subscription = args.consumers or args.subscription_type not in (None, "Exclusive")
    return "subscription" if wants_subscription else "reader"


def _state_for(ctx: Context):  # noqa: ANN202
    """The running cluster of --workdir, if the URLs given (if any) are one of its brokers."""
    from capture.cluster import running

    state = running(_workdir(ctx))
    if state and ctx.args.admin_url:
        webs = {p.address("web") for p in state.processes if "web" in p.ports}
        if ctx.args.admin_url.rstrip("/").split("//")[-1] not in webs:
            return None  # another Pulsar: no logs to copy, no processes to kill
    return state


def cmd_capture_run(ctx: Context) -> int:
    state = _state_for(ctx)
    result = _columnar(ctx, _capture_watched(ctx, _capture_options(ctx, state, "control"), state))
    ctx.emit(result, _capture_text)
    return EXIT_OK


def _capture_watched(ctx: Context, opts, state) -> dict:  # noqa: ANN001
    """The capture, with `watch` of its folder beside it when --watch is given."""
    from capture.harness import capture
    from jobs.watch_beside import watching

    args = ctx.args
    home = Path(args.watch_home) if args.watch_home else cache_dir() / "pulsar" / "watch"
    with watching(args.watch, opts.out, home / opts.run_id, args.env) as beside:
        captured = capture(opts, state)
        if beside:
            captured["watch"] = beside.finish()
    return captured


def _columnar(ctx: Context, captured: dict) -> dict:
    """With --columnar: the run's trace rewritten in the columnar form (Parquet), once the
    run has ended (the spool writes JSONL: each line is durable as it is written)."""
    if not ctx.args.columnar:
        return captured
    from ingest.traces import columnar_from_jsonl

    out, run_id = Path(captured["out"]), captured["run_id"]
    jsonl = sorted(out.glob(f"trace-{run_id}-*.jsonl"))
    written = columnar_from_jsonl(ctx.spark, jsonl, f"trace-{run_id}")
    captured = {**captured, "trace_files": [str(p) for p in written]}
    (out / "capture.json").write_text(json.dumps(captured, indent=1, default=str) + "\n")
    return captured


def _capture_text(r: dict) -> str:
    from jobs.watch_beside import watch_text

    consume = r["consume"]
    reader = consume["consumer"]
    if "consumers" in consume:  # live consumers: how many processes, of which type
        reader = f"{len(consume['consumers'])} {consume['subscription_type']} consumer processes"
    churn = f"; churn: {r['churn']['steps']}" if r.get("churn") else ""
    return (
        f"run {r['run_id']}: {r['acked']}/{r['messages']} acked, {r['nacked']} nacked "
        f"({r['produce_rate']} msg/s); {reader} received {consume['received']} "
        f"({consume['read_rate']} msg/s), end reached: {consume['reached_end']}; "
        f"chaos: {r['chaos'] or 'none'}{churn}\ntrace and logs in {r['out']}"
    ) + (f"\n{watch_text(r['watch'])}" if r.get("watch") else "")


def cmd_chaos_run(ctx: Context) -> int:
    from capture import cluster

    args = ctx.args
    plan = plan_chaos(args.scenario, args.fault_at, args.then or [], args.messages)
    name, label = plan.names[0], plan.label
    args.config = args.config or plan.config
    args.chaos = plan.chaos or None
    if name in CONSUMER_FAULTS:
        _default(args, {**LIVE_DEFAULTS, **CONSUMER_FAULTS[name]})
    if args.rate is None:
        args.rate = RATE if plan.paced else 0.0
    _capture_options(ctx, None, label, urls=("pulsar://unused", "http://unused")).check()
    workdir = _workdir(ctx)
    state = cluster.running(workdir)  # a running cluster is used as it is
    started_here = state is None
    if state is None:
        brokers, bookies = args.brokers or plan.brokers, args.bookies or plan.bookies
        _check_shape(plan, brokers, bookies, args.config)
        netns = args.netns or any(n in NEEDS_NETNS for n in plan.names)
        state = cluster.up(
            workdir, brokers, bookies, netns,
            NETNS_SESSION_MS if netns else None, session_expired=args.session_expired,
            autorecovery=args.autorecovery, skip_lost_data=args.skip_lost_data,
            ledger_entries=args.ledger_entries,
        )  # fmt: skip
    try:
        captured = _capture_watched(ctx, _capture_options(ctx, state, label), state)
    finally:
        if started_here and not args.keep_cluster:
            cluster.down(workdir)
    captured = _columnar(ctx, captured)
    from jobs.analyze import analyze_path

    result = analyze_path(ctx, captured["out"])
    ctx.emit({**result, "capture": captured}, _chaos_text)
    return EXIT_OK


def _check_shape(plan, brokers: int, bookies: int, config: str) -> None:  # noqa: ANN001
    """Refuse, before starting it, a cluster too small for the run's E-Qw-Qa or one whose every
    bookie a quorum wipe would take (what capture refuses once the cluster runs)."""
    from capture.disk_loss import check_quorum
    from capture.harness import parse_config
    from capture.processes import ClusterState

    planned = ClusterState("cluster", "", "", "", brokers, bookies)
    for name in plan.names:
        check_quorum(name, planned, parse_config(config))


def _default(args: argparse.Namespace, values: dict) -> None:
    """Set each option left at its default (None or 0) to `values`' value."""
    for name, value in values.items():
        if not getattr(args, name):
            setattr(args, name, value)


def cmd_chaos_study(ctx: Context) -> int:
    from capture.study import STUDY_SCENARIOS, outage_table, run_study

    args = ctx.args
    scenarios = [name.strip() for name in args.scenario.split(",") if name.strip()]
    unknown = [name for name in scenarios if name not in STUDY_SCENARIOS]
    if unknown or not scenarios or args.repeat < 1:
        raise UsageError(
            f"--scenario {args.scenario!r}: expected a comma list of {', '.join(STUDY_SCENARIOS)} "
            "and --repeat >= 1"
        )
    out = Path(args.out) if args.out else cache_dir() / "pulsar" / "study"
    runs = run_study(_workdir(ctx), out, scenarios, args.repeat, args.messages, args.rate)
    from jobs.analyze import analyze_path

    result = analyze_path(ctx, out)
    ids = {run["run_id"] for run in runs}
    outages = [o for o in result["outages"] if o["run_id"] in ids]
    table = outage_table(runs, outages)
    ctx.emit({"table": table, "outages": outages, "out": str(out)}, _study_text)
    return EXIT_OK


def _study_text(result: dict) -> str:
    columns = ["scenario", "runs", "runs_with_outage", "outages", "median_ms", "p99_ms",
               "max_ms", "backoff_steps"]  # fmt: skip
    return format_table(result["table"], columns) + f"\nruns in {result['out']}"


def _chaos_text(result: dict) -> str:
    from jobs.commands.run_tables import wide_run_columns
    from serve.summary import OUTAGE_FIELDS

    runs = format_table(result["runs"], wide_run_columns(result["runs"]))
    parts = [_capture_text(result["capture"]), runs]
    if result["outages"]:
        parts.append(format_table(result["outages"], list(OUTAGE_FIELDS)))
    return "\n".join(parts)


def _capture_args(p: argparse.ArgumentParser, messages: int) -> None:
    p.add_argument("--workdir", metavar="DIR", help="cluster work dir (default .cache/pulsar/run)")
    p.add_argument("--messages", type=int, default=messages, metavar="N")
    p.add_argument("--config", metavar="E-Qw-Qa", help="ensemble, write and ack quorum")
    p.add_argument("--in-flight", type=int, default=10_000, metavar="N", help="max pending sends")
    _consumer_args(p)
    p.add_argument("--dedup", action="store_true", help="enable broker deduplication")
    p.add_argument("--batching", action="store_true", help="the producer batches its sends "
                   "(client defaults: 10 ms or 1000 messages a batch)")  # fmt: skip
    p.add_argument("--out", metavar="DIR", help="trace folder (default .cache/pulsar/traces/RUN)")
    p.add_argument("--rate", type=float, metavar="MSG/S", help="pace the sends (default: as "
                   "fast as --in-flight allows; chaos runs with a fault: 250/s)")  # fmt: skip
    p.add_argument("--hold-s", type=float, default=DEFAULT_HOLD_S, metavar="S",
                   help="how long a network fault holds before the links heal; "
                   "wipe-qw-bookies-disk-in-turn: how long after one bookie came back empty "
                   "the next one is wiped (AutoRecovery's time to re-replicate)")  # fmt: skip
    p.add_argument("--columnar", action="store_true", help="rewrite the trace as Parquet (the "
                   "format's columnar form) when the run ends")  # fmt: skip
    p.add_argument("--roll-s", type=float, default=ROLL_S, metavar="S", help="close each trace "
                   "file every S seconds that it holds events and move it whole into --out, "
                   "where `watch` takes it (0: each file grows until the run ends)")  # fmt: skip
    p.add_argument("--watch", action="store_true", help="run `pulsar-audit watch` of --out "
                   "beside the run (its own lakehouse under --watch-home/RUN) and print "
                   "its micro-batches as they come; it leaves when the run is over")  # fmt: skip
    p.add_argument("--watch-home", metavar="DIR", help="where each --watch keeps its lakehouse, "
                   "checkpoint and log, a folder per run (default .cache/pulsar/watch; not "
                   "under --out: the watch would take its Parquet files for traces)")  # fmt: skip


def _consumer_args(p: argparse.ArgumentParser) -> None:
    """Who consumes: a read-back after production, or live consumers of a subscription."""
    p.add_argument(
        "--consumer",
        choices=CONSUMERS,
        help="read back after production with a Reader (default), one consumer of a new "
        "subscription, or of one the admin API created at the latest position before the first "
        "send (pre-created: apache/pulsar#18236)",
    )
    p.add_argument(
        "--subscription-type",
        choices=SUBSCRIPTION_TYPES,
        help="of the consumers (default Exclusive, as a Reader is); on subscribe and receive",
    )
    p.add_argument(
        "--consumers",
        type=int,
        default=0,
        metavar="N",
        help="N consumers of one subscription, each a process, consuming while the producer sends",
    )
    p.add_argument(
        "--keys",
        type=int,
        default=0,
        metavar="N",
        help="key the messages from N keys (key-<seq mod N>); 0: no key",
    )
    p.add_argument(
        "--ordering-keys",
        type=int,
        default=0,
        metavar="N",
        help="give them ordering keys from N (okey-<seq mod N>): Key_Shared dispatches by these",
    )
    p.add_argument(
        "--consume-rate",
        type=float,
        default=0.0,
        metavar="MSG/S",
        help="each live consumer receives at most MSG/S while the producer sends (a slow "
        "consumer: its backlog stays in the topic, its receiver queue a second's worth; read "
        "from the bookies once out of the broker's cache), then at full speed once the "
        "producer is done",
    )
    p.add_argument(
        "--nack-every",
        type=int,
        default=0,
        metavar="K",
        help="live consumers negatively acknowledge a message whose seq is a multiple of K once",
    )
    p.add_argument(
        "--consumer-churn",
        nargs="?",
        const="kill",
        choices=CHURN_MODES,
        help="a live consumer leaves at 30%% of the acks (kill: SIGKILL, default; close), a new "
        "one joins at 50%%, the first comes back under its name at 70%%; rolling: every "
        "consumer in turn closes and comes straight back (20%%-80%% of the acks)",
    )


def _autorecovery_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--autorecovery", action="store_true", help="also run BookKeeper's "
                   "AutoRecovery (auditor and replication worker) as a process of the cluster; "
                   "its log goes with the bookies'")  # fmt: skip
    p.add_argument("--skip-lost-data", action="store_true", help="the brokers skip entries no "
                   "bookie has any more (autoSkipNonRecoverableData) instead of failing reads"
                   )  # fmt: skip
    p.add_argument("--ledger-entries", type=int, default=0, metavar="N", help="the brokers roll "
                   "a topic's ledger every N entries, at once (default: Pulsar's 50,000, not "
                   "before 10 minutes), so that a short run writes many ledgers")  # fmt: skip


def cmd_zk_capture(ctx: Context) -> int:
    from capture.zk_capture import ZkCapture

    args = ctx.args
    capture = ZkCapture(args.zookeeper, args.out, roots=tuple(args.root or ()) or _roots())
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rows = capture.run(args.duration, stop)
    result = {"out": str(args.out), "rows": rows, "resyncs": capture.resyncs}
    ctx.emit(result, lambda r: f"{r['rows']} rows written to {r['out']} ({r['resyncs']} resyncs)")
    return EXIT_OK


def cmd_zk_dump(ctx: Context) -> int:
    from capture.zk_capture import dump

    args = ctx.args
    rows = dump(args.zookeeper, args.out, tuple(args.root or ()) or _roots())
    ctx.emit(
        {"out": str(args.out), "rows": rows}, lambda r: f"{r['rows']} snapshot rows in {r['out']}"
    )
    return EXIT_OK


def _roots() -> tuple[str, ...]:
    from capture.zk_capture import DEFAULT_ROOTS

    return DEFAULT_ROOTS


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "cluster", parents=[common], help="start, stop or inspect a local Apache Pulsar",
        description="A standalone Pulsar (ZooKeeper metadata; 1 broker, 1 bookie) or, with "
        "more brokers or bookies, ZooKeeper + bookies + brokers as separate JVMs, on free "
        "loopback ports. Logs and state under --workdir.",
    )  # fmt: skip
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("--brokers", type=int, default=1, metavar="N")
    p.add_argument("--bookies", type=int, default=1, metavar="N")
    p.add_argument("--netns", action="store_true", help="each process in its own network "
                   "namespace on a private bridge (needs root, iproute2, iptables)")  # fmt: skip
    p.add_argument("--load-manager", choices=("modular", "extensible"), default="modular",
                   help="extensible: ExtensibleLoadManagerImpl (bundles can be transferred)"
                   )  # fmt: skip
    p.add_argument("--session-expired", choices=("reconnect", "shutdown"), default="reconnect",
                   help="a broker whose ZooKeeper session expired: reconnects (4.0's "
                   "default) or shuts down (as 2.x did in the chaos-test post)")  # fmt: skip
    _autorecovery_arg(p)
    p.add_argument("--workdir", metavar="DIR", help="state, conf, data and logs (default "
                   ".cache/pulsar/run)")  # fmt: skip
    p.set_defaults(handler=cmd_cluster)

    capture = sub.add_parser("capture", help="capture traces from a Pulsar")
    kinds = capture.add_subparsers(dest="kind", metavar="KIND", required=True)
    p = kinds.add_parser(
        "run", parents=[common], help="produce N messages, read them back, record the trace",
        description="Produce --messages with at most --in-flight pending, record every "
        "send/ack/nack, then read the topic back (Reader to the end, or a subscription) or, "
        "with --consumers N, consume it while it is produced by N consumer processes of one "
        "subscription of --subscription-type; all as trace format v1.1 in --out; copies the "
        "run's broker/bookie logs to --out/logs.",
    )  # fmt: skip
    p.add_argument("--service-url", metavar="URL", help="default: the cluster of --workdir")
    p.add_argument("--admin-url", metavar="URL", help="default: the cluster of --workdir")
    p.add_argument("--topic", metavar="T", help="default: audit-<run id>")
    p.add_argument("--chaos", action="append", metavar="ACTION@ACK_COUNT", help="one of "
                   f"{', '.join(ACTIONS)} when ACK_COUNT messages are acked; repeatable: "
                   "the actions fire in the order given, each at its mark and once the one "
                   "before it is done (marks must not decrease)")  # fmt: skip
    _capture_args(p, messages=100_000)
    p.set_defaults(handler=cmd_capture_run)

    chaos = sub.add_parser("chaos", help="chaos scenarios end to end")
    kinds = chaos.add_subparsers(dest="kind", metavar="KIND", required=True)
    p = kinds.add_parser(
        "run", parents=[common], help="cluster up + capture with chaos + ingest + analyze",
        description="Start the cluster the scenario needs (unless one runs in --workdir: then "
        "that one), capture a run with the fault at --fault-at of the messages, then ingest "
        "and analyze it like `analyze`. Scenarios that cut links start a namespaced cluster.",
    )  # fmt: skip
    names = ", ".join(sorted(SCENARIOS))
    p.add_argument("--scenario", required=True, metavar="NAME",
                   help=f"one of {names}; kill-bookies:N kills N")  # fmt: skip
    p.add_argument("--then", action="append", metavar="SCENARIO@FRACTION",
                   help="a further cluster action (a scenario name, not control or a consumer "
                   "fault) when this fraction of the messages is acked, after --scenario's; "
                   "repeatable, in order; the cluster started is big enough for every action "
                   "(e.g. --scenario unload --fault-at 0.05 --then wipe-qw-bookies-disk@0.2)"
                   )  # fmt: skip
    p.add_argument("--keep-cluster", action="store_true", help="leave a cluster it started up")
    p.add_argument("--fault-at", type=float, default=0.5, metavar="FRACTION",
                   help="inject the fault when this fraction of the messages is acked")  # fmt: skip
    p.add_argument("--brokers", type=int, metavar="N", help="cluster size if it starts one")
    p.add_argument("--bookies", type=int, metavar="N", help="cluster size if it starts one")
    p.add_argument("--netns", action="store_true", help="start the cluster namespaced even "
                   "for a scenario that does not cut links")  # fmt: skip
    p.add_argument("--session-expired", choices=("reconnect", "shutdown"), default="reconnect",
                   help="if it starts a cluster: a broker whose ZooKeeper session expired "
                   "reconnects (4.0's default) or shuts down (as 2.x did in the post)")  # fmt: skip
    _autorecovery_arg(p)
    _capture_args(p, messages=20_000)
    p.set_defaults(handler=cmd_chaos_run, service_url=None, admin_url=None, topic=None)

    p = kinds.add_parser(
        "study", parents=[common], help="unload versus transfer: N runs each, outages compared",
        description="On a two-broker cluster with the extensible load manager (started unless "
        "one runs in --workdir), capture --repeat runs of each scenario (unload: the bundle "
        "is unloaded; transfer: it is moved to the other broker), analyze them, and print "
        "the producers' outages per scenario: count, median, p99, max, backoff step.",
    )  # fmt: skip
    p.add_argument("--scenario", default="unload,transfer", metavar="A,B")
    p.add_argument("--repeat", type=int, default=10, metavar="N")
    p.add_argument("--messages", type=int, default=3000, metavar="N")
    p.add_argument("--rate", type=float, default=500.0, metavar="MSG/S")
    p.add_argument("--workdir", metavar="DIR", help="cluster work dir (default .cache/pulsar/run)")
    p.add_argument("--out", metavar="DIR", help="runs folder (default .cache/pulsar/study)")
    p.set_defaults(handler=cmd_chaos_study)


def register_zk(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    zk = sub.add_parser("zk", help="watch or dump Pulsar's metadata in ZooKeeper (no Spark)")
    actions = zk.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, handler, text in (
        ("capture", cmd_zk_capture, "record every create/change/delete until --duration ends"),
        ("dump", cmd_zk_dump, "write the current tree as snapshot rows (a saved dump)"),
    ):
        p = actions.add_parser(name, parents=[common], help=text, description=text)
        p.add_argument("--zookeeper", required=True, metavar="HOST:PORT", help="connect string")
        p.add_argument("--out", required=True, metavar="FILE", help="JSONL file (appended to)")
        p.add_argument(
            "--root",
            action="append",
            help="path to watch (repeatable; default: "
            "/namespace /managed-ledgers /ledgers /admin/policies /loadbalance/brokers)",
        )
        if name == "capture":
            p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
        p.set_defaults(handler=handler)
