// Package leader_test is the apiserver-pause probe of leader election: two Joiner replicas run as
// separate processes (this test binary, started again in child mode) with leader election on, on
// one local cluster, and the test pauses kube-apiserver (SIGSTOP) for longer than the renew
// deadline. The tests check that leadership survives: exactly one replica leads again soon after
// the apiserver is back, neither process exits, and no NodeClaim is launched twice.
package leader_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

// Environment variables of the child mode.
const (
	childKubeconfigEnv = "JOINER_LEADER_CHILD_KUBECONFIG"
	childIDEnv         = "JOINER_LEADER_CHILD_ID"
	childLogEnv        = "JOINER_LEADER_CHILD_LOG"
	childPortsEnv      = "JOINER_LEADER_CHILD_PORTS" // webhook,metrics,probe
)

// fieldManager is the user agent, and so the managedFields manager, of replica id's writes: which
// replica wrote a NodeClaim is read from it.
func fieldManager(id string) string { return "joiner-e2e-" + id }

var cluster *framework.Cluster

// replicas are the two Joiner processes, by identity.
var replicas = map[string]*replica{}

func TestMain(m *testing.M) {
	if kubeconfig := os.Getenv(childKubeconfigEnv); kubeconfig != "" {
		os.Exit(runChild(kubeconfig))
	}
	os.Exit(setup(m))
}

// runChild runs one Joiner replica as `joiner controller` does (operator.Run, leader election on
// with the production timings, the local provider) until it is asked to stop, and returns the exit
// code. Its leader-election identity is its id.
func runChild(kubeconfig string) int {
	id := os.Getenv(childIDEnv)
	var webhookPort, metricsPort, probePort int
	if _, err := fmt.Sscanf(os.Getenv(childPortsEnv), "%d,%d,%d", &webhookPort, &metricsPort, &probePort); err != nil {
		fmt.Fprintln(os.Stderr, "child: ports:", err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: load kubeconfig:", err)
		return 1
	}
	cfg.UserAgent = fieldManager(id)
	f, err := os.OpenFile(os.Getenv(childLogEnv), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
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
	ctrllog.SetLogger(logger)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = operator.Run(ctx, cfg, operator.Options{
		Namespace:   operator.DefaultNamespace,
		WebhookHost: "127.0.0.1", WebhookPort: webhookPort, WebhookIPs: []net.IP{net.ParseIP("127.0.0.1")},
		MetricsAddr: "127.0.0.1:" + strconv.Itoa(metricsPort), ProbeAddr: "127.0.0.1:" + strconv.Itoa(probePort),
		LeaderElect: true, LeaderElectionIdentity: id,
		CloudProvider: local.Factory(local.Options{Log: logger.WithName("local-provider")}),
		Log:           logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child", id+":", err)
		return 1
	}
	return 0
}

// replica is one Joiner process.
type replica struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
	// ports are the webhook, metrics and probe ports.
	ports                             []int
	webhookURL, metricsURL, readyzURL string
	logPath                           string
}

// newReplica picks the ports of replica id.
func newReplica(env *testbed.Env, id string) (*replica, error) {
	ports := make([]int, 3)
	for i := range ports {
		var err error
		if ports[i], err = framework.FreePort(); err != nil {
			return nil, err
		}
	}
	return &replica{id: id, done: make(chan struct{}), ports: ports, logPath: filepath.Join(env.LogDir, "joiner-"+id+".log"),
		webhookURL: fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1]), readyzURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[2])}, nil
}

// start starts the replica as a child process and returns once it is ready.
func (r *replica) start(env *testbed.Env) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the test binary: %w", err)
	}
	r.cmd = exec.Command(self, "-test.run=^$")
	r.cmd.Env = append(os.Environ(), childKubeconfigEnv+"="+env.KubeconfigPath, childIDEnv+"="+r.id, childLogEnv+"="+r.logPath,
		fmt.Sprintf("%s=%d,%d,%d", childPortsEnv, r.ports[0], r.ports[1], r.ports[2]))
	// The child dies with this process whatever happens to it.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.cmd.Stdout, r.cmd.Stderr = os.Stdout, os.Stderr
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start replica %s: %w", r.id, err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if r.exited() {
			return fmt.Errorf("replica %s exited before it was ready (log in %s)", r.id, r.logPath)
		}
		code, body := framework.HTTPGet(r.readyzURL + "?verbose")
		if code == http.StatusOK {
			return nil
		}
		last = body
		time.Sleep(200 * time.Millisecond) // polling the replica's readiness endpoint
	}
	r.stop()
	return fmt.Errorf("replica %s not ready within 90s (log in %s): %s", r.id, r.logPath, last)
}

// exited reports whether the process has exited.
func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stop asks the process to stop, as Kubernetes does, and waits for it.
func (r *replica) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	}
}

func setup(m *testing.M) int {
	ctx := context.Background()
	env, err := testbed.Start(ctx, testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true,
		CRDDirs: []string{filepath.Join("..", "..", "config", "crd", "bases")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		for _, r := range replicas {
			r.stop()
		}
		_ = env.Stop()
		return 1
	}
	scheme, err := apischeme.New()
	if err != nil {
		return fail(err)
	}
	// The test samples NodeClaims every 200 ms while it checks everything else: more than
	// client-go's default 5 requests per second.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fail(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operator.DefaultNamespace}}
	if err := kube.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fail(fmt.Errorf("create namespace %s: %w", ns.Name, err))
	}
	cluster = &framework.Cluster{Env: env, Client: kube}
	for _, id := range []string{"replica-a", "replica-b"} {
		r, err := newReplica(env, id)
		if err != nil {
			return fail(err)
		}
		replicas[id] = r
	}
	// The admission webhooks call replica-a (both replicas serve them, as in a cluster; the
	// configurations take one URL here).
	configs, err := localrun.LoadWebhookConfigurations(filepath.Join("..", "..", "config", "webhook"), replicas["replica-a"].webhookURL)
	if err != nil {
		return fail(err)
	}
	for _, obj := range configs {
		if err := kube.Create(ctx, obj); err != nil {
			return fail(fmt.Errorf("install %s: %w", obj.GetName(), err))
		}
	}
	for _, id := range []string{"replica-a", "replica-b"} {
		if err := replicas[id].start(env); err != nil {
			return fail(err)
		}
	}
	return framework.Main(func() int {
		code := m.Run()
		for _, r := range replicas {
			r.stop()
		}
		return code
	}, cluster)
}
