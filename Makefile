# Carapace — build entry points. `make help` lists the targets.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# sdkDir lets `carapace plugin create` point a new plugin's go.mod at this
# source tree (a replace directive) until the SDK is published.
LDFLAGS   := -s -w -X main.version=$(VERSION) -X "github.com/carapace-dev/carapace/cmd/carapace/cli.sdkDir=$(CURDIR)"
BUILDFLAGS := -trimpath
PKGS      := ./...
FUZZTIME  ?= 40000x
export CGO_ENABLED ?= 0
# The memory plugin (built into the core) needs SQLite with FTS5: every go
# command run by make gets the tag, and the core is built with cgo.
# Without the tag, packages that link the memory plugin do not compile.
TAGS      := sqlite_fts5
export GOFLAGS := $(strip $(GOFLAGS) -tags=$(TAGS))

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/carapace (cgo, for SQLite), the bundled plugins in bin/plugins/, bin/ipc, bin/ipc-relay and bin/carapace-confine (static), the linux/amd64 + linux/arm64 ipc and ipc-relay for agent images and carapace-probe for doctor --prove, and bin/carapace-app
	@pins=$$(GO='$(GO)' GOBUILDFLAGS='$(BUILDFLAGS)' LDFLAGS='$(LDFLAGS)' scripts/bundle-plugins.sh bin/plugins) || exit 1; \
	echo "CGO_ENABLED=1 $(GO) build ... -o bin/carapace ./cmd/carapace (bundled plugins: $${pins:-none})"; \
	CGO_ENABLED=1 $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)'" -X $(PINS_VAR)=$$pins" -o bin/carapace ./cmd/carapace
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/ipc ./cmd/ipc
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/ipc-relay ./cmd/ipc-relay
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/carapace-confine ./cmd/carapace-confine
	@for arch in amd64 arm64; do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/linux-$$arch/ipc ./cmd/ipc || exit 1; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/linux-$$arch/ipc-relay ./cmd/ipc-relay || exit 1; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/linux-$$arch/carapace-probe ./cmd/carapace-probe || exit 1; \
	done
	CGO_ENABLED=$(APP_CGO) $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/carapace-app ./cmd/carapace-app
	@for f in bin/ipc bin/ipc-relay bin/carapace-confine bin/linux-amd64/ipc bin/linux-arm64/ipc bin/linux-amd64/ipc-relay bin/linux-arm64/ipc-relay bin/linux-amd64/carapace-probe bin/linux-arm64/carapace-probe; do \
	  printf '  %-32s %7d KiB\n' $$f $$(( $$(wc -c < $$f) / 1024 )); done

# The menu-bar app. fyne systray is pure Go on Linux and cgo on macOS,
# where a build without cgo has no menu bar.
UNAME_S   := $(shell uname -s)
APP_CGO   := $(if $(filter Darwin,$(UNAME_S)),1,0)

.PHONY: app
app: ## build the menu-bar app: bin/carapace-app on Linux (on macOS, Carapace.app)
ifeq ($(UNAME_S),Darwin)
	@# macOS: the Carapace.app bundle (Info.plist, Resources/, carapace and
	@# carapace-app in Contents/MacOS/, ad-hoc signed), which the macOS
	@# branch builds as app-bundle.
	$(MAKE) --no-print-directory app-bundle
else
	CGO_ENABLED=$(APP_CGO) $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o bin/carapace-app ./cmd/carapace-app
endif

# The bundled plugins are the first-party out-of-process plugins built
# with the core: plugins/<name>/handler is their main.
# scripts/bundle-plugins.sh builds each plugin folder (bin/plugins/<name>/
# for make build, Contents/Resources/plugins/<name>/ in Carapace.app) and
# prints the handlers' SHA-256 pins, which make links into carapace
# (PINS_VAR); scripts/check-bundle.sh checks the result.
PINS_VAR  := github.com/carapace-dev/carapace/cmd/wiring.bundledPins

ENGINE    ?= docker

.PHONY: image-test
image-test: build ## build the offline agent test image carapace-agent-test:dev with cmd/build-image (FROM scratch, no registry; needs busybox-static)
	$(GO) run ./cmd/build-image -engine $(ENGINE) -version $(VERSION)

.PHONY: image-agent
image-agent: build ## build the real agent image carapace-agent:$(VERSION) with Claude Code (needs registry and npm access)
	$(GO) run ./cmd/build-image -agent -engine $(ENGINE) -version $(VERSION)

.PHONY: test-agent
test-agent: image-agent ## run real Claude Code in the real agent image against a scripted model API: planted instructions, hooks, the key (needs registry and npm access; not part of make test)
	CGO_ENABLED=1 CARAPACE_AGENT_IMAGE=carapace-agent:$(VERSION) $(GO) test -tags '$(TAGS) agentimage' -count=1 -v -timeout 20m -run '^TestRealClaudeCode' ./core/server

.PHONY: test
test: build ## run every test: gofmt, vet, darwin type-check (cgo files included), unit and end-to-end tests (race detector), brief fuzzing
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) vet -tags '$(TAGS) agentimage' ./core/server
	GOOS=darwin GOARCH=arm64 $(GO) vet $(PKGS)
	$(GO) run ./cmd/darwincheck $(PKGS)
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(MAKE) --no-print-directory fuzz

.PHONY: fuzz
fuzz: ## run each fuzz target briefly (FUZZTIME=40000x runs; a count, not a duration: see golang/go#75804)
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) ./ipc
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeResponse$$' -fuzztime $(FUZZTIME) ./ipc
	$(GO) test -run '^$$' -fuzz '^FuzzUnquote$$' -fuzztime $(FUZZTIME) ./ipc
	$(GO) test -run '^$$' -fuzz '^FuzzFilter$$' -fuzztime $(FUZZTIME) ./ipc/zmtp
	$(GO) test -run '^$$' -fuzz '^FuzzString$$' -fuzztime $(FUZZTIME) ./core/sanitize
	$(GO) test -run '^$$' -fuzz '^FuzzInline$$' -fuzztime $(FUZZTIME) ./core/claudemd
	$(GO) test -run '^$$' -fuzz '^FuzzPipeline$$' -fuzztime $(FUZZTIME) ./core/pipeline
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./core/manifest
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./core/internal/pluginproto
	CGO_ENABLED=1 $(GO) test -run '^$$' -fuzz '^FuzzSearch$$' -fuzztime $(FUZZTIME) ./plugins/memory
	CGO_ENABLED=1 $(GO) test -run '^$$' -fuzz '^FuzzDecodeUpdates$$' -fuzztime $(FUZZTIME) ./plugins/telegram
	$(GO) test -run '^$$' -fuzz '^FuzzCheckURL$$' -fuzztime $(FUZZTIME) ./plugins/web
	CGO_ENABLED=1 $(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./plugins/mail

.PHONY: bench
bench: build ## run the benchmarks (Docker too; minutes, not part of make test), print a table and write docs/PERFORMANCE.md; then the Telegram round trip cold and warm (docs/TELEGRAM.md#speed), what plugin confinement costs (docs/SECURITY.md#what-confinement-costs), the scheduler (docs/TASKS.md#speed), a durable commit into a young and a kept WAL (docs/CONTAINERS.md#warm-containers) and web_fetch of a 1 MiB page (docs/WEB.md#speed)
	CGO_ENABLED=1 $(GO) run ./cmd/benchreport -out docs/PERFORMANCE.md
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench '^BenchmarkTelegramRoundTrip$$' -benchtime 15x ./core/server
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench '^(BenchmarkStart10|BenchmarkInvoke|BenchmarkInvokeConfined)$$' -benchtime 40x ./core/pluginhost
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench 'RoundTrip' -benchtime 2s ./core/egress
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench '^BenchmarkTaskFireAccuracy$$' -benchtime 60x ./core/server
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench . -benchtime 5x ./core/tasks
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench '^BenchmarkCommit$$' -benchtime 500x ./internal/sqlitedb
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench '^BenchmarkFetchExtract$$' -benchtime 10x ./plugins/web

.PHONY: demo
demo: build ## start a core in a temporary home and run a short agent session against it
	@bash scripts/demo.sh

# staticcheck, pinned: 2026.2.2 (module v0.8.2) knows Go 1.26. It is built
# for the host into bin/tools, named by version so that a new pin rebuilds
# it, and run for each target (`go run` would build it for GOOS=darwin too):
# Linux with cgo, as the core is built; darwin without (no macOS SDK here),
# so there the cgo files are darwincheck's.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/tools/staticcheck-$(STATICCHECK_VERSION)

$(STATICCHECK):
	@mkdir -p bin/tools
	GOOS= GOARCH= GOBIN=$(CURDIR)/bin/tools $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/tools/staticcheck $@

# actionlint, pinned and built like staticcheck, checks the GitHub
# workflows, and the shell of their run: steps with shellcheck (Debian's
# shellcheck package; actionlint skips that part silently without it, so
# lint insists on it).
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := bin/tools/actionlint-$(ACTIONLINT_VERSION)
SHELL_SCRIPTS := $(wildcard scripts/*.sh) .ci/run

$(ACTIONLINT):
	@mkdir -p bin/tools
	GOOS= GOARCH= GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv bin/tools/actionlint $@

.PHONY: lint
lint: $(ACTIONLINT) ## lint the GitHub workflows (actionlint, with shellcheck on their run steps) and the shell scripts (shellcheck)
	@command -v shellcheck >/dev/null || { echo "lint needs shellcheck: apt-get install shellcheck (brew install shellcheck on a Mac)"; exit 1; }
	$(ACTIONLINT) -shellcheck "$$(command -v shellcheck)"
	shellcheck -x $(SHELL_SCRIPTS)

.PHONY: check
check: $(STATICCHECK) lint ## static checks: gofmt, vet and staticcheck (linux and darwin), the workflows and scripts (make lint), dependency tests (the layers: internal/layers; the binaries: cmd/...), cross builds
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)
	GOOS=darwin GOARCH=arm64 $(GO) vet $(PKGS)
	$(GO) run ./cmd/darwincheck $(PKGS)
	CGO_ENABLED=1 $(STATICCHECK) -tags $(TAGS) $(PKGS)
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(STATICCHECK) -tags $(TAGS) $(PKGS)
	$(GO) test -count=1 -run '^(TestDeps|TestDependencies|TestImports|TestLayers)$$' ./cmd/... ./core/plugin/plugintest ./ipc/zmtp ./internal/layers
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/...
	GOOS=linux GOARCH=arm64 $(GO) build -o /dev/null ./cmd/...

# The macOS app bundle, bin/Carapace.app (Darwin only: lipo, iconutil,
# plutil and codesign come with Xcode's command-line tools). `make app`
# calls it on a Mac. Every binary is built with cgo for arm64 and amd64 and
# joined with lipo; MACOSX_DEPLOYMENT_TARGET matches Info.plist's
# LSMinimumSystemVersion. CFBundleShortVersionString takes the numbers of
# a tag like v1.2.3 (0.0.0 otherwise); CarapaceVersion keeps VERSION.
#
# The bundled plugins go to Contents/Resources/plugins/<name>/, where the
# core looks when it runs from Contents/MacOS (cmd/wiring), with
# their pins linked into carapace. The order matters, because codesign
# rewrites what it signs: each handler is signed first and then pinned
# (scripts/bundle-plugins.sh --darwin), carapace is built with those pins
# and signed, and the bundle is signed last, without --deep, which would
# sign the handlers again. Signatures are ad hoc (no identity: Gatekeeper
# will still ask on another Mac); the bundle's is verified, and
# scripts/check-bundle.sh checks the plugins against the pins.
APP_BUNDLE := bin/Carapace.app
APP_PKG    ?= ./cmd/carapace-app
BUNDLE_VERSION = $(or $(shell printf '%s' '$(VERSION)' | sed -nE 's/^v([0-9]+(\.[0-9]+){0,2})(-.*)?$$/\1/p'),0.0.0)

.PHONY: app-bundle
app-bundle: ## (macOS) build bin/Carapace.app: carapace, carapace-app and the bundled plugins for arm64 and amd64 (lipo), icon, ad-hoc signatures, verified
ifeq ($(shell uname),Darwin)
	rm -rf $(APP_BUNDLE)
	mkdir -p $(APP_BUNDLE)/Contents/MacOS $(APP_BUNDLE)/Contents/Resources
	@set -e; pins=$$(GO='$(GO)' GOBUILDFLAGS='$(BUILDFLAGS)' LDFLAGS='$(LDFLAGS)' scripts/bundle-plugins.sh --darwin $(APP_BUNDLE)/Contents/Resources/plugins); \
	echo "  bundled plugins: $${pins:-none}"; \
	for arch in arm64 amd64; do for p in carapace=./cmd/carapace carapace-app=$(APP_PKG); do \
	  echo "  go build darwin/$$arch $${p%%=*}"; \
	  CGO_ENABLED=1 GOOS=darwin GOARCH=$$arch MACOSX_DEPLOYMENT_TARGET=13.0 \
	    $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)'" -X $(PINS_VAR)=$$pins" -o bin/darwin-$$arch/$${p%%=*} $${p#*=}; \
	done; done
	@set -e; for b in carapace carapace-app; do \
	  lipo -create -output $(APP_BUNDLE)/Contents/MacOS/$$b bin/darwin-arm64/$$b bin/darwin-amd64/$$b; \
	  lipo $(APP_BUNDLE)/Contents/MacOS/$$b -verify_arch arm64 x86_64; \
	done
	cp Info.plist $(APP_BUNDLE)/Contents/Info.plist
	plutil -replace CFBundleShortVersionString -string '$(BUNDLE_VERSION)' $(APP_BUNDLE)/Contents/Info.plist
	plutil -replace CFBundleVersion -string '$(BUNDLE_VERSION)' $(APP_BUNDLE)/Contents/Info.plist
	plutil -replace CarapaceVersion -string '$(VERSION)' $(APP_BUNDLE)/Contents/Info.plist
	plutil -lint $(APP_BUNDLE)/Contents/Info.plist
	iconutil -c icns -o $(APP_BUNDLE)/Contents/Resources/Carapace.icns Resources/icons/Carapace.iconset
	cp Resources/launchd/dev.carapace.serve.plist $(APP_BUNDLE)/Contents/Resources/
	@# The static linux ipc and ipc-relay that carapace setup --build-image
	@# puts in the agent image (cmd/carapace/cli staticIPC looks here), and the probe
	@# that carapace doctor --prove mounts into a box (prove.ProbePath).
	@set -e; for arch in arm64 amd64; do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o $(APP_BUNDLE)/Contents/Resources/linux-$$arch/ipc ./cmd/ipc; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o $(APP_BUNDLE)/Contents/Resources/linux-$$arch/ipc-relay ./cmd/ipc-relay; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(BUILDFLAGS) -ldflags '$(LDFLAGS)' -o $(APP_BUNDLE)/Contents/Resources/linux-$$arch/carapace-probe ./cmd/carapace-probe; \
	done
	xattr -cr $(APP_BUNDLE)
	codesign --force --sign - $(APP_BUNDLE)/Contents/MacOS/carapace
	codesign --force --sign - $(APP_BUNDLE)
	codesign --verify --deep --strict --verbose=2 $(APP_BUNDLE)
	scripts/check-bundle.sh $(APP_BUNDLE)/Contents/MacOS/carapace
else
	@echo "app-bundle builds Carapace.app on macOS only (it needs lipo, iconutil, plutil and codesign)" >&2; exit 1
endif

.PHONY: screenshot
screenshot: build ## docs/app-menu.png: the menu-bar app's menu with an approval, on Xvfb with xfce4-panel (needs xvfb xfce4-panel xdotool; not in make test)
	@bash scripts/screenshot.sh

.PHONY: clean
clean: ## remove build output
	rm -rf bin
