// Package webhooks_test checks Joiner's admission layer end to end: a real kube-apiserver calls the
// webhooks over TLS with the CA Joiner injected, and the real kubectl shows users what they see.
package webhooks_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/testbed"
)

var (
	env       *testbed.Env
	run       *localrun.Run
	c         client.Client
	kubectl   string
	joinerBin string
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	ctx := context.Background()
	var err error
	env, err = testbed.Start(ctx, testbed.Options{CRDDirs: []string{"../../config/crd/bases"}, ControllerManager: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	logFile, err := os.Create(filepath.Join(env.LogDir, "joiner.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logFile.Close()
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(logFile, time.Now().Format(time.RFC3339Nano), prefix, args) }, funcr.Options{Verbosity: 1})
	run, err = localrun.Start(ctx, env.Config, localrun.Options{
		Operator: operator.Options{AuditInterval: 2 * time.Second},
		Log:      log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start joiner:", err, "(logs in", env.LogDir+")")
		return 1
	}
	defer func() {
		if err := run.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "stop joiner:", err)
		}
	}()
	scheme, err := operator.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	assets, err := testbed.FindAssets("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubectl = filepath.Join(assets, "kubectl")
	bin, err := os.MkdirTemp("", "joiner-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	joinerBin = filepath.Join(bin, "joiner")
	if out, err := exec.Command("go", "build", "-o", joinerBin, "../../cmd/joiner").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build joiner: %v\n%s", err, out)
		return 1
	}
	return m.Run()
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
