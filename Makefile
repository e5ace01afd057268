# tenantgpu: every target bootstraps .venv from nothing, so a fresh clone needs only python3 >= 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast bench lint clean proto

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m tenantgpu.apiserver.fieldtree
	touch $(STAMP)

demo: install
	$(BIN)/tenantgpu demo

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m 'not slow'

bench: install
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

# The tunnel's gRPC code is generated once and committed, so installs need no protoc.
PROTO_DIR := src/tenantgpu/konnectivity/_proto
proto: install
	$(BIN)/python -m grpc_tools.protoc -I src --python_out=src --pyi_out=src --grpc_python_out=src \
		$(PROTO_DIR)/client.proto $(PROTO_DIR)/agent.proto

clean:
	rm -rf $(VENV) .pytest_cache bench/results
