# The two commands of the README: `make demo` and `make test`. Both set everything up first.
export MUJOCO_GL ?= osmesa
PY := .venv/bin/python

.PHONY: setup demo test test-fast bench sweep

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m motormind.cli run --suite libero_spatial --task 0 --brain oracle

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not sim"

bench: setup
	$(PY) bench/run_all.py

sweep: setup
	$(PY) scripts/oracle_sweep.py --suites libero_spatial libero_object --tasks 0-4 --inits 0-1
