# Fluxo: the two commands are `make run` (the main job) and `make test` (every test).
# Both install what a fresh Debian/Ubuntu machine lacks (see scripts/setup.sh).

SHELL := /bin/bash
CARGO ?= cargo
PORT ?= 8787
DATA_DIR ?= $(CURDIR)/.fluxo-data

.PHONY: run test setup-test setup-run build ui serve sandbox test-rust test-e2e bench load clean

## The main job: the desktop app where there is a display; otherwise `fluxo serve` with the
## browser UI, printing its URL.
run: setup-run build ui
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ] && [ -d src-tauri ]; then \
		$(MAKE) --no-print-directory desktop; \
	else \
		$(MAKE) --no-print-directory serve; \
	fi

## Every test: Rust unit and integration tests, then the browser end-to-end tests.
test: setup-test build
	$(CARGO) test --workspace --locked
	@if [ -f ui/package.json ]; then $(MAKE) --no-print-directory test-e2e; fi

setup-test:
	@bash scripts/setup.sh test

setup-run:
	@bash scripts/setup.sh run

build:
	$(CARGO) build --locked --bin fluxo

ui:
	@if [ -f ui/package.json ]; then cd ui && npm ci --no-audit --no-fund && npm run build; fi

test-e2e: ui
	cd ui && npm run test:e2e

## Headless runtime with the browser UI; the workflows live in ./workflows.
serve: build
	mkdir -p $(DATA_DIR)
	./target/debug/fluxo serve --addr 127.0.0.1:$(PORT) --workflows workflows --data-dir $(DATA_DIR)

## A local destination (small CRM/ledger) for the quick start.
sandbox: build
	./target/debug/fluxo sandbox --addr 127.0.0.1:8788

bench:
	$(CARGO) bench --bench engine

load:
	bash scripts/load.sh

clean:
	$(CARGO) clean
	rm -rf ui/dist ui/node_modules $(DATA_DIR)
