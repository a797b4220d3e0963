# bidgate: run it with `make run`, test it with `make test`.

PGHOST ?= 127.0.0.1
PGPORT ?= 5432
PGUSER ?= postgres
DBNAME ?= bidgate
REDISHOST ?= 127.0.0.1
REDISPORT ?= 6379
export BIDGATE_POSTGRES_URL ?= postgres://$(PGUSER)@$(PGHOST):$(PGPORT)/$(DBNAME)?sslmode=disable

STATICCHECK = go run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The OpenAPI linter, pinned; npx fetches it into npm's cache: $HOME's, or
# .cache/npm of the checkout where $HOME is not writable (a CI container).
# Redocly's telemetry and update notice are off.
REDOCLY = npx --yes @redocly/cli@2.77.0
export npm_config_cache ?= $(if $(shell test -n "$(HOME)" -a -w "$(HOME)" && echo y),$(HOME)/.npm,$(CURDIR)/.cache/npm)
export REDOCLY_TELEMETRY = off
export REDOCLY_SUPPRESS_UPDATE_NOTICE = true

.PHONY: run run-one build test test-cluster test-deploy docs-check fuzz chaos bench demo loadtest lint lint-openapi lint-asyncapi lint-typescript check-file-sizes db check-postgres check-redis

## run: a local 3-node cluster on :8080-8082 with the embedded Kafka broker, on the local PostgreSQL and Redis
run: db check-redis build
	bin/bidgate dev --nodes 3

## run-one: a single node on :8080 with every role
run-one: db check-redis build
	BIDGATE_CLUSTER_KEY=$$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n') BIDGATE_CLUSTER_SECRET=$$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n') \
	  BIDGATE_EVENT_SIGNING_KEY=$$(head -c32 /dev/urandom | base64) \
	  bin/bidgate serve --dev-key .bidgate/dev-key.pem

## build: compile bin/bidgate
build:
	go build -o bin/bidgate ./cmd/bidgate

## test: every test, with the race detector, against the local PostgreSQL and Redis
test: check-postgres check-redis
	go vet ./...
	go test -race -count=1 -timeout 9m ./...

## test-cluster: the tests of everything that talks to Redis (hot path, token buckets, promotion, closer,
## relay, persister, reconciler, fan-out, gateway, the load-test harness) against a Redis Cluster of 3
## primaries and 3 replicas that it starts on loopback ports CLUSTER_PORT.. and stops (internal/testredis/redis-cluster.sh).
## The build tag rediscluster adds the tests that start Redis Clusters of their own (failovers, moved slots)
## and leaves out those of one Redis server's own behaviour, which make test runs.
CLUSTER_PORT ?= 7100
test-cluster: check-postgres
	@dir=$$(mktemp -d) && trap 'internal/testredis/redis-cluster.sh stop "$$dir"' EXIT && \
	  addrs=$$(internal/testredis/redis-cluster.sh start "$$dir" $(CLUSTER_PORT)) && echo "Redis Cluster: $$addrs" && \
	  BIDGATE_TEST_REDIS_CLUSTER=$$addrs go test -race -count=1 -timeout 9m -tags rediscluster \
	    ./persist/... ./shard/ ./closer/ ./fanout/ ./gateway/ ./bench/

## test-deploy: offline checks of deploy/ (its own Go module): Kubernetes manifests decoded strictly and
## rendered with kustomize, the compose file with its .env.example, alert rules (promtool check and test),
## shell scripts (shellcheck), dashboard metrics and BIDGATE_* settings against the code and the built
## binary's serve --help. Without promtool or shellcheck those checks skip, and fail when CI is set.
test-deploy: build
	cd deploy/validate && go vet ./... && BIDGATE_BIN=$(CURDIR)/bin/bidgate go test -count=1 ./...

## docs-check: README.md, docs/*.md and deploy/README.md against the code: every path, test, metric, link, flag and
## default they name exists, and every shell example marked runnable (```sh runnable) passes, page by page, against a
## fresh `bidgate dev` cluster that it starts and stops, behind proxies that check every answer against the OpenAPI documents
## (ports 8080-8082 and 8380-8382 for the proxies, 18080-18082, 18180-18182, 18280-18282, 18380-18382 and 9092 free)
docs-check: db check-redis build
	go build -o bin/bidbench ./cmd/bidbench
	go build -o bin/docscheck ./internal/docscheck
	bin/docscheck

## fuzz: each fuzz target (amounts, ids, bid and auction bodies), about 10 s each here. The budgets are
## execution counts, not durations: with a duration, Go 1.26's fuzz coordinator can race its own deadline
## on a loaded machine and fail with "context deadline exceeded" (go.dev/issue/75804, fixed in Go 1.27).
## FUZZTIME (a count such as 1000000x, or a duration) overrides every budget.
FUZZ_PARSE ?= 300000x
FUZZ_BODY ?= 40000x
fuzz:
	go test -run '^$$' -fuzz '^FuzzParseMoney$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_PARSE)) .
	go test -run '^$$' -fuzz '^FuzzParseID$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_PARSE)) .
	go test -run '^$$' -fuzz '^FuzzBidRequest$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_BODY)) ./gateway/
	go test -run '^$$' -fuzz '^FuzzAuctionRequest$$' -fuzztime $(or $(FUZZTIME),$(FUZZ_BODY)) ./gateway/

## chaos: the fault harness (own PostgreSQL, Redis or Redis Cluster, broker and 3 node processes on loopback): eight faults under a flash sale, audited; CHAOS_SCENARIOS=node-kill picks one
chaos:
	go test -tags chaos -count=1 -v -timeout 20m ./bench/chaos/

## bench: the Go benchmarks: bids through HTTP (cold, hot batched and not) and the raw Redis script
bench: check-postgres check-redis
	go test -run '^$$' -bench . -benchtime 3s -count 3 ./shard/ ./gateway/
	go test -run '^$$' -bench . -benchtime 20000x -count 3 ./persist/
	go test -run '^$$' -bench . -benchtime 5x -count 3 ./closer/

## demo: a one-minute flash sale (100,000 cold and 4 hot auctions) on a local 3-node cluster, audited; prints the report's path
demo: db check-redis
	deploy/demo.sh

## loadtest: a 20 s flash sale against the cluster `make run` started, audited; report in bench-results/
loadtest:
	go run ./cmd/bidbench flash-sale --duration 20s --targets http://127.0.0.1:8080,http://127.0.0.1:8081,http://127.0.0.1:8082

## lint: no tracked file over 1 MiB, the OpenAPI and AsyncAPI documents, a TypeScript client typed from them, gofmt, go vet and staticcheck (also on make test-cluster's build)
lint: check-file-sizes lint-openapi lint-asyncapi lint-typescript
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed on:"; gofmt -l .; exit 1; }
	go vet ./...
	go vet -tags rediscluster ./...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags rediscluster ./...

## lint-openapi: the OpenAPI documents (gateway/openapi) through Redocly's recommended rules, every warning an error (needs Node.js 20.19+ and npx)
lint-openapi:
	$(REDOCLY) lint --config gateway/openapi/redocly.yaml gateway/openapi/public.json gateway/openapi/admin.json gateway/openapi/internal.json

## lint-typescript: generates TypeScript types from the OpenAPI documents (openapi-typescript) and compiles a web
## client written against them (gateway/openapi/typescript/client.ts, openapi-fetch) with tsc --strict; the npm
## packages are pinned in its package-lock.json
lint-typescript:
	@command -v npm >/dev/null || { echo "lint-typescript needs Node.js and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	cd gateway/openapi/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run -s generate && npm run -s check

## lint-asyncapi: internal/asyncapi/asyncapi.yaml and its schemas through the AsyncAPI CLI's validate (the spec, every
## reference and schema, its governance rules; a warning fails). Needs Node.js 20+ and npm; npx fetches the pinned CLI
## once. Its usage analytics are off.
ASYNCAPI_CLI ?= @asyncapi/cli@6.2.0
lint-asyncapi:
	@command -v npx >/dev/null || { echo "lint-asyncapi needs Node.js and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	@cfg=$$(mktemp) && trap 'rm -f "$$cfg"' EXIT && \
	  echo '{"analyticsEnabled":"false","infoMessageShown":"true","userID":"bidgate-lint"}' >"$$cfg" && \
	  ASYNCAPI_METRICS_CONFIG_PATH="$$cfg" SUPPRESS_NO_CONFIG_WARNING=1 npx --yes $(ASYNCAPI_CLI) validate --fail-severity warn internal/asyncapi/asyncapi.yaml

## check-file-sizes: fails on a tracked file over 1 MiB (a binary or a data dump does not belong in git)
check-file-sizes:
	@big=$$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 1048576 {print "  " $$2 " (" $$1 " bytes)"}'); \
	  test -z "$$big" || { echo "tracked files over 1 MiB:"; echo "$$big"; exit 1; }

check-postgres:
	@pg_isready -q -h $(PGHOST) -p $(PGPORT) || { \
	  echo "PostgreSQL is not answering on $(PGHOST):$(PGPORT)."; \
	  echo "Start it (Debian: pg_ctlcluster --skip-systemctl-redirect \$$(ls /etc/postgresql) main start)"; \
	  echo "or point PGHOST/PGPORT (and BIDGATE_POSTGRES_URL) at a running server."; \
	  exit 1; }

check-redis:
	@redis-cli -h $(REDISHOST) -p $(REDISPORT) ping >/dev/null 2>&1 || { \
	  echo "Redis is not answering on $(REDISHOST):$(REDISPORT)."; \
	  echo "Start it (redis-server --daemonize yes --bind 127.0.0.1 --port $(REDISPORT))"; \
	  echo "or point REDISHOST/REDISPORT (and BIDGATE_REDIS_ADDRS) at a running server."; \
	  exit 1; }

db: check-postgres
	@psql -h $(PGHOST) -p $(PGPORT) -U $(PGUSER) -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$(DBNAME)'" | grep -q 1 \
	  || psql -h $(PGHOST) -p $(PGPORT) -U $(PGUSER) -d postgres -qc 'CREATE DATABASE "$(DBNAME)"'
