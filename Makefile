# tenantgpu: every target bootstraps .venv from nothing, so a fresh clone needs only python3 >= 3.11.
#
# The venv's interpreter is the first of PYTHON_CANDIDATES that is CPython >= 3.11 and can make a
# venv. The distribution's own python3 comes first: Debian and Ubuntu build it with PGO and LTO and
# link it statically, and the lab spends about 7 % less CPU per pod on it than on pyenv's default
# build of the same 3.11, a shared libpython without PGO (docs/lab-performance-history.md, session
# 19). `make PYTHON=...` chooses another; an existing .venv is kept until `make clean`.
PYTHON_CANDIDATES ?= /usr/bin/python3 python3
PYTHON ?= $(or $(firstword $(foreach p,$(PYTHON_CANDIDATES),$(shell $(p) -c \
	'import ensurepip, platform, sys; sys.exit(sys.version_info < (3, 11) or platform.python_implementation() != "CPython")' \
	2>/dev/null && echo $(p)))),python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast bench lint clean proto

install: $(STAMP)

# The project's byte code is compiled once here: with PYTHONDONTWRITEBYTECODE set (as in this
# workspace), each of the lab's processes would otherwise compile its modules again at every start
# (0.2 s of `up -d`).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m tenantgpu.apiserver.fieldtree
	$(BIN)/python -m compileall -q src
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
