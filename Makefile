# Fluxo: the two commands are `make run` (the main job) and `make test` (every test).
# Both install what a fresh Debian/Ubuntu machine lacks (see scripts/setup.sh).

SHELL := /bin/bash
CARGO ?= cargo
PORT ?= 8787
DATA_DIR ?= $(CURDIR)/.fluxo-data

.PHONY: run test setup-test setup-run build ui serve sandbox test-rust test-e2e bench load man clean

## The main job: the desktop app where there is a display; otherwise `fluxo serve` with the
## browser UI, printing its URL.
run: setup-run build ui
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ] && [ -d src-tauri ]; then \
		$(MAKE) --no-print-directory desktop; \
	else \
		$(MAKE) --no-print-directory serve; \
	fi

## Every test: Rust unit and integration tests, clippy and the crate doc's links, then the browser end-to-end tests,
## the generated API types, the server package and the desktop window.
test: setup-test build
	$(CARGO) test --workspace --locked
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p fluxo --no-deps --lib --locked
	@if [ -f ui/package.json ]; then $(MAKE) --no-print-directory test-e2e test-api-types; fi
	$(MAKE) --no-print-directory test-package
	@if [ -d src-tauri ] && command -v xvfb-run >/dev/null && command -v WebKitWebDriver >/dev/null; then \
		$(MAKE) --no-print-directory test-desktop; \
	else echo "test-desktop: skipped (needs xvfb-run and WebKitWebDriver: scripts/setup.sh test)"; fi

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

## The desktop app (Tauri 2, src-tauri/): builds the UI (when stale) and the app, opens its
## window. Data in the app-data dir (~/.local/share/dev.fluxo.app); FLUXO_DESKTOP_DATA_DIR and
## FLUXO_DESKTOP_PORT override it and the listener's port (default 8787).
.PHONY: desktop test-desktop
desktop:
	@bash scripts/desktop-build.sh
	./target/debug/fluxo-desktop

## The real desktop window under Xvfb, driven through tauri-driver + WebKitWebDriver
## (tests/desktop/); screenshot in target/desktop-shot.png.
test-desktop:
	@bash scripts/desktop-build.sh
	bash scripts/desktop-test.sh

## Headless runtime with the browser UI; the workflows live in ./workflows.
serve: build
	mkdir -p -m 700 $(DATA_DIR)
	./target/debug/fluxo serve --addr 127.0.0.1:$(PORT) --workflows workflows --data-dir $(DATA_DIR)

## A local destination (small CRM/ledger) for the quick start.
sandbox: build
	./target/debug/fluxo sandbox --addr 127.0.0.1:8788

## Property tests (tests/fuzz_props.rs: workflow JSON, templates, webhook key/signature headers
## and bodies) with many more cases than CI runs, in release mode. FUZZ_CASES=N to change.
.PHONY: fuzz
FUZZ_CASES ?= 20000
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test -p fluxo --release --locked --test fuzz_props

bench:
	$(CARGO) bench --bench engine
	$(CARGO) bench --bench door

load:
	bash scripts/load.sh

## ui/src/api/schema.gen.ts (the UI's API types, `cd ui && npm run gen:api`) is what the
## OpenAPI document of this build generates, and the UI writes none of those shapes by hand.
.PHONY: test-api-types
test-api-types: build
	bash scripts/gen-api.sh --check

## The packages: the server's (scripts/package-deb.sh, packaging/deb/), target/package/
## fluxo_<version>_<arch>.deb from a release build (PROFILE=debug to package the debug build),
## and the desktop app's through Tauri's bundler (scripts/package-desktop.sh),
## target/release/bundle/deb/. Both are release builds: many minutes on 2 cores.
.PHONY: package package-server package-desktop test-package
package: package-server package-desktop

package-server: setup-run ui
	PROFILE=$${PROFILE:-release} bash scripts/package-deb.sh

package-desktop: setup-run ui
	bash scripts/package-desktop.sh

## The server package's test (in `make test`): its contents, lintian, and the installed unit's
## command line started in a throwaway root and sent a webhook (scripts/package-test.sh). It
## packages the debug build `make build` made (PROFILE=release to test the release package).
test-package: build
	bash scripts/package-test.sh

## Man pages from the clap definitions, into target/man (`man -l target/man/fluxo-serve.1`).
man: build
	./target/debug/fluxo man --out target/man

clean:
	$(CARGO) clean
	rm -rf ui/dist ui/node_modules $(DATA_DIR)
