# The two commands a fresh clone needs; each sets up what it needs first (scripts/setup.sh).
.PHONY: setup test analyze lint

setup:
	bash scripts/setup.sh

# Run the whole test suite (pytest's exit 5, "no tests collected", fails like any other).
# The 30 slowest tests are listed at the end, so CI shows where its time goes. Two workers
# (pytest-xdist; tests/conftest.py groups the tests that share a cluster or a fixture): a
# test's own Spark driver mostly keeps one core busy, so two overlap on the two cores.
PYTEST_ARGS ?= --durations=30 -n 2 --dist loadgroup
test: setup
	.venv/bin/python -m pytest $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

# The main job on the embedded default (local Spark, ./lakehouse): the committed example traces.
analyze: setup
	.venv/bin/pulsar-audit analyze examples --env local
