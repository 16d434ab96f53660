# Postwire's commands. `make serve` and `make test` each set everything up from scratch.
VENV      ?= .venv
PYTHON    ?= python3
BIN       := $(VENV)/bin
INSTALLED := $(VENV)/.postwire-installed
RUST_SRC  := $(shell find rust -name '*.rs' -o -name Cargo.toml) Cargo.toml Cargo.lock

.PHONY: help setup serve sandbox test test-rust test-python lint bench-core bench-api bench-delivery bench-smtp \
	bench-webhooks bench-broadcasts bench-audiences bench-dashboard bench-insights bench bench-gate clean need-knot need-postfix need-swaks need-openssl need-stunnel \
	need-opendkim need-nginx need-wrk need-py-spy need-systemd-analyze need-postgresql bench-table-store bench-store-backends

help:  ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(BIN)/python:
	@echo "==> setup 1/3: a virtualenv in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> setup 2/3: pip and the build tools (maturin)"
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "maturin==1.16.0" setuptools wheel

# The editable install builds the Rust extension in release mode through maturin. Not --quiet:
# pip names each dependency it fetches, and says "still running" while the extension builds.
$(INSTALLED): $(BIN)/python pyproject.toml $(RUST_SRC)
	@echo "==> setup 3/3: Postwire's Python dependencies, then its Rust extension (a release"
	@echo "    build of the core: about 3 minutes on 2 cores the first time, less after a change)"
	$(BIN)/pip install --no-build-isolation -e '.[dev]'
	touch $@
	@echo "==> setup done: $(BIN)/postwire"

setup: $(INSTALLED)  ## create the virtualenv, build the extension (release), install

serve: setup  ## run `postwire serve` on the embedded default
	$(BIN)/postwire serve

sandbox: setup  ## run `postwire serve --sandbox`: mail is held in a local inbox, nothing leaves
	$(BIN)/postwire serve --sandbox

# The real peers the tests run against (each need-* below installs its own when missing). A test
# whose peer is missing fails: it never skips.
TEST_NEEDS := need-knot need-postfix need-swaks need-openssl need-chromium need-xmlsec1 need-rspamd \
	need-systemd-analyze need-postgresql

# Test files are spread over worker processes, a file's tests kept together (its module
# fixtures and the browser are set up once a worker). Most tests wait on live servers, peers and
# chromium rather than compute: on two cores the suite took 27 minutes in one process and 16 in
# three, which kept the load at 5 to 7 and brought out timing races in tests; two workers stay
# nearer the cores. Every test picks free ports and its own directories.
PYTEST_WORKERS ?= 2

STORE_BACKEND_TESTS := $(addprefix tests/e2e/test_,$(addsuffix .py,domains_and_emails \
	smtp_submission email_errors idn_recipients delivery_crash inbound_dsn webhooks_api \
	webhooks_delivery tracking suppressions suppression_batches unsubscribe contacts \
	segments_topics contact_imports templates broadcasts broadcast_crash))

test: setup $(TEST_NEEDS)  ## install the tests' peers when missing, then cargo test and pytest
	@# The whole workspace, so that features resolve as in the extension's build and cargo reuses
	@# its release artifacts: only the crates' own test harnesses are compiled again.
	cargo test --release --workspace
	@# Bytecode written once: where PYTHONDONTWRITEBYTECODE is set, every server and command the
	@# tests start would otherwise compile Postwire's modules again (about 0.3 s of CPU each).
	$(BIN)/python -m compileall -q python tests > /dev/null
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=25
	@# The send path, idempotency, delivery, webhooks, audiences, imports and broadcasts once more
	@# with the tables in PostgreSQL (the pass above runs everything on the embedded LMDB).
	PW_TEST_STORE=postgresql $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(STORE_BACKEND_TESTS)

lint: setup  ## ruff, mypy, cargo fmt and clippy
	$(BIN)/ruff check python tests benchmarks
	$(BIN)/ruff format --check python tests benchmarks
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest postwire._core
	cargo fmt --all --check
	cargo clippy --workspace --release -- -D warnings

bench-core: setup  ## micro-benchmarks of the core against Python baselines (ratios)
	$(BIN)/python -m benchmarks.core

# What the tests and the live benchmarks run against, each installed only when missing: Knot DNS
# verifies the sending domain; Postfix gives smtp-sink, smtp-source, an MTA and the baselines;
# swaks submits mail; chromium shows the dashboard; xmlsec1 checks SAML; openssl makes the test receivers' certificates; stunnel drives implicit
# TLS; OpenDKIM signs for the Postfix + OpenDKIM baseline; nginx receives webhooks; wrk drives
# HTTP load; py-spy profiles the server. A new peer is one more need-* target of this shape.
APT_INSTALL := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq
need-knot:
	@PATH="$$PATH:/usr/sbin:/sbin" command -v knotd >/dev/null || { $(APT_INSTALL) knot; }
need-postfix:
	@test -x /usr/sbin/smtp-sink -a -x /usr/sbin/smtp-source -a -x /usr/lib/postfix/sbin/master || \
		{ $(APT_INSTALL) postfix; }
need-swaks:
	@command -v swaks >/dev/null || { $(APT_INSTALL) swaks; }
need-openssl:
	@command -v openssl >/dev/null || { $(APT_INSTALL) openssl; }
need-chromium:  # Playwright drives Debian's chromium (it downloads no browser of its own)
	@test -x /usr/bin/chromium || { $(APT_INSTALL) chromium; }
need-xmlsec1:  # pysaml2 signs and checks SAML with the xmlsec1 program
	@command -v xmlsec1 >/dev/null || { $(APT_INSTALL) xmlsec1; }
need-rspamd:  # content scoring for insights (tests start their own on loopback)
	@test -x /usr/bin/rspamd || { $(APT_INSTALL) rspamd; }
need-postgresql:  # the table store's PostgreSQL backend (tests start their own cluster on loopback)
	@test -x /usr/lib/postgresql/15/bin/initdb || { $(APT_INSTALL) postgresql-15; }
need-systemd-analyze:  # checks deploy/postwire.service (docs/operations.md)
	@command -v systemd-analyze >/dev/null || { $(APT_INSTALL) systemd; }
need-stunnel:
	@command -v stunnel4 >/dev/null || command -v stunnel >/dev/null || { $(APT_INSTALL) stunnel4; }
need-opendkim:
	@test -x /usr/sbin/opendkim -a -x /usr/sbin/opendkim-genkey || \
		{ $(APT_INSTALL) opendkim opendkim-tools; }
need-nginx:
	@test -x /usr/sbin/nginx || { $(APT_INSTALL) nginx-light; }
need-wrk:
	@command -v wrk >/dev/null || { $(APT_INSTALL) wrk; }
need-py-spy: setup
	@test -x $(BIN)/py-spy || $(BIN)/pip install --quiet "py-spy==0.4.3"

bench-api: setup need-knot need-wrk need-py-spy  ## REST API throughput against a live server (wrk), with py-spy profiles
	$(BIN)/python -m benchmarks.api --profile

bench-delivery: setup need-knot need-postfix need-py-spy  ## delivered messages/s, REST API -> spool -> smtp-sink (4 KiB, 100 KiB)
	$(BIN)/python -m benchmarks.delivery --profile

# The baselines are Postfix with an OpenDKIM milter signing, and Postfix alone.
bench-smtp: setup need-knot need-postfix need-stunnel need-opendkim need-py-spy  ## SMTP submission over implicit TLS, 50 sessions: accepted and delivered/s vs Postfix (+ OpenDKIM)
	$(BIN)/python -m benchmarks.smtp --profile

bench-webhooks: setup need-knot need-postfix need-nginx need-wrk need-py-spy  ## webhook events/s (dispatcher, end to end) vs the mail rate, target 3x
	$(BIN)/python -m benchmarks.webhooks --profile

# Spooled, not delivered: delivery is held at a port that never greets (--deliver: smtp-sink).
bench-broadcasts: setup need-knot need-py-spy  ## a broadcast to 1,000,000 contacts: messages spooled/s, memory, POST /emails p99 beside it, profile
	$(BIN)/python -m benchmarks.broadcasts --profile

bench-audiences: setup need-py-spy  ## an import of 1,000,000 contacts from CSV: contacts/s, the server's peak memory, profile
	$(BIN)/python -m benchmarks.audiences --profile

bench-dashboard: setup need-wrk need-py-spy  ## the dashboard's Emails page with 1,000,000 emails under wrk: p50/p99 of the first and a filtered page, goal p99 < 50 ms
	$(BIN)/python -m benchmarks.dashboard --profile

# Two servers side by side, one with insights and event counters on (the defaults), one with
# both off; both relay to one smtp-sink.
bench-insights: setup need-knot need-postfix need-stunnel  ## insights and counters on vs off: SMTP relay and batch REST messages/s side by side, goal on/off >= 0.95
	$(BIN)/python -m benchmarks.insights_cost

bench-table-store: setup need-postgresql  ## the table store on LMDB vs PostgreSQL: commits/s of small batches, get and scan p50/p99
	$(BIN)/python -m benchmarks.table_store

bench-store-backends: setup need-postgresql need-knot need-postfix need-stunnel need-wrk need-py-spy  ## Postwire on LMDB vs PostgreSQL tables: relay and REST batch messages/s, PostgreSQL's cost a message, Emails list and contact search p50/p99
	$(BIN)/python -m benchmarks.store_backends --profile

BENCH_NEEDS := need-knot need-postfix need-stunnel need-opendkim need-nginx need-wrk need-py-spy

bench: setup $(BENCH_NEEDS)  ## every benchmark in one run (about 45 min): one report, benchmarks/results/<date>.md
	$(BIN)/python -m benchmarks

# Small counts: 7 alternating rounds of 2,500 4 KiB and 400 100 KiB messages against Postfix +
# OpenDKIM, and short core rounds; the minimums are in benchmarks/gate.toml.
GATE_OPTIONS ?= --sections smtp core --no-profile --smtp-rounds 7 --smtp-messages-small 2500 \
	--smtp-messages-large 400 --smtp-warmup 300 --smtp-baselines postfix-opendkim \
	--core-rounds 5 --core-seconds 1
bench-gate: setup need-knot need-postfix need-stunnel need-opendkim  ## release gate (about 5 min): ratios vs benchmarks/gate.toml, fails below a minimum
	$(BIN)/python -m benchmarks --gate benchmarks/gate.toml $(GATE_OPTIONS)

clean:
	rm -rf $(VENV) target
