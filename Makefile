# effectd: the two commands are `make run` and `make test`.
GO        ?= go
GOFLAGS   ?=
PKGS      := ./...

.PHONY: run test test-citus build schema vet lint staticcheck fuzz fuzz-pure fuzz-db mutate stripe-mock clean deploy

## run: build ./effectd, then start it on a throwaway local PostgreSQL under
## .data/ (unless DATABASE_URL is set), with the sandbox providers and the
## example config; DEV_FLAGS adds flags of `effectd dev`. It runs the binary,
## not go run, which exits 1 when Ctrl-C reaches it, however cleanly effectd
## stopped: make would report that as an error.
DEV_FLAGS ?=
run: build
	./effectd dev $(DEV_FLAGS)

## test: vet, then every test with the race detector against a real PostgreSQL.
test: vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-citus: the Citus tests (build tag citus, named TestCitus...) of the
## packages that have them, each binary starting a coordinator and two workers
## on loopback. Needs Citus in the system PostgreSQL (.ci/citus-install builds
## it from ../shared/citus); without it they skip, or fail when CI is set.
## Not part of make test. One package at a time (-p 1): each starts three
## PostgreSQL servers, and several such clusters at once starve two cores.
## make vet does not see the citus files; test-citus vets them first.
CITUS_PKGS = $(sort $(dir $(shell grep -rl --include='*_citus_test.go' '^//go:build citus' .)))
test-citus:
	$(GO) vet -tags citus $(CITUS_PKGS)
	$(GO) test -race -tags citus -count=1 -p 1 -timeout 30m -run '^TestCitus' $(CITUS_PKGS)

build:
	$(GO) build -o effectd ./cmd/effectd

## schema: write migrations/schema.sql, the schema the migrations make, from a
## throwaway PostgreSQL they migrated (pg_dump --schema-only). Run it with
## every new migration and commit the file with it: make test fails while the
## committed file differs (TestSchemaFile).
schema:
	$(GO) test -count=1 -run '^TestSchemaFile$$' ./migrations/ -write-schema

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

## lint: vet and gofmt, then staticcheck at the pinned version (make
## staticcheck installs it when missing).
lint: vet staticcheck
	$(STATICCHECK) $(PKGS)

## staticcheck: install staticcheck $(STATICCHECK_VERSION) into GOBIN (or
## GOPATH/bin) unless that version is already there.
STATICCHECK_VERSION := v0.8.2
STATICCHECK = $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/staticcheck
staticcheck:
	@$(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))' || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## fuzz: run each fuzz target briefly (FUZZTIME=30s for longer, or a count of
## inputs such as 10000x, which CI uses: a duration can end in a spurious
## "context deadline exceeded" on Go 1.26, go.dev/issue/75804). fuzz-pure runs
## those that need no database; the database-backed ones (fuzz-db) start a
## PostgreSQL cluster in every fuzz worker, and a worker stopped while it
## minimises an input can hang the run until go test's timeout, so CI runs
## fuzz-pure and make test runs the database targets' seed corpora.
FUZZTIME ?= 10s
fuzz: fuzz-pure fuzz-db
fuzz-db:
	$(GO) test -run '^$$' -fuzz '^FuzzEnqueue$$' -fuzztime $(FUZZTIME) ./dispatcher/
	$(GO) test -run '^$$' -fuzz '^FuzzPayloadParity$$' -fuzztime $(FUZZTIME) ./dispatcher/
	$(GO) test -run '^$$' -fuzz '^FuzzPayloadFieldsParity$$' -fuzztime $(FUZZTIME) ./dispatcher/
fuzz-pure:
	$(GO) test -run '^$$' -fuzz '^FuzzNext$$' -fuzztime $(FUZZTIME) ./statemachine/
	$(GO) test -run '^$$' -fuzz '^FuzzParseResolve$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzPolicyPatch$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeBody$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzIngress$$' -fuzztime $(FUZZTIME) ./api/ingress/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./cmd/effectd/internal/config/
	$(GO) test -run '^$$' -fuzz '^FuzzParseCitus$$' -fuzztime $(FUZZTIME) ./cmd/effectd/internal/config/

## deploy: the deployment artefacts, from the deploy/ module (its own go.mod:
## helm and go-containerregistry stay out of effectd's): a static effectd,
## its container image tarball (effectd-image.tar, no daemon needed), the
## chart rendered with every option on (effectd-chart.yaml), then vet and the
## image and chart tests. CI runs it after make test.
deploy:
	CGO_ENABLED=0 $(GO) build -trimpath -o effectd-static ./cmd/effectd
	cd deploy && $(GO) vet ./...
	cd deploy && $(GO) run ./image -binary ../effectd-static -out ../effectd-image.tar
	cd deploy && $(GO) tool helm template effectd helm/effectd --set prometheusRule.enabled=true,serviceMonitor.enabled=true > ../effectd-chart.yaml
	cd deploy && EFFECTD_BINARY=$(CURDIR)/effectd-static $(GO) test -count=1 ./...

## mutate: break each guarantee in turn (the list in cmd/mutate) and require
## its tests to fail; a release check (see README, Testing). MUTATE=regexp picks some.
mutate:
	$(GO) run ./cmd/mutate $(if $(MUTATE),-only '$(MUTATE)')

## stripe-mock: install the Stripe API validator used by providers/stripe tests.
stripe-mock:
	$(GO) install github.com/stripe/stripe-mock@v0.203.0

clean:
	rm -rf .data effectd effectd-static effectd-image.tar effectd-chart.yaml
