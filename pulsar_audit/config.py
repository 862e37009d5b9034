"""One typed configuration, loaded from conf/<env>.yaml and checked key by key."""

from __future__ import annotations

import os
import re
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from types import UnionType
from typing import Any, get_args, get_origin, get_type_hints

import yaml

from pulsar_audit.errors import ConfigError

ENV_VAR = "PULSAR_AUDIT_ENV"
CONF_DIR_VAR = "PULSAR_AUDIT_CONF_DIR"
MASTER_VAR = "PULSAR_AUDIT_SPARK_MASTER"
DEFAULT_ENV = "local"
LAYERS = ("bronze", "silver", "gold")


@dataclass(frozen=True)
class SparkConfig:
    master: str | None
    app_name: str
    shuffle_partitions: int
    driver_memory: str | None
    conf: dict[str, str] = field(default_factory=dict)
    # Session settings for the ingest only (pulsar_audit.spark.for_input sets them for a
    # small local input large enough to pay for generated code).
    ingest_conf: dict[str, str] = field(default_factory=dict)
    # True on a cluster whose executors do not have pulsar-audit installed: the session ships
    # the package to them as a zip (SparkContext.addPyFile), as spark-submit --py-files would.
    ship_package: bool = False


@dataclass(frozen=True)
class MlflowConfig:
    tracking_uri: str
    experiment: str


@dataclass(frozen=True)
class PipelineConfig:
    outage_threshold_ms: int
    backoff_ladder_ms: list[int]
    # Infrastructure events from this long before a finding began until this long after it
    # ended are candidate causes.
    cause_before_ms: int = 5000
    cause_after_ms: int = 0
    # Failover and Key_Shared ownership: a consumer's two deliveries of one partition (or key)
    # at most this far apart, with another consumer's between them, is an overlap (shorter
    # than the client's first reconnect backoff: it cannot have reconnected in between).
    ownership_gap_ms: int = 100
    # Key_Shared: an acked message first received this long after its ack, while later-acked
    # messages were already received, is a stuck key.
    stuck_key_ms: int = 10000
    # `watch`: an acked message not delivered while its subscription has delivered later
    # messages of its producer and partition for this long (trace clock) is a suspected loss.
    suspected_loss_ms: int = 1000


@dataclass(frozen=True)
class PulsarSinkConfig:
    """Alerts as JSON messages on a Pulsar topic, keyed by the alert's dedup key."""

    service_url: str
    topic: str
    send_timeout_ms: int = 5000


@dataclass(frozen=True)
class WebhookSinkConfig:
    """Alerts as JSON POSTs; `hmac_secret_env` names the env var holding the signing secret."""

    url: str
    max_attempts: int = 5
    backoff_initial_ms: int = 200
    backoff_max_ms: int = 5000
    timeout_ms: int = 5000
    hmac_secret_env: str | None = None


@dataclass(frozen=True)
class FileSinkConfig:
    """Alerts appended as JSON lines to `path` ("{lakehouse}" is replaced by its root)."""

    path: str


@dataclass(frozen=True)
class SinkConfig:
    """One named alert sink: exactly one of pulsar, webhook or file."""

    name: str
    pulsar: PulsarSinkConfig | None = None
    webhook: WebhookSinkConfig | None = None
    file: FileSinkConfig | None = None

    @property
    def kind(self) -> str:
        return next(k for k in SINK_KINDS if getattr(self, k) is not None)


SINK_KINDS = ("pulsar", "webhook", "file")


@dataclass(frozen=True)
class AlertsConfig:
    """Which findings become alerts, and where they are sent (no sinks: nothing is sent)."""

    outage_threshold_ms: int = 1000
    risk_threshold: float = 0.5
    sinks: list[SinkConfig] = field(default_factory=list)


# `watch`'s file sources: Spark's file source (local, any Hadoop file system) or Databricks'
# Auto Loader (`cloudFiles`, on a Databricks cluster only).
WATCH_SOURCES = ("files", "auto_loader")


@dataclass(frozen=True)
class WatchConfig:
    """How `watch` lists the landing folder: `source` is one of WATCH_SOURCES; warm_up: a
    local watch started on an empty landing folder first runs its micro-batches over a
    made-up run in a scratch lakehouse, so that the run's first ones find its JVM warm
    (jobs/live_warm.py)."""

    source: str = "files"
    warm_up: bool = True


@dataclass(frozen=True)
class Config:
    """Where tables live and how Spark, MLflow and the detectors are set up.

    storage: "path" keeps every table as a Delta path under `lakehouse`;
    "catalog" names them `catalog.<schemas[layer]>.<table>` (Databricks).
    """

    env: str
    storage: str
    spark: SparkConfig
    mlflow: MlflowConfig
    pipeline: PipelineConfig
    lakehouse: str | None = None
    catalog: str | None = None
    schemas: dict[str, str] = field(default_factory=dict)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)

    @property
    def lakehouse_path(self) -> Path:
        if self.lakehouse is None:
            raise ConfigError(f"env {self.env!r} stores tables in a catalog, not a lakehouse path")
        return Path(self.lakehouse).expanduser().resolve()

    @property
    def mlflow_tracking_uri(self) -> str:
        if "{lakehouse}" in self.mlflow.tracking_uri:
            return self.mlflow.tracking_uri.replace("{lakehouse}", str(self.lakehouse_path))
        return self.mlflow.tracking_uri


def default_conf_dir() -> Path:
    """conf/ of the checkout, else the copy inside an installed wheel; PULSAR_AUDIT_CONF_DIR
    says otherwise."""
    if os.environ.get(CONF_DIR_VAR):
        return Path(os.environ[CONF_DIR_VAR])
    checkout = Path(__file__).resolve().parent.parent / "conf"
    return checkout if checkout.is_dir() else Path(__file__).resolve().parent / "conf"


def load_config(
    env: str | None = None,
    lakehouse: str | None = None,
    conf_dir: Path | None = None,
    master: str | None = None,
    catalog: str | None = None,
    schema_prefix: str | None = None,
) -> Config:
    """Load conf/<env>.yaml (env from argument, $PULSAR_AUDIT_ENV, or "local").

    lakehouse: overrides the local lakehouse root (only for storage "path").
    master: overrides spark.master (default: $PULSAR_AUDIT_SPARK_MASTER, else the file's).
    catalog, schema_prefix: override the catalog and name the layers' schemas
    `<prefix>_bronze|silver|gold` (only for storage "catalog"; e.g. a per-user dev schema).
    """
    env = env or os.environ.get(ENV_VAR) or DEFAULT_ENV
    conf_dir = conf_dir or default_conf_dir()
    path = conf_dir / f"{env}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in conf_dir.glob("*.yaml"))
        raise ConfigError(f"no config for env {env!r}: {path} does not exist (known envs: {known})")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    raw["env"] = env
    if lakehouse is not None:
        raw["lakehouse"] = lakehouse
    _override(raw, path, master or os.environ.get(MASTER_VAR), catalog, schema_prefix)
    config = _build(Config, raw, where=str(path))
    _validate(config, path)
    return config


def _override(
    raw: dict[str, Any],
    path: Path,
    master: str | None,
    catalog: str | None,
    schema_prefix: str | None,
) -> None:
    """Apply the command line's (or environment's) overrides to the raw config mapping."""
    if master:
        if not isinstance(raw.get("spark"), dict):
            raise ConfigError(f"{path}: a Spark master override needs a 'spark' mapping")
        raw["spark"] = {**raw["spark"], "master": master}
    if (catalog or schema_prefix) and raw.get("storage") != "catalog":
        raise ConfigError(
            f"{path}: --catalog and --schema-prefix need storage 'catalog', "
            f"got {raw.get('storage')!r}"
        )
    if catalog:
        raw["catalog"] = catalog
    if schema_prefix:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", schema_prefix):
            raise ConfigError(
                f"schema prefix {schema_prefix!r}: expected letters, digits and underscores"
            )
        raw["schemas"] = {layer: f"{schema_prefix}_{layer}" for layer in LAYERS}


def _validate(config: Config, path: Path) -> None:
    if config.storage == "path":
        if not config.lakehouse:
            raise ConfigError(f"{path}: storage 'path' needs key 'lakehouse'")
    elif config.storage == "catalog":
        missing = [layer for layer in LAYERS if layer not in config.schemas]
        if not config.catalog or missing:
            raise ConfigError(
                f"{path}: storage 'catalog' needs 'catalog' and schemas for {list(LAYERS)}; "
                f"missing schemas: {missing}"
            )
    else:
        raise ConfigError(f"{path}: storage must be 'path' or 'catalog', got {config.storage!r}")
    _validate_alerts(config.alerts, path)
    if config.watch.source not in WATCH_SOURCES:
        raise ConfigError(
            f"{path}: watch.source must be one of {list(WATCH_SOURCES)}, "
            f"got {config.watch.source!r}"
        )
    if config.pipeline.outage_threshold_ms <= 0:
        raise ConfigError(f"{path}: pipeline.outage_threshold_ms must be > 0")
    ladder = config.pipeline.backoff_ladder_ms
    if not ladder or any(b <= a for a, b in zip(ladder, ladder[1:], strict=False)):
        raise ConfigError(f"{path}: pipeline.backoff_ladder_ms must be a non-empty rising list")


def _validate_alerts(alerts: AlertsConfig, path: Path) -> None:
    names = [sink.name for sink in alerts.sinks]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: alerts.sinks: names must be unique, got {names}")
    for sink in alerts.sinks:
        kinds = [k for k in SINK_KINDS if getattr(sink, k) is not None]
        if len(kinds) != 1:
            raise ConfigError(
                f"{path}: alerts.sinks {sink.name!r}: expected exactly one of "
                f"{list(SINK_KINDS)}, got {kinds}"
            )
        if sink.webhook is not None and sink.webhook.max_attempts < 1:
            raise ConfigError(f"{path}: alerts.sinks {sink.name!r}: max_attempts must be >= 1")


def _build(cls: type, raw: Any, where: str) -> Any:
    """Build dataclass `cls` from a mapping, failing on unknown, missing or mistyped keys."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    hints = get_type_hints(cls)
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; expected keys are {sorted(names)}")
    missing = sorted(f.name for f in fields(cls) if f.name not in raw and _is_required(f))
    if missing:
        raise ConfigError(f"{where}: missing keys {missing}")
    values = {}
    for name, value in raw.items():
        hint = hints[name]
        inner = _optional_dataclass(hint)
        if inner is not None:
            values[name] = None if value is None else _build(inner, value, f"{where}: {name}")
        elif get_origin(hint) is list and is_dataclass(get_args(hint)[0]):
            if not isinstance(value, list):
                raise ConfigError(f"{where}: {name}: expected a list, got {value!r}")
            item = get_args(hint)[0]
            values[name] = [_build(item, v, f"{where}: {name}[{i}]") for i, v in enumerate(value)]
        else:
            values[name] = _coerce(value, hint, f"{where}: {name}")
    return cls(**values)


def _optional_dataclass(hint: Any) -> type | None:
    """The dataclass of a `D` or `D | None` hint, else None."""
    if is_dataclass(hint):
        return hint
    if isinstance(hint, UnionType):
        classes = [a for a in get_args(hint) if is_dataclass(a)]
        return classes[0] if classes else None
    return None


def _is_required(f: Any) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def _coerce(value: Any, hint: Any, where: str) -> Any:
    text = str(hint)
    if value is None:
        if "None" in text:
            return None
        raise ConfigError(f"{where}: must not be null")
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int or text.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if text.startswith("list[int]"):
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(f"{where}: expected a list of integers, got {value!r}")
        return list(value)
    if text.startswith("dict"):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value
