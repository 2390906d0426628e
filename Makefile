# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the test suite).
# Both create .venv on first use; later runs find the stamp and start in seconds.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
EXTRAS := robot,sim,newton,train,dev

.PHONY: demo test setup lint

demo: $(STAMP)
	$(VENV)/bin/sim2real demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest

setup: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

$(STAMP): setup.py
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -e '.[$(EXTRAS)]'
	touch $(STAMP)
