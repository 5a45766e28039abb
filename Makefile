# The way in: `make run` serves, `make test` proves. Both build .venv first when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
POSENC_HOST ?= 127.0.0.1
POSENC_PORT ?= 8000
export POSENC_HOST POSENC_PORT

.PHONY: install run test check lint format bench soak system-deps docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs,reference]'
	touch $(STAMP)

install: $(STAMP)

# glibc's allocator as the image sets it (Dockerfile ENV; tests/test_allocator_settings.py holds
# the two identical, and the live tests start their servers with these): a fixed mmap threshold,
# so a freed NumPy buffer goes back to the kernel instead of staying in the heap, and two arenas,
# not eight per core, so the worker threads' freed memory is not spread over heaps that are
# never trimmed. Under make run's command, 40 s of the crowd (tests/crowd.py) in a 256 MiB
# budget with a 64 MiB cache peaked at 689 and 502 MiB RSS without them, 346 MiB with them.
MALLOC_SETTINGS := MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072

run: install
	env $(MALLOC_SETTINGS) $(BIN)/uvicorn --factory app.main:create_app \
		--host $(POSENC_HOST) --port $(POSENC_PORT) \
		--no-access-log \
		--no-server-header

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# What the system tests drive: Debian's chromium, nginx and docker-compose, the page test's
# node packages (playwright-core, which downloads no browser), and those of the generated
# clients' test and of the JavaScript example (openapi-typescript, openapi-fetch, typescript 5).
# The Docker engine and its test base image come from scripts/docker-test-env.sh, which the
# container tests call.
system-deps:
	command -v chromium >/dev/null && command -v nginx >/dev/null && \
		command -v docker-compose >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium nginx docker-compose)
	cd tests/browser && npm ci --silent --no-audit --no-fund
	cd tests/clients && npm ci --silent --no-audit --no-fund
	cd examples/js && npm ci --silent --no-audit --no-fund

# The documentation site into site/, strictly: a broken link or reference fails. The suite builds
# it the same way (tests/test_docs.py) and runs every example on its pages and in the README.
# mkdocs-material's banner about its successor is noise in a build log.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The suite runs on WORKERS processes, a file to a worker, the longest files first
# (tests/conftest.py); then the tests that measure time or memory (marked serial) run alone,
# since a second worker beside them is load they would measure.
WORKERS ?= 2
PARALLEL := -n $(WORKERS) --dist loadfile

# Everything, slow system tests included, the documentation's strict build among them: what CI
# runs.
test: lint system-deps
	$(BIN)/pytest $(PARALLEL) -m "not serial"
	$(BIN)/pytest -m serial

# The fast part: lint, core and API tests, no real servers, containers, browsers or runtimes'
# builds; its timing tests alone after, as in test.
FAST := not live and not system and not llama_cpp and not onnx_builder
check: lint
	$(BIN)/pytest $(PARALLEL) -m "$(FAST) and not serial"
	$(BIN)/pytest -m "$(FAST) and serial"

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# wrk from Debian when it can be installed; bench/run.py falls back to an httpx load otherwise.
soak: install
	$(BIN)/python -m bench.soak --seconds 240

bench: install
	command -v wrk >/dev/null || (apt-get install -y -qq wrk >/dev/null 2>&1 || true)
	$(BIN)/python -m bench.run
