// Package crash_test is the crash probe: Joiner runs as a separate process (this test binary,
// started again in child mode) on a full local cluster, is killed with SIGKILL at chosen moments
// of a 10-pod launch or of a consolidation replacement's launch, and is started again; the tests
// check that the launch converges (the replacement's command completes or rolls back) within
// seconds of the restart with no lost pod, no leaked node and no duplicate instance.
package crash_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

// Environment variables of the child mode: the kubeconfig to run Joiner against, and the file
// it logs to.
const (
	childKubeconfigEnv = "JOINER_CRASH_CHILD_KUBECONFIG"
	childLogEnv        = "JOINER_CRASH_CHILD_LOG"
	// childReadyLine is what the child prints once Joiner is ready.
	childReadyLine = "joiner ready"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	if kubeconfig := os.Getenv(childKubeconfigEnv); kubeconfig != "" {
		os.Exit(runChild(kubeconfig, os.Getenv(childLogEnv)))
	}
	os.Exit(setup(m))
}

// operatorOptions are Joiner's options in the child: the production defaults of every controller
// but the provisioner's batching and the disruption controller's polling period and validation
// delay, shortened as in the other e2e packages.
func operatorOptions() operator.Options {
	return operator.Options{
		CloudProvider: local.Factory(local.Options{}),
		Controllers: controllers.Options{
			Provisioning: provisioning.Options{BatchIdle: 500 * time.Millisecond, BatchMaxDuration: 3 * time.Second},
			Disruption:   disruption.Options{PollingPeriod: time.Second, ValidationDelay: 2 * time.Second},
		},
	}
}

// runChild runs Joiner in this process until it is killed (or asked to stop), and returns the
// exit code.
func runChild(kubeconfig, logPath string) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: load kubeconfig:", err)
		return 1
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open log:", err)
		return 1
	}
	defer func() { _ = f.Close() }()
	var mu sync.Mutex
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{Verbosity: 1})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	run, err := localrun.Start(ctx, cfg, localrun.Options{Operator: operatorOptions(), Log: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: start Joiner:", err)
		return 1
	}
	fmt.Println(childReadyLine)
	<-ctx.Done()
	if err := run.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child: stop Joiner:", err)
		return 1
	}
	return 0
}

// joinerProcess is Joiner running as a child process.
type joinerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startJoiner starts Joiner as a child process on the cluster and returns once it is ready.
func startJoiner(ctx context.Context, env *testbed.Env) (*joinerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the test binary: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childKubeconfigEnv+"="+env.KubeconfigPath, childLogEnv+"="+filepath.Join(env.LogDir, "joiner.log"))
	// The child dies with this process whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Joiner: %w", err)
	}
	p := &joinerProcess{cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		buf := make([]byte, len(childReadyLine))
		if _, err := io.ReadFull(out, buf); err == nil && string(buf) == childReadyLine {
			close(ready)
		}
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("joiner exited before it was ready (logs in %s)", env.LogDir)
	case <-time.After(90 * time.Second):
		p.kill()
		return nil, fmt.Errorf("joiner not ready within 90s (logs in %s)", env.LogDir)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *joinerProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to stop, as Kubernetes does, and waits for it.
func (p *joinerProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// joiner is the Joiner process the tests kill and restart.
var joiner *joinerProcess

func setup(m *testing.M) int {
	ctx := context.Background()
	env, err := testbed.Start(ctx, testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true,
		CRDDirs: []string{filepath.Join("..", "..", "config", "crd", "bases")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	scheme, err := apischeme.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		return 1
	}
	kube, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		return 1
	}
	cluster = &framework.Cluster{Env: env, Client: kube}
	if joiner, err = startJoiner(ctx, env); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		return 1
	}
	code := framework.Main(func() int {
		code := m.Run()
		joiner.stop()
		return code
	}, cluster)
	return code
}
