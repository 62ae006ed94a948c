# Apodex: build, demo, tests. Everything here works offline once modules are cached.
GO      ?= go
BIN     := bin/apodex
DEMO    := examples/csv-sum
HOME_DEMO ?= $(CURDIR)/.apodex-demo

.PHONY: all build demo demo-search test test-short bench fuzz vet clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/apodex

# The demo plays a scripted (deterministic) policy: no model endpoint needed.
# --sandbox auto uses bubblewrap when it is installed, else the built-in
# native sandbox; the demo never runs without isolation.
demo: build
	./$(BIN) run --provider scripted --script $(DEMO)/script.json --task $(DEMO)/task.yaml \
	  --home $(HOME_DEMO) --sandbox auto

# Search a corpus, quote it and cite the evidence ids; source alignment checks it.
demo-search: build
	./$(BIN) run --provider scripted --script examples/search-answer/script.json \
	  --task examples/search-answer/task.yaml --home $(HOME_DEMO)

test:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

# Figures reported in the issues: per-step harness overhead, the sandbox,
# compaction over 300 steps, a 64-subagent team, replay speed, resume time,
# the 30-step run of the built binary (the peer benchmark of issue #12), rollouts
# through NATS workers against the local eval (issue #30).
bench:
	$(GO) test -run XXX -bench '^BenchmarkStep' -benchtime 200x -count 5 ./internal/agent/
	$(GO) test -run XXX -bench 'BenchmarkSandboxTrue' -count 5 ./internal/sandbox/
	$(GO) test -run XXX -bench 'Compaction300' -benchtime 1x ./internal/agent/
	$(GO) test -run XXX -bench 'Team64x20' -benchtime 1x ./internal/team/
	$(GO) test -run XXX -bench 'Replay|Resume' -benchtime 1x ./internal/run/
	$(GO) test -run XXX -bench 'Corpus10k' -benchtime 1x ./internal/corpus/
	$(GO) test -run XXX -bench 'Follow' -benchtime 200x ./internal/record/
	$(GO) test -run XXX -bench 'Stage1000|Finish$$' -benchtime 5x -count 5 ./internal/world/
	$(GO) test -run XXX -bench 'EvalThroughput' -benchtime 1x -count 3 ./internal/eval/
	$(GO) test -run XXX -bench 'StreamLatency' -benchtime 200x ./internal/web/
	$(GO) test -run XXX -bench 'Export500' -benchtime 20x ./internal/trajectory/
	$(GO) test -run XXX -bench '^BenchmarkSteps30$$' -benchtime 5x ./cmd/apodex/
	$(GO) test -run XXX -bench 'EvalOnNATS' -benchtime 1x -count 3 ./cmd/apodex/

# Every fuzz target (parsers of outside input, the conversation property of
# internal/agent), each for FUZZTIME.
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf bin .apodex-demo
