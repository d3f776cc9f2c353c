# Two commands set everything up on a fresh machine with Python 3.11 and make:
#   make demo   installs (with the plot extra: the README's examples draw), then runs the
#               main job on a built-in default
#   make test   installs, then runs the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test check docs bench bench-report install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip setuptools wheel

# An editable install leaves fastcal's and tracking's sources uncompiled: compileall writes
# their bytecode once (Python reads it even where PYTHONDONTWRITEBYTECODE is set, which would
# have each of the test suite's child processes compile the sources again, 0.3 s apiece)
COMPILE := $(PY) -m compileall -q fastcal tracking

# One stamp per extra set, rebuilt when pyproject.toml changes, or the sources of the kernels
# that the install compiles and ships in the package (setup.py, fastcal/_kernels/_shipped.py)
SHIPPED := setup.py fastcal/warmup.py $(wildcard fastcal/_kernels/*.py tracking/kernels/*.py tracking/models/*.py)

$(VENV)/.stamp-core: pyproject.toml $(SHIPPED) | $(PY)
	$(PY) -m pip install -e .
	$(COMPILE)
	touch $@

$(VENV)/.stamp-demo: pyproject.toml $(SHIPPED) | $(PY)
	$(PY) -m pip install -e '.[plot]'
	$(COMPILE)
	touch $@

$(VENV)/.stamp-test: pyproject.toml $(SHIPPED) | $(PY)
	$(PY) -m pip install -e '.[test]'
	$(COMPILE)
	touch $@

$(VENV)/.stamp-docs: pyproject.toml $(SHIPPED) | $(PY)
	$(PY) -m pip install -e '.[docs]'
	$(COMPILE)
	touch $@

$(VENV)/.stamp-bench: pyproject.toml $(SHIPPED) | $(PY)
	$(PY) -m pip install -e '.[bench]'
	$(COMPILE)
	touch $@

install: $(VENV)/.stamp-core

demo: $(VENV)/.stamp-demo
	$(PY) -m fastcal.demo
	$(PY) -m tracking compare

test: $(VENV)/.stamp-test
	$(PY) -m pytest

# lint and import order (ruff), types of backends/ sources/ accumulators/ inputs/ (mypy),
# the import contracts (import-linter) and the structure measures; CI runs it after the tests
check: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) benchmarks/structure.py --check

# the docs site into site/ (git-ignored); --strict: a broken link or a missing reference fails
docs: $(VENV)/.stamp-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

bench: $(VENV)/.stamp-bench
	$(PY) -m pytest benchmarks

bench-report: $(VENV)/.stamp-bench
	$(PY) benchmarks/report.py

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache
