#!/usr/bin/env bash
# Builds the control-plane binaries the test bed needs (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, kwok) from Go modules into a git-ignored cache, keyed by version.
# A binary already in the cache is reused. Prints the asset directory on success.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
# The kwok stages the test bed runs, as paths under kwok's kustomize/stage folder: Nodes
# initialize at once and keep a fresh Lease and status (heartbeats), Pods go Ready, complete and
# delete at once.
KWOK_STAGES="node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${JOINER_TESTBED_CACHE:-$root/.cache/testbed}"
assets="$cache/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
work="$cache/work"
mkdir -p "$assets" "$work"

log() { printf 'testbed: %s\n' "$*" >&2; }
fail() { printf 'testbed: ERROR: %s\n' "$*" >&2; exit 1; }
command -v go >/dev/null || fail "go is not on PATH; install Go 1.26 first"

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0

build_kube() {
  local need=()
  for b in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    [ -x "$assets/$b" ] || need+=("$b")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  log "building ${need[*]} $K8S_VERSION from Go modules (about 15 minutes on a cold cache)"
  local mod="$work/kube-$K8S_VERSION"
  mkdir -p "$mod"
  local gomod
  gomod="$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  [ -f "$gomod" ] || fail "could not download k8s.io/kubernetes@$K8S_VERSION go.mod"
  local staging_ver="v0.${K8S_VERSION#v1.}"
  {
    echo "module joiner.local/kubebuild"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '=> \./staging/src/' "$gomod" | awk -v v="$staging_ver" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } > "$mod/go.mod"
  cat > "$mod/tools.go" <<'GO'
//go:build tools

package kubebuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (cd "$mod" && go mod tidy -e >/dev/null 2>"$mod/tidy.log") || { cat "$mod/tidy.log" >&2; fail "go mod tidy for kubernetes failed"; }
  for b in "${need[@]}"; do
    (cd "$mod" && go build -tags tools -trimpath -ldflags='-s -w' -o "$assets/$b.tmp" "k8s.io/kubernetes/cmd/$b") \
      || fail "building $b failed (see the output above)"
    mv "$assets/$b.tmp" "$assets/$b"
    log "built $b"
  done
}

build_etcd() {
  [ -x "$assets/etcd" ] && return 0
  log "building etcd $ETCD_VERSION from Go modules"
  local mod="$work/etcd-$ETCD_VERSION"
  mkdir -p "$mod"
  cat > "$mod/go.mod" <<MOD
module joiner.local/etcdbuild

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat > "$mod/main.go" <<'GO'
// Command etcd runs etcd's own main, built from Go modules for the test bed.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$mod" && go mod tidy >/dev/null 2>"$mod/tidy.log") || { cat "$mod/tidy.log" >&2; fail "go mod tidy for etcd failed"; }
  (cd "$mod" && go build -trimpath -ldflags='-s -w' -o "$assets/etcd.tmp" .) || fail "building etcd failed"
  mv "$assets/etcd.tmp" "$assets/etcd"
  log "built etcd"
}

build_kwok() {
  [ -x "$assets/kwok" ] && return 0
  log "building kwok $KWOK_VERSION from Go modules"
  GOBIN="$assets/.kwok-tmp" go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" \
    || fail "building kwok failed"
  mv "$assets/.kwok-tmp/kwok" "$assets/kwok"
  rmdir "$assets/.kwok-tmp"
  log "built kwok"
}

kwok_stages() {
  # The file's first line names the stages it holds, so a changed list rebuilds it.
  local header
  header="# kwok $KWOK_VERSION stages: $(echo $KWOK_STAGES)"
  [ -f "$assets/kwok-stages.yaml" ] && [ "$(head -n1 "$assets/kwok-stages.yaml")" = "$header" ] && return 0
  local dir
  dir="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  if [ ! -d "$dir" ]; then
    (cd "$work" && GOFLAGS=-mod=mod go mod download "sigs.k8s.io/kwok@$KWOK_VERSION") || fail "could not download kwok stages"
  fi
  local out="$assets/kwok-stages.yaml.tmp"
  echo "$header" > "$out"
  # Every stage listed must exist in kwok's release: a missing one fails the build rather than
  # leaving kwok without it (node heartbeats went missing that way once). testbed.KwokStages
  # lists the same stage names, and the test bed's tests check the file against it.
  for f in $KWOK_STAGES; do
    [ -f "$dir/$f" ] || fail "kwok $KWOK_VERSION has no stage $f (looked in $dir)"
    echo "---" >> "$out"
    cat "$dir/$f" >> "$out"
  done
  mv "$out" "$assets/kwok-stages.yaml"
}

case "${1:-all}" in
  all) build_etcd; build_kwok; kwok_stages; build_kube; ln -sfn "$(basename "$assets")" "$cache/current" ;;
  etcd) build_etcd ;;
  kwok) build_kwok; kwok_stages ;;
  kube) build_kube ;;
  path) ;;
  *) fail "unknown target $1 (use all, etcd, kwok, kube or path)" ;;
esac
echo "$assets"
