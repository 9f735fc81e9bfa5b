# anpred: one entry point for set-up, the main job and the tests.
.PHONY: env demo test test-fast lint bench clean

PY := .venv/bin/python
DEMO_OUT ?= runs/demo

env:
	@scripts/setup-env.sh

## Main job: anchor-level analysis of yolov8n across every installed library, with its report.
demo: env
	$(PY) -m anpred run yolov8n --libs all --images 2 --out $(DEMO_OUT)

## The whole test suite (slow tests included).
test: env
	$(PY) -m ruff check src tests
	$(PY) -m pytest -q -p no:cacheprovider

## Fast tests only.
test-fast: env
	$(PY) -m pytest -q -m "not slow" -p no:cacheprovider

lint: env
	$(PY) -m ruff check src tests benchmarks

bench: env
	$(PY) benchmarks/bench_run.py

clean:
	rm -rf runs .pytest_cache
