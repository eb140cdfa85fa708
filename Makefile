# Rollout: `make run` sets everything up and starts the service; `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.installed
FRONTEND_STAMP := frontend/dist/index.html
FRONTEND_SOURCES := $(shell find frontend -path frontend/node_modules -prune -o -path frontend/dist -prune -o -type f -print 2>/dev/null)

.PHONY: run test venv frontend lint format bench clean

venv: $(VENV_STAMP)

# torch first, pinned to the CPU wheel: anything else pulls a multi-GB CUDA build.
$(VENV_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

frontend: $(FRONTEND_STAMP)

$(FRONTEND_STAMP): $(FRONTEND_SOURCES)
	cd frontend && npm ci --no-audit --no-fund && npm run build

run: venv frontend
	$(BIN)/rollout serve

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: venv frontend lint
	cd frontend && npm test
	$(BIN)/python -m tests.parallel

bench: venv
	$(MAKE) -C benchmarks all

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist
