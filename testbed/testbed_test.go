package testbed_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/testbed"
)

// TestFullClusterRunsAPod checks the whole test bed: the scheduler binds a pod to a kwok Node,
// the controller-manager lifts the not-ready taint, and kwok makes the pod Running.
func TestFullClusterRunsAPod(t *testing.T) {
	env := testbed.StartForTest(t, testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "kwok-node-0",
			Annotations: map[string]string{testbed.KwokNodeAnnotation: testbed.KwokNodeAnnotationValue},
			Labels:      map[string]string{"kubernetes.io/hostname": "kwok-node-0", "type": "kwok"},
		},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	// The default ServiceAccount is made by the controller-manager; wait for it before creating a pod.
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("default service account never appeared: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"type": "kwok"},
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return p.Spec.NodeName == "kwok-node-0" && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod never ran on the kwok node (last seen: node %q phase %q; logs in %s): %v",
			last.Spec.NodeName, last.Status.Phase, env.LogDir, err)
	}
}

func TestStartReportsATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = testbed.Start(context.Background(), testbed.Options{APIServerPort: port})
	if !errors.Is(err, testbed.ErrPortInUse) {
		t.Fatalf("Start on a taken port: got %v, want ErrPortInUse", err)
	}
	if !strings.Contains(err.Error(), "choose another port") {
		t.Errorf("error %q does not say how to fix it", err)
	}
}

func TestStartReportsMissingBinaries(t *testing.T) {
	dir := t.TempDir()
	_, err := testbed.Start(context.Background(), testbed.Options{AssetsDir: dir})
	if err == nil || !strings.Contains(err.Error(), "make testbed") {
		t.Fatalf("Start with no binaries: got %v, want an error that says to run make testbed", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Start wrote into the assets directory: %v", entries)
	}
}

// TestAPIServerProcessPausesTheAPIServer stops the Env's kube-apiserver with SIGSTOP: a request
// then gets no answer; after SIGCONT the same request is answered again, with the state intact.
func TestAPIServerProcessPausesTheAPIServer(t *testing.T) {
	env := testbed.StartForTest(t, testbed.Options{})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "before-the-pause"}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	proc, err := env.APIServerProcess()
	if err != nil {
		t.Fatal(err)
	}
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return err
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP kube-apiserver: %v", err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = proc.Signal(syscall.SIGCONT)
		}
	}()
	if err := get(time.Second); err == nil {
		t.Fatal("the paused kube-apiserver answered; APIServerProcess returned another process")
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT kube-apiserver: %v", err)
	}
	resumed = true
	if err := get(10 * time.Second); err != nil {
		t.Fatalf("kube-apiserver did not answer after SIGCONT: %v", err)
	}
}
