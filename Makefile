# Inferrail. `make run` starts a simulated fleet, `make test` runs every test.
GO       ?= go
BINDIR   ?= $(CURDIR)/cmd/inferrail/bin
BIN      := $(BINDIR)/inferrail
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 10s

# Packages that run goroutines get the race detector; the pure ones do not need it.
RACE_PKGS := ./sim/... ./actors/... ./transport/... ./cmd/...
PURE_PKGS := ./model/... ./config/... ./bench/...

.PHONY: build run test test-go test-chart test-sdk test-scrapers test-observability test-fleet-page fleet-screenshots bench bench-sim bench-gateway bench-tokenizer diff-tokenizers bench-matrix bench-realtime bench-kv-events bench-instances bench-messages bench-report fuzz lint tools clean stress stress-short

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/inferrail

## run: a gateway on 127.0.0.1:8080 in front of three simulated vLLM engines
run: build
	$(BIN) launch --listen 127.0.0.1:8080 --replicas 3

test: test-go test-chart test-sdk test-scrapers test-observability test-fleet-page

test-go:
	./scripts/install-test-debs.sh
	$(GO) vet ./...
	$(GO) test -count=1 $(PURE_PKGS)
	$(GO) test -count=1 -race $(RACE_PKGS)

## test-chart: helm lint and helm template of deploy/helm/inferrail, every object decoded strictly
## into its Go API type, offline (installs helm from the Go module proxy when missing)
test-chart:
	helm=$$(./scripts/install-helm.sh) && HELM=$$helm $(GO) test -count=1 ./deploy/...

## test-sdk: the official openai npm SDK against the simulator binary
test-sdk: build
	./scripts/sdk-test.sh $(BIN)

## test-scrapers: Debian's prometheus and victoria-metrics scrape the gateway (installs them when missing)
test-scrapers: build
	./scripts/scrapers-test.sh $(BIN)

## test-observability: promtool checks and unit-tests deploy/prometheus/alerts.yaml, and runs every
## expression of it and of deploy/grafana/inferrail.json against Debian's prometheus scraping
## `inferrail launch` over 3 simulators (installs prometheus when missing)
test-observability: build
	./scripts/observability-test.sh $(BIN)

## test-fleet-page: Debian's headless chromium loads the fleet page (GET /admin/) from `inferrail launch`
## with traffic and the test checks what it shows (installs chromium when missing)
test-fleet-page: build
	./scripts/fleet-page-test.sh $(BIN)

## fleet-screenshots: the same test, writing its desktop and phone screenshots to docs/
fleet-screenshots: build
	./scripts/fleet-page-test.sh $(BIN) docs

## bench: micro-benchmarks beside the code, then the simulator load benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-sim: build
	./scripts/bench-sim.sh $(BIN)

## bench-gateway: added latency, CPU and wrk throughput against direct access, nginx and bench/fastproxy; decision latency
bench-gateway: build
	./scripts/bench-gateway.sh $(BIN)

## bench-tokenizer: the pure-Go tokenizer against Hugging Face's Rust one, side by side
bench-tokenizer:
	./scripts/bench-tokenizer.sh

## diff-tokenizers: the pure-Go tokenizer's ids against the Rust library's on tokenizer.json files it was not developed against
diff-tokenizers:
	./scripts/diff-tokenizers.sh

## stress: the stress and fault suite, every scenario at full size (under 20 minutes on 2 cores);
## STRESS_FLAGS adds flags, such as --out FILE or --run REGEXP (inferrail stress --list names them)
stress: build
	$(BIN) stress $(STRESS_FLAGS)

## stress-short: the same scenarios with smaller counts, as CI runs them
stress-short: build
	$(BIN) stress --short $(STRESS_FLAGS)

## bench-matrix: every policy on every workload in virtual time (bench/sweeps/matrix.toml:
## 1,155 runs, minutes on 2 cores; resumes), then its report in bench/report/matrix
bench-matrix: build
	$(BIN) bench sim --spec bench/sweeps/matrix.toml --out bench/results/matrix --jobs 2
	$(BIN) bench report --results bench/results/matrix --out bench/report/matrix

## bench-realtime: W1, W2, W6, mix and hot at their main rates in real time on cold in-process
## fleets (bench/sweeps/realtime.toml: 105 runs, about 80 minutes with 3 jobs; resumes), its
## virtual-time twin, and their report with the agreement table in bench/report/realtime
bench-realtime: build
	$(BIN) bench sweep --spec bench/sweeps/realtime.toml --out bench/results/realtime --jobs 3
	$(BIN) bench sim --spec bench/sweeps/realtime.toml --out bench/results/realtime-virtual --jobs 2
	$(BIN) bench report --results bench/results/realtime --results bench/results/realtime-virtual --out bench/report/realtime

## bench-kv-events: the shadow index with and without the engines' KV events, in virtual time
## (bench/sweeps/kv-events.toml: 60 runs, seconds), then its report in bench/report/kv-events
bench-kv-events: build
	$(BIN) bench sim --spec bench/sweeps/kv-events.toml --out bench/results/kv-events --jobs 2
	$(BIN) bench report --results bench/results/kv-events --out bench/report/kv-events

## bench-instances: 1, 2 and 3 gateway instances on the same engines, with and without KV events,
## and the fault runs, in virtual time (bench/agree, minutes), then the same matrix with gateway
## processes in real time and one of two gateway processes killed under 1,000 req/s, for
## bench/results/instances-*.md
bench-instances: build
	$(BIN) bench instances --seeds 3 --jobs 2
	$(BIN) bench instances --faults --seeds 1
	$(BIN) bench instances --real
	$(BIN) bench instances --kill

## bench-messages: Claude Code sessions over /v1/messages (claude-code) routed by cost_model,
## round_robin and cost_model hashing the billing header, in virtual time (3 seeds, about 4 minutes
## on 2 cores), then each router once in real time on in-process fleets (about 2 minutes), for
## bench/results/messages-*.md
bench-messages: build
	$(BIN) bench messages --seeds 3 --real

## bench-report: rebuild the committed reports from the committed result files alone
bench-report: build
	$(BIN) bench report --results bench/results/matrix --out bench/report/matrix
	$(BIN) bench report --results bench/results/realtime --results bench/results/realtime-virtual --out bench/report/realtime
	$(BIN) bench report --results bench/results/kv-events --out bench/report/kv-events
	$(BIN) bench report --results bench/results/kv-events-realtime --results bench/results/kv-events-realtime-virtual --out bench/report/kv-events-realtime

## fuzz: each fuzz target for FUZZTIME (short by default)
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$$($(GO) env GOPATH)/bin/staticcheck ./...

tools:
	./scripts/install-tools.sh

clean:
	rm -rf $(BINDIR)
