// Package webhooks_test checks Joiner's admission layer end to end: a real kube-apiserver calls the
// webhooks over TLS with the CA Joiner injected, and the real kubectl shows users what they see.
package webhooks_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/controllers"
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
	cluster, err = framework.Start(context.Background(), testbed.Options{ControllerManager: true},
		operator.Options{Controllers: controllers.Options{AuditInterval: 2 * time.Second}})
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

// kubectlRun runs the real kubectl against the test cluster and returns its combined output.
func kubectlRun(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...)
	if stdin != "" {
		cmd.Stdin = stringReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
