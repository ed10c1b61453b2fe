package install_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
)

// IRSA is how the chart's values give Joiner its AWS identity on EKS: the ServiceAccount's
// role-arn annotation, which EKS's pod identity webhook turns into these variables and a projected
// token file of audience stsAudience.
const (
	irsaAnnotation = "eks.amazonaws.com/role-arn"
	stsAudience    = "sts.amazonaws.com"
)

// replica is one Joiner process standing in for one pod of the chart's Deployment (podRun says
// how it is built from the Deployment and what differs from a pod).
type replica struct {
	// pod is the stand-in pod's name.
	pod     string
	run     *podRun
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
}

// startReplica starts the binary as the pod podName of deploy would run it, and returns once its
// readiness probe passes.
func startReplica(ctx context.Context, deploy *appsv1.Deployment, podName string) (*replica, error) {
	pod := standInPod(deploy, podName)
	run, err := newPodRun(ctx, cluster.Client, pod, containerName, framework.FreePort)
	if err != nil {
		return nil, fmt.Errorf("pod %s of Deployment %s: %w", podName, deploy.Name, err)
	}
	dir := filepath.Join(workDir, podName+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	standIn, err := podEnvironment(ctx, pod, run, dir)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", podName, err)
	}
	r := &replica{pod: podName, run: run, done: make(chan struct{}), logPath: filepath.Join(cluster.Env.LogDir, podName+".log")}
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pod %s: log: %w", podName, err)
	}
	defer func() { _ = logFile.Close() }()
	r.cmd = exec.Command(tools.joiner, run.args...)
	r.cmd.Env = standIn
	for _, e := range run.env {
		r.cmd.Env = append(r.cmd.Env, e.Name+"="+e.Value) // after the stand-ins: the pod spec wins, as it would over a webhook's additions
	}
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	// The process dies with the test binary whatever happens to it; it runs as the pod's user.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: run.credential()}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pod %s: start %s: %w", podName, tools.joiner, err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	register(r)
	if err := r.waitReady(90 * time.Second); err != nil {
		r.kill()
		return nil, err
	}
	return r, nil
}

// podEnvironment prepares the pod's directory (its /tmp, its credentials) and returns what stands
// in for what the kubelet and EKS give a pod beyond its spec:
//   - KUBECONFIG, with a token of the pod's ServiceAccount from the TokenRequest API, for the
//     token the kubelet mounts (in-cluster configuration reads a fixed path and a Service IP);
//   - the variables of EKS's pod identity webhook for IRSA (AWS_ROLE_ARN from the ServiceAccount's
//     annotation, AWS_WEB_IDENTITY_TOKEN_FILE with a token of audience sts.amazonaws.com, the
//     region), so the SDK assumes the role through sts:AssumeRoleWithWebIdentity, in moto;
//   - AWS_ENDPOINT_URL: every AWS call goes to moto instead of AWS, the one thing no pod has (and
//     AWS_ENDPOINT_URL_STS: the SDK's web identity provider does not take the global one);
//   - TMPDIR for the emptyDir at /tmp, and HOME.
func podEnvironment(ctx context.Context, pod *corev1.Pod, run *podRun, dir string) ([]string, error) {
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("pod directory: %w", err)
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "AWS_ENDPOINT_URL=" + moto.Endpoint}
	if run.tmpMount {
		env = append(env, "TMPDIR="+tmp)
	}
	sa := &corev1.ServiceAccount{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}, sa); err != nil {
		return nil, fmt.Errorf("ServiceAccount %s of the pod: %w", pod.Spec.ServiceAccountName, err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(ctx, sa, kubeconfig); err != nil {
		return nil, err
	}
	env = append(env, "KUBECONFIG="+kubeconfig)
	if role := sa.Annotations[irsaAnnotation]; role != "" {
		token, err := serviceAccountToken(ctx, sa, stsAudience)
		if err != nil {
			return nil, err
		}
		tokenFile := filepath.Join(dir, "eks-token")
		if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
			return nil, fmt.Errorf("IRSA token file: %w", err)
		}
		env = append(env, "AWS_ENDPOINT_URL_STS="+moto.Endpoint, "AWS_ROLE_ARN="+role, "AWS_WEB_IDENTITY_TOKEN_FILE="+tokenFile, "AWS_STS_REGIONAL_ENDPOINTS=regional",
			"AWS_REGION="+awstest.Region, "AWS_DEFAULT_REGION="+awstest.Region)
	}
	return env, run.own(dir)
}

// writeKubeconfig writes a kubeconfig of the test apiserver that authenticates as sa.
func writeKubeconfig(ctx context.Context, sa *corev1.ServiceAccount, path string) error {
	token, err := serviceAccountToken(ctx, sa)
	if err != nil {
		return err
	}
	host := cluster.Env.Config.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	return writeTokenKubeconfig(path, host, cluster.Env.Config.CAData, sa.Name, sa.Namespace, token)
}

// writeTokenKubeconfig writes a kubeconfig of the apiserver at server (whose CA is caPEM) with a
// bearer token.
func writeTokenKubeconfig(path, server string, caPEM []byte, user, namespace, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "test", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = user
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write the kubeconfig of %s: %w", user, err)
	}
	return nil
}

// serviceAccountToken asks the TokenRequest API for a one-hour token of sa (for the apiserver's
// own audience when audiences is empty).
func serviceAccountToken(ctx context.Context, sa *corev1.ServiceAccount, audiences ...string) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}
	got, err := clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for ServiceAccount %s/%s %v: %w", sa.Namespace, sa.Name, audiences, err)
	}
	return got.Status.Token, nil
}

// credential is the user the process runs as: the pod's, when this test runs as root (otherwise
// the test's own user, which cannot switch).
func (r *podRun) credential() *syscall.Credential {
	if os.Geteuid() != 0 || r.uid == nil {
		return nil
	}
	c := &syscall.Credential{Uid: uint32(*r.uid), Gid: uint32(*r.uid)}
	if r.gid != nil {
		c.Gid = uint32(*r.gid)
	}
	for _, g := range r.groups {
		c.Groups = append(c.Groups, uint32(g))
	}
	return c
}

// own gives dir and what is in it to the pod's user, as the kubelet does for fsGroup volumes.
func (r *podRun) own(dir string) error {
	c := r.credential()
	if c == nil {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(path, int(c.Uid), int(c.Gid))
	})
}

// waitReady polls the readiness probe until it passes, the process exits or timeout passes.
func (r *replica) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if r.exited() {
			return fmt.Errorf("pod %s: joiner exited before it was ready (%v; log in %s)", r.pod, r.cmd.ProcessState, r.logPath)
		}
		code, body := framework.HTTPGet(r.url(r.run.readyPort, r.run.readyPath))
		if code == http.StatusOK {
			return nil
		}
		last = body
		time.Sleep(200 * time.Millisecond) // the probe's period here
	}
	return fmt.Errorf("pod %s: not ready within %s (log in %s): %s", r.pod, timeout, r.logPath, last)
}

func (r *replica) url(port int, path string) string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + path
}

// port returns the local port of the container port named name.
func (r *replica) port(name string) int { return r.run.localPorts[name] }

func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process.
func (r *replica) signal(sig syscall.Signal) error {
	if err := r.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("pod %s: send %s: %w", r.pod, sig, err)
	}
	return nil
}

// waitExit waits for the process to exit and returns its state.
func (r *replica) waitExit(timeout time.Duration) (*os.ProcessState, error) {
	select {
	case <-r.done:
		return r.cmd.ProcessState, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("pod %s: still running %s after the signal (log in %s)", r.pod, timeout, r.logPath)
	}
}

// stop stops the process as the kubelet stops a pod: SIGTERM, SIGKILL after the grace period.
func (r *replica) stop(grace time.Duration) {
	if r.exited() {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	if _, err := r.waitExit(grace); err != nil {
		r.kill()
	}
}

func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// masterStatus returns the replica's leader_election_master_status, or "" when it cannot be read.
func (r *replica) masterStatus() string {
	return framework.LeaderStatus(r.url(r.port(metricsPortName), "/metrics"), operator.LeaderElectionID)
}
