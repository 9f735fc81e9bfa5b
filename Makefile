# anpred: one entry point for set-up, the main job and the tests.
.PHONY: env runtimes runtime demo test test-fast lint bench clean

PY := .venv/bin/python
DEMO_OUT ?= runs/demo

## The libraries' environment (.venv; deployment runtimes are not in it: `make runtimes`).
env:
	@scripts/setup-env.sh

## Deployment-runtime environments (docs/runtimes.md): every one, or one by its environment
## name (`make runtime NAME=litert`; `anpred libs` shows each runtime's environment).
runtimes: env
	@ANPRED_RUNTIMES=all scripts/setup-runtimes.sh

runtime: env
	@test -n "$(NAME)" || { echo "make runtime NAME=<environment>; environments: $$(cd requirements/runtimes && ls *.txt | sed 's/\.txt$$//' | tr '\n' ' ')"; exit 2; }
	@ANPRED_RUNTIMES="$(NAME)" scripts/setup-runtimes.sh

## Main job: anchor-level analysis of yolov8n across every installed library, with its report.
demo: env
	rm -rf $(DEMO_OUT)
	$(PY) -m anpred run yolov8n --libs all --images 2 --out $(DEMO_OUT)

## The whole test suite (slow tests included).
# tensorflow and paddle must never share a process (import segfault): two pytest runs.
PYTEST := $(PY) -m pytest -q -p no:cacheprovider --durations=15
# Test processes (pytest-xdist; tests/conftest.py keeps a file's tests, and the Ray files,
# in one process): two where the machine has two cores and 12 GB, else none (one process).
# Most tests wait on worker processes they start, so two overlap the waits.
TEST_WORKERS ?= $(shell $(PY) -c "import os; m = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'); print(2 if (os.cpu_count() or 1) >= 2 and m >= 12 * 2**30 else 0)")

test: env
	$(PY) -m ruff check src tests
	$(PYTEST) -n $(TEST_WORKERS) --ignore=tests/translate/tensorflow
	$(PYTEST) tests/translate/tensorflow

## Fast tests only.
test-fast: env
	$(PYTEST) -n $(TEST_WORKERS) -m "not slow" --ignore=tests/translate/tensorflow
	$(PYTEST) -m "not slow" tests/translate/tensorflow

lint: env
	$(PY) -m ruff check src tests benchmarks

bench: env
	$(PY) benchmarks/bench_run.py

clean:
	rm -rf runs .pytest_cache
