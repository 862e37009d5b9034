"""pulsar-audit core: what every stage shares (config, Spark, table contracts, Delta I/O, CLI)."""

__version__ = "0.1.0"
