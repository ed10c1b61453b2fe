// Package convert_test checks `joiner convert` end to end: legacy Karpenter manifests are converted by
// the real binary, applied with the real kubectl to a kube-apiserver that serves Joiner's CRDs and calls
// its webhooks, and read back.
package convert_test

import (
	"context"
	"fmt"
	"os"
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
	var cleanup func()
	if kubectl, joinerBin, cleanup, err = framework.Tools(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = cluster.Stop()
		return 1
	}
	defer cleanup()
	return framework.Main(m.Run, cluster)
}
