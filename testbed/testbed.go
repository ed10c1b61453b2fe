// Package testbed starts a real, local Kubernetes control plane for tests and for `make run`:
// etcd and kube-apiserver through controller-runtime's envtest, and optionally kube-scheduler,
// kube-controller-manager and kwok (a fake kubelet), all built from Go modules by
// hack/testbed/build.sh. It stops every process it started, and its children die with it.
//
// It must not hold product logic: it only starts and stops processes and hands out a kubeconfig.
package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configures a control plane. The zero value starts etcd and kube-apiserver only,
// with binaries found by AssetsDir's documented lookup.
type Options struct {
	// AssetsDir holds etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok and
	// kwok-stages.yaml. Empty means $JOINER_TESTBED_ASSETS, then $KUBEBUILDER_ASSETS, then the
	// cache that `make testbed` fills (found by walking up from the working directory).
	AssetsDir string
	// CRDDirs are directories of CRD manifests installed before Start returns.
	CRDDirs []string
	// Webhooks are webhook configurations installed by envtest, which also writes serving
	// certificates for a webhook server in this process. Optional.
	Webhooks envtest.WebhookInstallOptions
	// Scheduler starts kube-scheduler.
	Scheduler bool
	// ControllerManager starts kube-controller-manager (Deployments, ReplicaSets, garbage
	// collection, and the node-lifecycle controller that removes the not-ready taint).
	ControllerManager bool
	// Kwok starts kwok, which makes Nodes annotated with KwokNodeAnnotation Ready and their Pods Running.
	Kwok bool
	// ClientQPS and ClientBurst, when positive, raise kube-controller-manager's and kube-scheduler's
	// client rate limits (--kube-api-qps, --kube-api-burst) above their defaults (20/30 and 50/100),
	// as kwok's tooling does for large simulated clusters. At the default the ReplicaSet controller
	// creates about 20 pods per second.
	ClientQPS, ClientBurst int
	// APIServerPort fixes the apiserver's secure port; 0 picks a free one.
	APIServerPort int
	// LogDir receives one log file per process. Empty means a fresh temporary directory.
	LogDir string
	// Log receives progress messages. The zero value discards them.
	Log logr.Logger
}

// KwokStages are the kwok stages the test bed runs (paths under kwok's kustomize/stage folder),
// as hack/testbed/build.sh writes them into kwok-stages.yaml: Nodes initialize at once and keep
// their heartbeats, Pods go Ready, complete and delete at once.
var KwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

// KwokNodeLeaseSeconds is the duration kwok sets on the Leases it renews for its Nodes, as a
// kubelet's default.
const KwokNodeLeaseSeconds = 40

// NodeMonitorGracePeriod is kube-controller-manager's --node-monitor-grace-period in the test bed
// (a kubelet's Lease duration, as Kubernetes sets it): a Node whose Lease and status are older than
// this goes Ready=Unknown.
const NodeMonitorGracePeriod = KwokNodeLeaseSeconds * time.Second

// KwokNodeAnnotation marks the Nodes that kwok manages in this test bed.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// KwokNodeAnnotationValue is the value of KwokNodeAnnotation that kwok selects.
const KwokNodeAnnotationValue = "fake"

// Env is a running control plane.
type Env struct {
	// Config is an admin rest.Config for the apiserver.
	Config *rest.Config
	// KubeconfigPath is an admin kubeconfig file that other processes (kubectl, kwok) can use.
	KubeconfigPath string
	// LogDir holds the logs of the processes the Env started.
	LogDir string
	// Webhooks is the installed webhook options (with the serving certificate directory and port).
	Webhooks *envtest.WebhookInstallOptions

	env      *envtest.Environment
	dir      string
	procs    []*process
	stopOnce sync.Once
	stopErr  error
	log      logr.Logger
}

// ErrPortInUse is returned by Start when Options.APIServerPort is already taken.
var ErrPortInUse = errors.New("port already in use")

// Start brings the control plane up and returns once the apiserver answers and the CRDs are
// installed. On error, whatever was started has been stopped.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	log := opts.Log
	assets, err := FindAssets(opts.AssetsDir)
	if err != nil {
		return nil, err
	}
	need := []string{"etcd", "kube-apiserver"}
	if opts.Scheduler {
		need = append(need, "kube-scheduler")
	}
	if opts.ControllerManager {
		need = append(need, "kube-controller-manager")
	}
	if opts.Kwok {
		need = append(need, "kwok", "kwok-stages.yaml")
	}
	for _, n := range need {
		if _, err := os.Stat(filepath.Join(assets, n)); err != nil {
			return nil, fmt.Errorf("test bed binary %s is missing in %s: run `make testbed` to build it: %w", n, assets, err)
		}
	}
	if opts.APIServerPort != 0 {
		if err := checkPortFree(opts.APIServerPort); err != nil {
			return nil, err
		}
	}

	dir, err := os.MkdirTemp("", "joiner-testbed-")
	if err != nil {
		return nil, fmt.Errorf("create test bed directory: %w", err)
	}
	e := &Env{dir: dir, log: log, LogDir: opts.LogDir}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	if e.LogDir == "" {
		e.LogDir = filepath.Join(dir, "logs")
	}
	if err := os.MkdirAll(e.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	wrapped, err := wrapWithParentDeath(filepath.Join(dir, "bin"), assets, "etcd", "kube-apiserver")
	if err != nil {
		return nil, err
	}

	e.env = &envtest.Environment{
		BinaryAssetsDirectory:    wrapped,
		CRDDirectoryPaths:        opts.CRDDirs,
		ErrorIfCRDPathMissing:    len(opts.CRDDirs) > 0,
		WebhookInstallOptions:    opts.Webhooks,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := e.env.ControlPlane.GetAPIServer()
	if opts.APIServerPort != 0 {
		api.SecureServing.ListenAddr.Address = "127.0.0.1"
		api.SecureServing.ListenAddr.Port = strconv.Itoa(opts.APIServerPort)
	}
	apiLog, err := os.Create(filepath.Join(e.LogDir, "kube-apiserver.log"))
	if err != nil {
		return nil, fmt.Errorf("create apiserver log: %w", err)
	}
	api.Out, api.Err = apiLog, apiLog
	etcdLog, err := os.Create(filepath.Join(e.LogDir, "etcd.log"))
	if err != nil {
		return nil, fmt.Errorf("create etcd log: %w", err)
	}
	e.env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}

	log.Info("starting etcd and kube-apiserver", "assets", assets)
	if _, err := e.env.Start(); err != nil {
		return nil, fmt.Errorf("start etcd and kube-apiserver (logs in %s): %w", e.LogDir, err)
	}
	e.Webhooks = &e.env.WebhookInstallOptions

	admin, err := e.env.AddUser(envtest.User{Name: "joiner-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add admin user: %w", err)
	}
	e.Config = admin.Config()
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("render admin kubeconfig: %w", err)
	}
	e.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}

	if opts.ControllerManager {
		if err := e.startProcess(ctx, filepath.Join(assets, "kube-controller-manager"), append([]string{
			"--kubeconfig=" + e.KubeconfigPath, "--leader-elect=false", "--secure-port=0",
			"--controllers=*,-serviceaccount-token", "--use-service-account-credentials=false",
			fmt.Sprintf("--node-monitor-grace-period=%s", NodeMonitorGracePeriod),
		}, opts.clientRateArgs()...)...); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := e.startProcess(ctx, filepath.Join(assets, "kube-scheduler"), append([]string{
			"--kubeconfig=" + e.KubeconfigPath, "--leader-elect=false", "--secure-port=0",
		}, opts.clientRateArgs()...)...); err != nil {
			return nil, err
		}
	}
	if opts.Kwok {
		if err := e.startProcess(ctx, filepath.Join(assets, "kwok"),
			"--kubeconfig="+e.KubeconfigPath,
			"--config="+filepath.Join(assets, "kwok-stages.yaml"),
			"--manage-all-nodes=false",
			// kwok renews each Node's Lease (and the heartbeat stage its status), so Nodes stay
			// Ready; without it kube-controller-manager marks them Unknown after its grace period.
			fmt.Sprintf("--node-lease-duration-seconds=%d", KwokNodeLeaseSeconds),
			"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"="+KwokNodeAnnotationValue,
			"--server-address=127.0.0.1:0",
		); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// clientRateArgs are the client rate flags of kube-controller-manager and kube-scheduler: none
// unless ClientQPS is set (the components' defaults then apply).
func (o Options) clientRateArgs() []string {
	if o.ClientQPS <= 0 {
		return nil
	}
	return []string{fmt.Sprintf("--kube-api-qps=%d", o.ClientQPS), fmt.Sprintf("--kube-api-burst=%d", max(o.ClientBurst, o.ClientQPS))}
}

// startProcess starts a control-plane component that logs to its own file and is killed
// when this process dies.
func (e *Env) startProcess(ctx context.Context, bin string, args ...string) error {
	name := filepath.Base(bin)
	logFile, err := os.Create(filepath.Join(e.LogDir, name+".log"))
	if err != nil {
		return fmt.Errorf("create %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	e.log.Info("starting " + name)
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	e.procs = append(e.procs, p)
	go func() { p.err = cmd.Wait(); _ = logFile.Close(); close(p.done) }()
	// A component that exits at once (bad flag, missing file) is reported here, not later.
	select {
	case <-p.done:
		out, _ := os.ReadFile(logFile.Name())
		return fmt.Errorf("%s exited at start (%v); its log ends:\n%s", name, p.err, tail(out, 2000))
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Stop stops every process the Env started, in reverse order, and removes its temporary files.
// It is safe to call more than once.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		for i := len(e.procs) - 1; i >= 0; i-- {
			if err := stopProcess(e.procs[i]); err != nil {
				errs = append(errs, err)
			}
		}
		if e.env != nil {
			if err := e.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop etcd and kube-apiserver: %w", err))
			}
		}
		if e.dir != "" && os.Getenv("JOINER_TESTBED_KEEP") == "" {
			if err := os.RemoveAll(e.dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", e.dir, err))
			}
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// process is a started component and a channel closed once it has exited and been reaped.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func stopProcess(p *process) error {
	pid := p.cmd.Process.Pid
	// Signal the whole process group: the component and anything it started.
	if err := killGroup(pid, false); err != nil {
		return fmt.Errorf("stop %s: %w", filepath.Base(p.cmd.Path), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	if err := killGroup(pid, true); err != nil {
		return fmt.Errorf("kill %s: %w", filepath.Base(p.cmd.Path), err)
	}
	<-p.done
	return nil
}

func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("apiserver port %d: %w (another apiserver or `make run` may be running; stop it or choose another port): %v", port, ErrPortInUse, err)
	}
	return l.Close()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
