"""Benchmark of pulsar-audit against two reference checkers (DuckDB SQL, an in-memory dict).

Nothing here is part of the product: see bench/README.md.
"""
