# Postwire's commands. `make serve` and `make test` each set everything up from scratch.
VENV      ?= .venv
PYTHON    ?= python3
BIN       := $(VENV)/bin
INSTALLED := $(VENV)/.postwire-installed
RUST_SRC  := $(shell find rust -name '*.rs' -o -name Cargo.toml) Cargo.toml Cargo.lock

.PHONY: help setup serve test test-rust test-python lint bench-core bench-api bench-delivery bench-smtp bench-webhooks clean

help:  ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "maturin==1.16.0" setuptools wheel

# The editable install builds the Rust extension in release mode through maturin.
$(INSTALLED): $(BIN)/python pyproject.toml $(RUST_SRC)
	$(BIN)/pip install --quiet --no-build-isolation -e '.[dev]'
	touch $@

setup: $(INSTALLED)  ## create the virtualenv, build the extension (release), install

serve: setup  ## run `postwire serve` on the embedded default
	$(BIN)/postwire serve

test: setup  ## cargo test, then pytest
	cargo test --release -p postwire-core
	$(BIN)/pytest -q

lint: setup  ## ruff, mypy, cargo fmt and clippy
	$(BIN)/ruff check python tests benchmarks
	$(BIN)/ruff format --check python tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest postwire._core
	cargo fmt --all --check
	cargo clippy --workspace --release -- -D warnings

bench-core: setup  ## micro-benchmarks of the core against Python baselines (ratios)
	$(BIN)/python -m benchmarks.core

# wrk drives the server; Knot DNS verifies the sending domain; py-spy profiles the sends.
bench-api: setup  ## REST API throughput against a live server (wrk), with py-spy profiles
	@PATH="$$PATH:/usr/sbin:/sbin" command -v knotd >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq knot; }
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
	@test -x $(BIN)/py-spy || $(BIN)/pip install --quiet "py-spy==0.4.3"
	$(BIN)/python -m benchmarks.api --profile

# smtp-sink (Postfix) receives; Knot DNS verifies the sending domain; py-spy profiles delivery.
bench-delivery: setup  ## delivered messages/s, REST API -> spool -> smtp-sink (4 KiB, 100 KiB)
	@PATH="$$PATH:/usr/sbin:/sbin" command -v knotd >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq knot; }
	@test -x /usr/sbin/smtp-sink || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postfix; }
	@test -x $(BIN)/py-spy || $(BIN)/pip install --quiet "py-spy==0.4.3"
	$(BIN)/python -m benchmarks.delivery --profile

# smtp-source (Postfix) behind an stunnel client drives implicit TLS; the baselines are Postfix
# with an OpenDKIM milter signing, and Postfix alone.
bench-smtp: setup  ## SMTP submission over implicit TLS, 50 sessions: accepted and delivered/s vs Postfix (+ OpenDKIM)
	@PATH="$$PATH:/usr/sbin:/sbin" command -v knotd >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq knot; }
	@test -x /usr/sbin/smtp-source || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postfix; }
	@command -v stunnel4 >/dev/null || command -v stunnel >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq stunnel4; }
	@test -x /usr/sbin/opendkim -a -x /usr/sbin/opendkim-genkey || \
		{ apt-get update -qq && apt-get install -y -qq opendkim opendkim-tools; }
	@test -x $(BIN)/py-spy || $(BIN)/pip install --quiet "py-spy==0.4.3"
	$(BIN)/python -m benchmarks.smtp --profile

# nginx receives the webhooks; smtp-sink the mail; Knot DNS verifies the sending domain; wrk
# measures nginx alone; py-spy profiles the dispatcher.
bench-webhooks: setup  ## webhook events/s (dispatcher, end to end) vs the mail rate, target 3x
	@PATH="$$PATH:/usr/sbin:/sbin" command -v knotd >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq knot; }
	@test -x /usr/sbin/smtp-sink || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postfix; }
	@test -x /usr/sbin/nginx || { apt-get update -qq && apt-get install -y -qq nginx-light; }
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
	@test -x $(BIN)/py-spy || $(BIN)/pip install --quiet "py-spy==0.4.3"
	$(BIN)/python -m benchmarks.webhooks --profile

clean:
	rm -rf $(VENV) target
