# The two commands a fresh clone needs; each sets up what it needs first (scripts/setup.sh).
.PHONY: setup test analyze lint

setup:
	bash scripts/setup.sh

# Run the whole test suite (pytest's exit 5, "no tests collected", fails like any other).
# The 30 slowest tests are listed at the end, so CI shows where its time goes.
PYTEST_ARGS ?= --durations=30
test: setup
	.venv/bin/python -m pytest $(PYTEST_ARGS)

lint: setup
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

# The main job on the embedded default (local Spark, ./lakehouse): the committed example traces.
analyze: setup
	.venv/bin/pulsar-audit analyze examples --env local
