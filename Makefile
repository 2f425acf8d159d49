# Every target with a "## " comment is listed by `make help`, the default.

STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## start API, worker and wheel in one process (embedded backends unless configured)
	go run .

.PHONY: test
test: ## vet, gofmt, and every suite against MariaDB/Redis and again embedded
	./scripts/test.sh

.PHONY: test-embedded
test-embedded: ## the suites against SQLite and the in-process Redis only
	go test ./...

.PHONY: lint
lint: ## gofmt check, go vet and staticcheck
	@files=$$(gofmt -l .); if [ -n "$$files" ]; then echo "these files need gofmt -w:"; echo "$$files"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

.PHONY: bench
bench: ## benchmarks of the engine and the API
	go test -run '^$$' -bench . -benchtime 2s ./engine/... ./internal/... ./api/...

.PHONY: build
build: ## a static binary in bin/slotwheel
	CGO_ENABLED=0 go build -o bin/slotwheel .
