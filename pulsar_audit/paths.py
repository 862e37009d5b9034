"""Where the checkout's caches live (jars, Pulsar distribution), overridable by environment."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """The git-ignored cache of JVM artifacts: $PULSAR_AUDIT_CACHE or <repo>/.cache."""
    return Path(os.environ.get("PULSAR_AUDIT_CACHE", REPO_ROOT / ".cache"))


def jars_dir() -> Path:
    return cache_dir() / "jars"


def pulsar_lib_dir() -> Path:
    """Apache Pulsar server jars (and ZooKeeper's), resolved by scripts/setup.sh."""
    return cache_dir() / "pulsar" / "lib"
