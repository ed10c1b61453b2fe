# Joiner — a Kubernetes node autoscaler that speaks Karpenter's v1 API, with a Rego policy layer.
# `make run` and `make test` work on a fresh machine: they build what they need first.

SHELL := /usr/bin/env bash
GO ?= go
GOFLAGS ?=
CACHE := $(CURDIR)/.cache
export JOINER_TESTBED_ASSETS ?= $(CACHE)/testbed/current
CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen
GOLANGCI_LINT_VERSION ?= v2.15.0
TEST_TIMEOUT ?= 25m

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: testbed
testbed: ## Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok from Go modules (cached in .cache/).
	@bash hack/testbed/build.sh all >/dev/null

.PHONY: helm
helm: ## Build helm from Go modules (cached in .cache/tools).
	@bash hack/tools/helm.sh >/dev/null

.PHONY: generate
generate: ## Write deepcopy code and the CRDs in config/crd/bases from the Go types in api/.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@mkdir -p charts/joiner/crds && rm -f charts/joiner/crds/*.yaml && cp config/crd/bases/*.yaml charts/joiner/crds/

.PHONY: build
build: ## Build the binaries into bin/.
	$(GO) build -o bin/ ./cmd/...

# The image: VERSION defaults to `git describe --tags --always --dirty` without a leading v
# (0.0.0-dev outside a checkout), the commit to `git rev-parse HEAD`. REGISTRY is where
# `make release` pushes, and is required there.
IMAGE_OUT ?= $(CACHE)/image
CRANE_VERSION ?= v0.22.1
VERSION ?=
REGISTRY ?=

.PHONY: image
image: ## Build the joiner image for linux/amd64 and linux/arm64 without Docker or a registry: OCI layout and archive in .cache/image (VERSION=0.1.0 sets the tag).
	$(GO) run ./hack/image --out $(IMAGE_OUT) $(if $(VERSION),--version $(VERSION))

.PHONY: release
release: ## Build the image as a release (clean tree, VERSION = the chart's appVersion) and push it with crane to $(REGISTRY)/joiner; log in first (crane auth login).
	@if [ -z "$(REGISTRY)" ]; then echo "make release: set REGISTRY, such as make release REGISTRY=ghcr.io/joiner-dev (log in first: go run github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION) auth login ghcr.io -u USER --password-stdin)"; exit 2; fi
	$(GO) run ./hack/image --release --out $(IMAGE_OUT) --repository $(REGISTRY)/joiner $(if $(VERSION),--version $(VERSION))
	$(GO) run github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION) push $(IMAGE_OUT)/oci "$$(cat $(IMAGE_OUT)/reference)"

.PHONY: fmt-check
fmt-check: ## Fail when a Go file is not gofmt-formatted (and name it).
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null | while read -r f; do [ -f "$$f" ] && echo "$$f"; done)); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted (run gofmt -w):"; echo "$$unformatted"; exit 1; fi

.PHONY: vet
vet: fmt-check ## gofmt check, then go vet every package.
	$(GO) vet ./...

.PHONY: lint
lint: fmt-check ## gofmt check, the import layering (hack/layers), then golangci-lint with gofmt as a formatter (built from the Go module proxy).
	$(GO) test -count=1 ./hack/layers/
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

.PHONY: test
test: testbed helm vet ## Run every test, including those against a real apiserver (builds the test bed first).
	@set -o pipefail; status=0; \
	$(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./... || status=$$?; \
	bash hack/testbed/reap.sh; exit $$status

# The scale test (e2e/scale): make test runs its 1,000-pod version; this runs 1,000 and 10,000 pods with
# Joiner's default disruption timings and two-minute idle windows (about 20 minutes).
SCALE_STEPS ?= 1000,10000
SCALE_IDLE ?= 2m
SCALE_CLIENT_RATE ?= raised

.PHONY: scale-test
scale-test: testbed ## Scale a Deployment 0 -> 1,000 -> 10,000 -> 0 pods on the local cluster with the joiner binary and print time to Running, NodeClaims, RSS, heap, idle CPU, API writes and budget adherence (SCALE_CLIENT_RATE=default: the control plane's default client rates).
	@set -o pipefail; status=0; \
	JOINER_SCALE_STEPS=$(SCALE_STEPS) JOINER_SCALE_IDLE=$(SCALE_IDLE) JOINER_SCALE_CLIENT_RATE=$(SCALE_CLIENT_RATE) JOINER_SCALE_DISRUPTION=default \
	$(GO) test -count=1 -v -timeout 90m -run TestScale ./e2e/scale/ || status=$$?; \
	bash hack/testbed/reap.sh; exit $$status

.PHONY: run
run: testbed ## Start a local control plane with the CRDs installed, and Joiner on the local provider; Ctrl-C stops it all.
	$(GO) build -o bin/joiner-local ./cmd/joiner-local
	bin/joiner-local $(RUN_ARGS)

.PHONY: demo
demo: testbed ## Run the scale-up and scale-down scenario unattended and print its timelines (pods pending -> NodeClaims -> Nodes Ready -> pods Running; then empty nodes consolidated away).
	$(GO) build -o bin/joiner-local ./cmd/joiner-local
	bin/joiner-local --demo

.PHONY: clean
clean: ## Remove built binaries (not the test-bed cache; see clean-cache).
	rm -rf bin/

.PHONY: clean-cache
clean-cache: ## Remove the test-bed binary cache too.
	rm -rf bin/ $(CACHE)
