# DLQ Quarantine. Everything here needs only Go; pinned tools (staticcheck,
# versitygw) come from tools/go.mod through `go tool`.
SHELL := /bin/bash
GO ?= go
FUNCTIONS := ingest redrive sweeper metrics ledger digest operator
BUILD := build
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags="-s -w -buildid="
STATICCHECK = $$($(GO) -C tools tool -n staticcheck)

.PHONY: all fmt vet lint test test-short bench build demo local soak capacity fuzz clean test-localstack \
	build-IngestFunction build-RedriveFunction build-SweeperFunction build-MetricsFunction \
	build-LedgerFunction build-DigestFunction build-OperatorFunction

all: lint test build

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

lint: fmt vet
	$(STATICCHECK) ./...

# The test command of the README and of CI: lint, then every test with the
# race detector, against the embedded AWS stack the tests start themselves.
test: lint
	AWS_ACCESS_KEY_ID=dlqqtest AWS_SECRET_ACCESS_KEY=dlqqtestsecret AWS_REGION=us-east-1 \
	$(GO) test -race -count=1 -timeout 15m ./...

test-short:
	$(GO) test -count=1 ./...

# Runs the integration suite against LocalStack (see localstack/README.md).
test-localstack:
	AWS_ENDPOINT_URL=$${AWS_ENDPOINT_URL:-http://localhost:4566} AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
	$(GO) test -count=1 -timeout 15m ./shared/...

# Three runs of each throughput benchmark (ratios measured in one run),
# then one run of dlqctl verify on VERIFY_RECORDS records (20,000, so that
# make bench stays under 20 minutes on a 2-core machine; VERIFY_RECORDS=100000
# for the figure docs/ledger.md quotes), with two more leaving a checkpoint
# and starting from it (verify --checkpoint), the seal's cost, the writer
# proof's (with the fake and with the dev kit's KMS), the functions' peak
# memory and what a million messages cost. VERIFY_VERSIONS is the size of
# the verification benchmark (BenchmarkVerifyVersions: versions verified
# per second and the heap held, streamed from files in partitions, again
# from an earlier run's proofs, and in memory up to 300,000 versions, about
# 36 KiB each at the default GOGC);
# VERIFY_VERSIONS=1000000 for the figure docs/ledger.md quotes (about 15
# minutes more).
VERIFY_RECORDS ?= 20000
VERIFY_VERSIONS ?= 100000
bench:
	$(GO) test -run '^$$' -bench '^Benchmark(Ingest|Redrive|Sweeper|WriteUnits|MetricsRun)' -benchtime=1x -count=3 -timeout 60m ./shared/dev/bench/
	DLQQ_VERIFY_BENCH_RECORDS=$(VERIFY_RECORDS) $(GO) test -run '^$$' -bench '^BenchmarkVerify$$' -benchtime=1x -count=1 -timeout 60m ./shared/dev/bench/
	DLQQ_VERIFY_BENCH_VERSIONS=$(VERIFY_VERSIONS) $(GO) test -run '^$$' -bench '^BenchmarkVerifyVersions$$' -benchtime=1x -count=1 -timeout 60m ./shared/dev/bench/
	$(GO) test -run '^$$' -bench '^BenchmarkVerifyClaimCheckedBodies$$' -benchtime=1x -count=1 ./shared/dev/bench/
	$(GO) test -run '^$$' -bench Seal -benchmem -count=1 ./shared/domain/quarantine/
	$(GO) test -run '^$$' -bench WriterProof -benchmem -count=1 ./shared/domain/writerproof/
	$(GO) test -run '^$$' -bench 'WriterProofKMS/tree' -benchtime=20x -count=1 ./shared/dev/bench/
	$(GO) test -run '^$$' -bench 'WriterProofKMS/ingest' -benchtime=1x -count=1 ./shared/dev/bench/
	$(GO) test -run '^$$' -bench 'WriterProofSweeper' -benchtime=1x -count=1 ./shared/dev/bench/
	$(GO) test -run '^$$' -bench 'PeakMemory' -benchtime=1x -count=1 ./shared/dev/bench/
	$(GO) test -run '^$$' -bench 'LifecycleCost' -benchtime=1x -count=1 -v ./shared/dev/bench/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzEqualsJCS -fuzztime 30s ./shared/domain/canonical/
	$(GO) test -run '^$$' -fuzz FuzzQuarantine -fuzztime 30s ./shared/usecase/ingest/
	$(GO) test -run '^$$' -fuzz FuzzParseRequest -fuzztime 30s ./shared/usecase/redrive/
	$(GO) test -run '^$$' -fuzz FuzzCLIWindowsAndIDs -fuzztime 30s ./internal/dlqctl/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./shared/domain/ledger/
	$(GO) test -run '^$$' -fuzz FuzzStreamEntry -fuzztime 30s ./shared/usecase/ledger/
	$(GO) test -run '^$$' -fuzz FuzzDigestEntry -fuzztime 30s ./shared/usecase/ledger/

# linux/arm64 bootstrap zips for provided.al2023.
build: $(FUNCTIONS:%=$(BUILD)/%.zip)

$(BUILD)/%.zip: FORCE
	@mkdir -p $(BUILD)/$*
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(BUILD)/$*/bootstrap ./functions/$*
	$(GO) run ./internal/mkzip $@ $(BUILD)/$*/bootstrap config
	@ls -l $(BUILD)/$*/bootstrap $@

FORCE:

# `sam build` (BuildMethod: makefile) calls these with ARTIFACTS_DIR set.
# Each package holds config/ beside bootstrap: the sources file
# (SOURCES_FILE) and the schema files the functions read from their
# package root (docs/configuration.md "The sources file").
build-IngestFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/ingest
	cp -R config $(ARTIFACTS_DIR)/

demo:
	@echo "compiling dlqlocal (the six functions, kumo, the AWS SDK) with go run: the first run takes minutes, later runs reuse the Go build cache …"
	$(GO) run ./cmd/dlqlocal demo

# 10,000 messages through the whole pipeline under injected AWS faults and
# crashed redrive and sweeper processes; prints the table and fails if an
# invariant breaks (make soak SOAK_FLAGS="-messages 2000").
soak:
	$(GO) run ./cmd/dlqlocal soak $(SOAK_FLAGS)

# A storm of CAPACITY_MESSAGES dead-lettered messages from 50 sources (one
# takes 80 %, FIFO and standard mixed) through the real ingest and ledger
# on the embedded stack; prints every limit's projection and, last, the
# sustained messages per second one table takes (docs/operations.md
# "Storm capacity"). A few minutes on 2 cores.
CAPACITY_MESSAGES ?= 20000
capacity:
	$(GO) run ./cmd/dlqlocal capacity -messages $(CAPACITY_MESSAGES)

# The stack with the six functions in the local Lambda API, until Ctrl-C
# (make local LOCAL_FLAGS="-logs stderr"). Built, then exec'd: Ctrl-C ends
# dlqlocal itself, which stops cleanly and exits 0.
LOCAL_FLAGS ?=
local:
	@mkdir -p $(BUILD)
	$(GO) build -o $(BUILD)/dlqlocal ./cmd/dlqlocal
	@exec ./$(BUILD)/dlqlocal local -env-file $(BUILD)/local.env $(LOCAL_FLAGS)

clean:
	rm -rf $(BUILD)

build-RedriveFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/redrive
	cp -R config $(ARTIFACTS_DIR)/

build-SweeperFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sweeper
	cp -R config $(ARTIFACTS_DIR)/

build-MetricsFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/metrics
	cp -R config $(ARTIFACTS_DIR)/

build-LedgerFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/ledger
	cp -R config $(ARTIFACTS_DIR)/

build-DigestFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/digest
	cp -R config $(ARTIFACTS_DIR)/

# The operator function (<stack>-operate): the redrive code behind the
# IAM-authenticated operator endpoint (docs/template.md).
build-OperatorFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/operator
	cp -R config $(ARTIFACTS_DIR)/
