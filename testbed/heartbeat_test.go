package testbed_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/joiner-dev/joiner/testbed"
)

// kwokVersion returns the kwok version hack/testbed/build.sh builds (its KWOK_VERSION default).
func kwokVersion(t *testing.T) string {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "hack", "testbed", "build.sh"))
	if err != nil {
		t.Fatalf("read the test bed's build script: %v", err)
	}
	m := regexp.MustCompile(`KWOK_VERSION="\$\{KWOK_VERSION:-(v[0-9][^}]*)\}"`).FindSubmatch(script)
	if m == nil {
		t.Fatal("hack/testbed/build.sh sets no KWOK_VERSION default")
	}
	return string(m[1])
}

// TestKwokStagesAreTheReleasedOnes checks the kwok-stages.yaml the test bed starts kwok with: it
// names exactly testbed.KwokStages in its first line, and holds each of them as kwok's release
// ships it (read from kwok's module in the Go module cache, which `make testbed` downloads), so
// that no stage can go missing without a failure.
func TestKwokStagesAreTheReleasedOnes(t *testing.T) {
	assets, err := testbed.FindAssets("")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(assets, "kwok-stages.yaml"))
	if err != nil {
		t.Fatalf("read the test bed's kwok stages (run `make testbed`): %v", err)
	}
	version := kwokVersion(t)
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	stageDir := filepath.Join(strings.TrimSpace(string(out)), "sigs.k8s.io", "kwok@"+version, "kustomize", "stage")
	if _, err := os.Stat(stageDir); err != nil {
		t.Fatalf("kwok %s's stages are not in the module cache (`make testbed` downloads them): %v", version, err)
	}
	want := bytes.NewBufferString(fmt.Sprintf("# kwok %s stages: %s\n", version, strings.Join(testbed.KwokStages, " ")))
	for _, stage := range testbed.KwokStages {
		released, err := os.ReadFile(filepath.Join(stageDir, stage))
		if err != nil {
			t.Errorf("kwok %s ships no stage %s: %v", version, stage, err)
			continue
		}
		want.WriteString("---\n")
		want.Write(released)
	}
	if !bytes.Equal(got, want.Bytes()) {
		first, _, _ := bytes.Cut(got, []byte("\n"))
		t.Errorf("%s/kwok-stages.yaml is not kwok %s's stages %v in that order (its first line: %q); rebuild it with `make testbed`",
			assets, version, testbed.KwokStages, first)
	}
}

// TestKwokNodesStayReady runs a kwok Node for 2.5 node-monitor grace periods past its first
// Lease and checks, every 2 s, that it stays Ready and that kwok keeps its Lease fresh (renewed
// within the grace period, and renewed again and again). A control Node that nobody renews, made
// Ready at the same time, must go Unknown in the same window, which shows that
// kube-controller-manager was watching.
func TestKwokNodesStayReady(t *testing.T) {
	t.Parallel()
	env := testbed.StartForTest(t, testbed.Options{ControllerManager: true, Kwok: true})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	kwokNode := newNode("kwok-heartbeat", map[string]string{testbed.KwokNodeAnnotation: testbed.KwokNodeAnnotationValue})
	control := newNode("no-heartbeat", nil)
	for _, n := range []*corev1.Node{kwokNode, control} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
	}
	// The control Node reports Ready once, as a kubelet that then dies.
	control.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, control, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("make the control node Ready: %v", err)
	}
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, kwokNode.Name, metav1.GetOptions{})
		return err == nil && ready(n) == corev1.ConditionTrue, nil
	}); err != nil {
		t.Fatalf("kwok never made node %s Ready (logs in %s): %v", kwokNode.Name, env.LogDir, err)
	}

	window := testbed.NodeMonitorGracePeriod * 5 / 2
	end := time.Now().Add(window)
	renewals := map[time.Time]bool{}
	controlWentUnknown := false
	for time.Now().Before(end) {
		n, err := cs.CoreV1().Nodes().Get(ctx, kwokNode.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node: %v", err)
		}
		if s := ready(n); s != corev1.ConditionTrue {
			t.Fatalf("kwok node went Ready=%s after %s (logs in %s)", s, time.Since(n.CreationTimestamp.Time).Round(time.Second), env.LogDir)
		}
		lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, kwokNode.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("kwok node has no Lease in %s: %v", corev1.NamespaceNodeLease, err)
		}
		if age := leaseAge(lease); age > testbed.NodeMonitorGracePeriod {
			t.Fatalf("the kwok node's Lease was last renewed %s ago, longer than the grace period %s", age.Round(time.Second), testbed.NodeMonitorGracePeriod)
		}
		renewals[lease.Spec.RenewTime.Time] = true
		c, err := cs.CoreV1().Nodes().Get(ctx, control.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get control node: %v", err)
		}
		controlWentUnknown = controlWentUnknown || ready(c) == corev1.ConditionUnknown
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
	if !controlWentUnknown {
		t.Errorf("the control node without heartbeats never went Unknown in %s: kube-controller-manager did not watch, so the kwok node's result proves nothing", window)
	}
	// kwok renews every quarter of the Lease duration; over the window that is several renewals.
	if minimum := int(window / (time.Duration(testbed.KwokNodeLeaseSeconds) * time.Second)); len(renewals) < minimum {
		t.Errorf("saw %d distinct Lease renewals in %s, want at least %d", len(renewals), window, minimum)
	}
}

func newNode(name string, annotations map[string]string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{corev1.LabelHostname: name}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
}

// ready returns the status of the Node's Ready condition ("" without one).
func ready(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// leaseAge is how long ago the Lease was renewed (forever when never).
func leaseAge(l *coordinationv1.Lease) time.Duration {
	if l.Spec.RenewTime == nil {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(l.Spec.RenewTime.Time)
}
