// Package scale_test is Joiner's scale test: on a full local control plane (kwok nodes, the local
// provider) it runs the real joiner binary as a separate process, scales an inflate-like
// Deployment (250m / 256Mi) 0 → 1,000 → 10,000 → 0, and reports per step the time until every pod
// is Running, the NodeClaims, Joiner's RSS and Go heap at peak and in steady state, its CPU while
// idle, its API writes and conflicts, and whether the disruption budget held on the way down.
//
// `make test` runs the 1,000-pod steps with short idle windows; `make scale-test` runs the
// 10,000-pod steps too (minutes). Environment:
//
//	JOINER_SCALE_STEPS        replica counts to scale through, then 0 (default 1000; make scale-test: 1000,10000)
//	JOINER_SCALE_IDLE         idle window after each step, for the steady-state figures (default 20s; make scale-test: 2m)
//	JOINER_SCALE_CLIENT_RATE  raised (kube-controller-manager and kube-scheduler at 1000 requests/s, default)
//	                          or default (their own defaults: the ReplicaSet controller creates ~20 pods/s)
//	JOINER_SCALE_DISRUPTION   fast (a disruption pass every second, 2 s validation delay, default: the
//	                          way down in about a minute) or default (Joiner's defaults; make scale-test)
//	JOINER_SCALE_JOINER       a prebuilt joiner binary to measure (default: built from ../../cmd/joiner)
package scale_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/testbed"
)

// raisedClientRate is the client rate of kube-controller-manager and kube-scheduler with
// JOINER_SCALE_CLIENT_RATE=raised.
const raisedClientRate = 1000

// config is what the environment asks of the run.
type config struct {
	steps      []int
	idle       time.Duration
	clientRate string
	disruption string
	binary     string
}

// joinerArgs are the flags the disruption setting adds to Joiner's command line.
func (c config) joinerArgs() []string {
	if c.disruption == "fast" {
		return []string{"--disruption-polling-period=1s", "--disruption-validation-delay=2s"}
	}
	return nil
}

func configFromEnv() (config, error) {
	c := config{steps: []int{1000}, idle: 20 * time.Second, clientRate: "raised", disruption: "fast", binary: os.Getenv("JOINER_SCALE_JOINER")}
	if v := os.Getenv("JOINER_SCALE_STEPS"); v != "" {
		c.steps = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				return c, fmt.Errorf("JOINER_SCALE_STEPS=%q: want positive replica counts separated by commas, such as 1000,10000", v)
			}
			c.steps = append(c.steps, n)
		}
	}
	if v := os.Getenv("JOINER_SCALE_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			return c, fmt.Errorf("JOINER_SCALE_IDLE=%q: want a duration of at least 10s, such as 2m", v)
		}
		c.idle = d
	}
	if v := os.Getenv("JOINER_SCALE_CLIENT_RATE"); v != "" {
		if v != "raised" && v != "default" {
			return c, fmt.Errorf("JOINER_SCALE_CLIENT_RATE=%q: want raised or default", v)
		}
		c.clientRate = v
	}
	if v := os.Getenv("JOINER_SCALE_DISRUPTION"); v != "" {
		if v != "fast" && v != "default" {
			return c, fmt.Errorf("JOINER_SCALE_DISRUPTION=%q: want fast or default", v)
		}
		c.disruption = v
	}
	return c, nil
}

var (
	cluster *framework.Cluster
	joiner  *joinerProcess
	cfg     config
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	var err error
	if cfg, err = configFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	bed := testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true,
		CRDDirs: []string{filepath.Join("..", "..", "config", "crd", "bases")}}
	if cfg.clientRate == "raised" {
		bed.ClientQPS, bed.ClientBurst = raisedClientRate, 2*raisedClientRate
	}
	env, err := testbed.Start(ctx, bed)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, "logs of Joiner and the control plane are in", env.LogDir)
		_ = env.Stop()
		return 1
	}
	if cfg.binary == "" {
		_, bin, cleanup, err := framework.Tools()
		if err != nil {
			return fail(err)
		}
		defer cleanup()
		cfg.binary = bin
	}
	scheme, err := apischeme.New()
	if err != nil {
		return fail(err)
	}
	// The test polls the Deployment, NodeClaims and Joiner's metrics while the cluster is busy.
	kubeCfg := rest.CopyConfig(env.Config)
	kubeCfg.QPS, kubeCfg.Burst = 50, 100
	kube, err := client.New(kubeCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fail(err)
	}
	cluster = &framework.Cluster{Env: env, Client: kube}
	if joiner, err = startJoiner(ctx, kube, env, cfg.binary, cfg.joinerArgs()); err != nil {
		return fail(err)
	}
	return framework.Main(func() int {
		code := m.Run()
		joiner.stop()
		return code
	}, cluster)
}

// joinerProcess is the joiner binary running as `joiner controller` on the local control plane.
type joinerProcess struct {
	cmd        *exec.Cmd
	done       chan struct{}
	metricsURL string
}

// startJoiner installs Joiner's namespace and webhook configurations (pointed at 127.0.0.1), starts
// the binary with the local provider, and returns once it is ready.
func startJoiner(ctx context.Context, kube client.Client, env *testbed.Env, binary string, extraArgs []string) (*joinerProcess, error) {
	ports := make([]int, 3) // webhook, metrics, probe
	for i := range ports {
		p, err := framework.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operator.DefaultNamespace}}
	if err := kube.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	configs, err := localrun.LoadWebhookConfigurations(filepath.Join("..", "..", "config", "webhook"), fmt.Sprintf("https://127.0.0.1:%d", ports[0]))
	if err != nil {
		return nil, err
	}
	for _, obj := range configs {
		if err := kube.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("install %s: %w", obj.GetName(), err)
		}
	}
	logFile, err := os.Create(filepath.Join(env.LogDir, "joiner.log"))
	if err != nil {
		return nil, fmt.Errorf("create Joiner's log: %w", err)
	}
	args := append([]string{"controller", "--cloud-provider=local", "--leader-elect=false",
		"--webhook-port=" + strconv.Itoa(ports[0]), "--webhook-cert-ips=127.0.0.1",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports[2])}, extraArgs...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.KubeconfigPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Joiner dies with this process whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &joinerProcess{cmd: cmd, done: make(chan struct{}), metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])}
	go func() {
		defer close(p.done)
		_ = cmd.Wait()
		_ = logFile.Close()
	}()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[2])
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("joiner exited before it was ready (log: %s)", logFile.Name())
		default:
		}
		code, _ := framework.HTTPGet(readyz)
		return code == 200, nil
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("joiner not ready: %w", err)
	}
	return p, nil
}

// pid is the process id of Joiner.
func (p *joinerProcess) pid() int { return p.cmd.Process.Pid }

// stop asks Joiner to stop, as Kubernetes does, and kills it when it has not within 30 s.
func (p *joinerProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
