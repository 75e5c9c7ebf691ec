# The checks CI runs (.ci/run), for running them before you push. `make check` is the quick round
# (lint, types, migrations, the deploy check and the fast lane of tests); `make test` the whole
# suite. Every target sets up .venv from requirements.lock first if it is missing.

VENV ?= .venv
PYTHON := $(VENV)/bin/python
# A throw-away data dir and key for the Django commands below, removed when each ends: nothing of
# yours is read.
CHECK_ENV := dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && AICONSOLE_DATA_DIR=$$dir AICONSOLE_SECRET_KEY=make-check-only

.PHONY: setup check lint format types migrations deploy-check fast test

$(PYTHON):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --no-deps --require-hashes -r requirements.lock
	$(VENV)/bin/pip install --no-deps -e .

setup: $(PYTHON)

check: lint types migrations deploy-check fast

lint: $(PYTHON)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(PYTHON)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

types: $(PYTHON)
	$(PYTHON) scripts/mypy-baseline

migrations: $(PYTHON)
	$(CHECK_ENV) $(PYTHON) manage.py makemigrations --check --dry-run

deploy-check: $(PYTHON)
	$(CHECK_ENV) AICONSOLE_SECURE=true AICONSOLE_ALLOWED_HOSTS=console.example.com \
	AICONSOLE_SECRET_KEY=$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(50))') \
	$(PYTHON) manage.py check --deploy --fail-level WARNING

# The API fuzz sends 10 random requests per operation here, and 25 with its 4,600 boundary cases
# in `make test` and CI (the fast-lane profile in tests/conftest.py).
fast: $(PYTHON)
	$(VENV)/bin/pytest -n auto --dist worksteal -m "not executor and not browser and not slow" --hypothesis-profile=fast-lane

test: $(PYTHON)
	$(VENV)/bin/pytest
