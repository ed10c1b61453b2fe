#!/usr/bin/env bash
# Builds helm (v3) from the Go module proxy into a git-ignored cache keyed by version, and prints the
# path of the binary. A binary already in the cache is reused, so only the first call is slow (a few
# minutes on two cores). `go install pkg@version` builds outside Joiner's go.mod, so helm's
# dependencies never meet ours.
#
#   HELM_VERSION   helm version to build (default below; list them with `go list -m -versions helm.sh/helm/v3`)
#   JOINER_TOOLS_CACHE   cache directory (default <repo>/.cache/tools)
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${JOINER_TOOLS_CACHE:-$root/.cache/tools}"
dir="$cache/helm-$HELM_VERSION"
bin="$dir/helm"

fail() { printf 'helm.sh: ERROR: %s\n' "$*" >&2; exit 1; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || fail "go is not on PATH; install Go 1.26 first"
mkdir -p "$dir"

# Two callers (make and a test) may build at once: the lock makes the second one wait and reuse.
exec 9>"$dir/.lock"
if command -v flock >/dev/null; then flock 9; fi
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

printf 'helm.sh: building helm %s from Go modules into %s (a few minutes on a cold cache)\n' "$HELM_VERSION" "$dir" >&2
# Work in an empty directory outside the repository, so no go.mod or go.work around us is consulted
# (and none is ever edited).
tmp="$(mktemp -d "${TMPDIR:-/tmp}/joiner-helm-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export GOWORK=off GOFLAGS= CGO_ENABLED=0

# helm's release Makefile stamps its version and the Kubernetes version of its client-go into the
# binary. Without the latter, `helm template` assumes Kubernetes v1.20 and rejects charts that need
# a newer one, so derive it from helm's go.mod the same way.
gomod="$(cd "$tmp" && go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
[ -f "$gomod" ] || fail "could not download helm.sh/helm/v3@$HELM_VERSION (is the Go module proxy reachable?)"
k8s_minor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -n1)"
[ -n "$k8s_minor" ] || fail "could not find k8s.io/client-go in $gomod"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

(cd "$tmp" && GOBIN="$tmp" go install -trimpath -ldflags="$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") \
  || fail "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION failed (see the output above)"
[ -x "$tmp/helm" ] || fail "go install finished but $tmp/helm is missing"
"$tmp/helm" version --short >/dev/null || fail "the built helm does not run"
mv "$tmp/helm" "$bin.tmp" && mv "$bin.tmp" "$bin"
echo "$bin"
