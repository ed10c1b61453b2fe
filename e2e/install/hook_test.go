package install_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// hookRun is what the stand-in kubelet of a hook Job's pod did.
type hookRun struct {
	pod, job string
	args     []string
	exitCode int
	output   string
}

// runHookPods stands in for the kubelet for the pods of the release's hook Jobs until ctx ends:
// the test bed has no node to run them (and kwok would report them done without running them), so
// for each pod it runs the container's command here, the test bed's kubectl for the image's
// /bin/kubectl, with its arguments and environment, as the pod's ServiceAccount (a kubeconfig with
// a TokenRequest token, so the hook's own RBAC is what is exercised) and as its user, and reports
// the exit in the pod's status, which is what the Job controller and helm wait on.
func runHookPods(ctx context.Context) <-chan hookRun {
	out := make(chan hookRun, 4)
	done := map[string]bool{}
	go func() {
		defer close(out)
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods := &corev1.PodList{}
			if err := cluster.Client.List(ctx, pods, client.InNamespace(namespace), client.HasLabels{batchv1.JobNameLabel}); err != nil {
				return false, nil
			}
			for i := range pods.Items {
				pod := &pods.Items[i]
				if done[pod.Name] || pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
					continue
				}
				done[pod.Name] = true
				out <- runHookPod(ctx, pod)
			}
			return false, nil
		})
	}()
	return out
}

// runHookPod runs the pod's one container and reports its exit in the pod's status.
func runHookPod(ctx context.Context, pod *corev1.Pod) hookRun {
	run := hookRun{pod: pod.Name, job: pod.Labels[batchv1.JobNameLabel], exitCode: -1}
	fail := func(err error) hookRun { run.output = err.Error(); return run }
	if len(pod.Spec.Containers) != 1 {
		return fail(fmt.Errorf("hook pod %s has %d containers; the stand-in runs one", pod.Name, len(pod.Spec.Containers)))
	}
	c := &pod.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "/bin/kubectl" {
		return fail(fmt.Errorf("hook pod %s runs %v; the stand-in runs only the kubectl image's /bin/kubectl", pod.Name, c.Command))
	}
	run.args = c.Args
	dir, err := os.MkdirTemp(workDir, pod.Name+"-")
	if err != nil {
		return fail(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	pr := &podRun{}
	pr.user(pod, c)
	env, err := resolveEnv(ctx, cluster.Client, pod, c)
	if err != nil {
		return fail(err)
	}
	sa := &corev1.ServiceAccount{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}, sa); err != nil {
		return fail(fmt.Errorf("ServiceAccount of hook pod %s: %w", pod.Name, err))
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(ctx, sa, kubeconfig); err != nil {
		return fail(err)
	}
	if err := pr.own(dir); err != nil {
		return fail(err)
	}
	cmd := exec.CommandContext(ctx, tools.kubectl, c.Args...)
	// HOME=/tmp of the spec is the container's emptyDir at /tmp: a directory of its own here.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "KUBECONFIG=" + kubeconfig}
	for _, e := range env {
		if e.Name == "HOME" && e.Value == "/tmp" {
			e.Value = dir
		}
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: pr.credential()}
	err = cmd.Run()
	run.output = output.String()
	var exit *exec.ExitError
	switch {
	case err == nil:
		run.exitCode = 0
	case errors.As(err, &exit):
		run.exitCode = exit.ExitCode()
	default:
		return fail(fmt.Errorf("run the hook's kubectl: %w", err))
	}
	if err := reportExit(ctx, pod, run.exitCode); err != nil {
		run.output += "\n" + err.Error()
	}
	return run
}

// reportExit writes the container's exit into the pod's status, as the kubelet does.
func reportExit(ctx context.Context, pod *corev1.Pod, code int) error {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	reason := "Completed"
	if code != 0 {
		pod.Status.Phase, reason = corev1.PodFailed, "Error"
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, StartedAt: now, FinishedAt: now}}}}
	if err := cluster.Client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("report the exit of hook pod %s: %w", pod.Name, err)
	}
	return nil
}
