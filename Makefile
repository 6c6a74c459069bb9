# erpsync. `make test` is the test command CI runs (see .ci/run).
GO ?= go
BIN := bin
CAP_MODULES := internal/captest/cap/node_modules/.package-lock.json

.PHONY: all build test test-mysql test-postgres vet fuzz clean deploy-check docs-check cap-deps

all: build

# bin/erpsync leaves the demo's embedded MySQL and Redis servers out (39 MB
# instead of 97 MB); its `demo` command runs bin/erpsync-demo, the full
# build, which is what `make demo` runs too.
build:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -tags nodemo -o $(BIN)/erpsync ./cmd/erpsync
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -o $(BIN)/erpsync-demo ./cmd/erpsync
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/erpmock ./cmd/erpmock

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi

# Tests talk to the real MariaDB/MySQL (ERPSYNC_TEST_MYSQL_DSN, default
# root@tcp(127.0.0.1:3306)/), PostgreSQL (ERPSYNC_TEST_POSTGRES_URL, default
# postgres://root@127.0.0.1:5432/) and Redis (ERPSYNC_TEST_REDIS_ADDR,
# default 127.0.0.1:6379). Each test makes its own database or key prefix.
# make test runs every package on MySQL, then the packages that touch the
# database again on PostgreSQL (ERPSYNC_TEST_DB=postgres): the same tests,
# a matrix of two databases.
# The packages are listed longest first: go test starts them in this
# order, two at a time on two cores, so the long ones do not end alone.
DB_PKGS := guarantee capentity e2e capsync store syncer relay reconcile cli verify outbox
DB_PKG_DIRS := $(DB_PKGS:%=./internal/%/)
# The packages that take longest on MySQL, started first for the same
# reason (lock waits out leases more than it computes); ./... adds the rest.
SLOW_PKG_DIRS := ./internal/capentity/ ./internal/guarantee/ ./internal/capsync/ ./internal/e2e/ ./lock/ ./internal/bench/

test: test-mysql test-postgres

# One side of the matrix: every package on MySQL, or the database's
# packages on PostgreSQL.
test-mysql: vet build $(CAP_MODULES)
	$(GO) test -race -count=1 -timeout 20m $(SLOW_PKG_DIRS) ./...

test-postgres: build $(CAP_MODULES)
	ERPSYNC_TEST_DB=postgres $(GO) test -race -count=1 -timeout 20m $(DB_PKG_DIRS)

# The SAP CAP project internal/captest serves as a real OData v4 server
# (Node.js 20+): its node_modules from the committed lockfile, no install
# scripts (the sql.js driver is WebAssembly, nothing is compiled).
cap-deps:
	cd internal/captest/cap && npm ci --ignore-scripts

# make test installs the CAP project's packages when they are missing or
# older than the lockfile.
$(CAP_MODULES): internal/captest/cap/package-lock.json
	cd internal/captest/cap && npm ci --ignore-scripts

# Offline checks of Dockerfile, compose, Kubernetes manifests, alert rules
# and the Grafana dashboard (see deploy/README.md for the tools).
deploy-check:
	bash deploy/check.sh

# README.md and docs/*.md against the repository: relative links and their
# anchors, the make targets they name, every flag of `erpsync <cmd> -h` in
# docs/configuration.md and of `erpmock -h` in docs/connect-erp.md, a
# runbook in docs/operations.md for every alert.
# `make test` runs the same test.
docs-check:
	$(GO) test -count=1 ./internal/docscheck/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodePage -fuzztime 30s ./internal/erp/
	$(GO) test -run '^$$' -fuzz FuzzDecodeMapped -fuzztime 30s ./internal/erp/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./internal/entity/

clean:
	rm -rf $(BIN)

.PHONY: bench bench-lock loadtest

# Lock+unlock pairs/s of lock against bsm/redislock and redsync (a
# separate module, so the peers stay out of go.mod); starts its own servers.
bench-lock:
	cd bench/lockbench && $(GO) run .

# The backfill against the database's ceiling and the seed pipeline, its
# re-run and its memory, on the MariaDB and Redis of the tests, and the
# PostgreSQL rows on BENCH_POSTGRES_DSN (several minutes; BENCH_POSTGRES_DSN=
# for none). BENCHFLAGS=--quick for a smoke run; see bin/erpsync-bench -h.
BENCH_POSTGRES_DSN ?= postgres://root@127.0.0.1:5432/erpsync_bench?sslmode=disable
bench: build
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/erpsync-bench ./cmd/erpsync-bench
	$(BIN)/erpsync-bench --erpsync-bin $(BIN)/erpsync $(if $(BENCH_POSTGRES_DSN),--postgres-dsn '$(BENCH_POSTGRES_DSN)') $(BENCHFLAGS)

# erpmock and several erpsync processes at once (a run and overlapping
# backfills); reports in ./loadtest-report. LOADTESTFLAGS="--records 200000".
loadtest: build
	$(BIN)/erpsync loadtest $(LOADTESTFLAGS)

.PHONY: demo chaos chaos-mysql chaos-postgres

# The whole job on embedded servers (erpmock, Redis and MySQL in this
# process): nothing to set up. DEMOFLAGS="--records 10000" for more.
demo:
	$(GO) run ./cmd/erpsync demo $(DEMOFLAGS)

# The chaos suite (internal/chaos, build tag chaos): real erpsync processes
# killed, frozen and starved of Redis, the database and the ERP, each
# scenario ending with the table equal to the ERP's truth, on MySQL and then
# on PostgreSQL. A few minutes each; the tables are printed and written to
# ./chaos-report/chaos-report.md and ./chaos-report/postgres/chaos-report.md.
chaos: chaos-mysql chaos-postgres

chaos-mysql:
	ERPSYNC_CHAOS_OUT=$(CURDIR)/chaos-report $(GO) test -race -tags chaos -count=1 -v -timeout 10m ./internal/chaos/

chaos-postgres:
	ERPSYNC_TEST_DB=postgres ERPSYNC_CHAOS_OUT=$(CURDIR)/chaos-report/postgres $(GO) test -race -tags chaos -count=1 -v -timeout 10m ./internal/chaos/

.PHONY: guarantee fuzz-guarantee

# The model-based test of the guarantee (internal/guarantee): a few hundred
# generated adversarial feeds, each with overlapping runs and backfills on
# the real MariaDB and Redis, some as processes killed with SIGKILL.
guarantee:
	$(GO) test -race -count=1 -v -timeout 15m -run 'TestGuaranteeSweep|TestSigtermKeepsTheJobLock|TestTypedGuaranteeSweep|TestTwoEntitiesGuarantee|TestTypedFaceKeepsEveryFlaw|TestEventsGuarantee|TestDocumentsGuarantee' ./internal/guarantee/

# Search further for feeds that break the guarantee. FUZZTIME=10m for longer.
FUZZTIME ?= 2m
fuzz-guarantee:
	$(GO) test -run '^$$' -fuzz FuzzGuarantee -fuzztime $(FUZZTIME) ./internal/guarantee/
