// Package convert_test checks `joiner convert` end to end: legacy Karpenter manifests are converted by
// the real binary, applied with the real kubectl to a kube-apiserver that serves Joiner's CRDs and calls
// its webhooks, and read back.
package convert_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/testbed"
)

var (
	cluster   *framework.Cluster
	env       *testbed.Env
	c         client.Client
	kubectl   string
	joinerBin string
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	var err error
	cluster, err = framework.Start(context.Background(), testbed.Options{}, operator.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, c = cluster.Env, cluster.Client
	assets, err := testbed.FindAssets("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = cluster.Stop()
		return 1
	}
	kubectl = filepath.Join(assets, "kubectl")
	bin, err := os.MkdirTemp("", "joiner-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = cluster.Stop()
		return 1
	}
	defer func() { _ = os.RemoveAll(bin) }()
	joinerBin = filepath.Join(bin, "joiner")
	if out, err := exec.Command("go", "build", "-o", joinerBin, "../../cmd/joiner").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build joiner: %v\n%s", err, out)
		_ = cluster.Stop()
		return 1
	}
	return framework.Main(m.Run, cluster)
}
