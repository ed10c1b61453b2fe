package headroom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// registrationDelay is how long a launched instance of the local provider takes to register its
// Node: a realistic, non-zero launch time, so that starting on free room is measurably faster.
const registrationDelay = 10 * time.Second

// nodeClassName is the LocalNodeClass of this package's NodePools.
const nodeClassName = "headroom"

// pool creates a NodePool of 4-vCPU on-demand nodes on the headroom node class, consolidating
// empty and underused nodes at once with no budget limit.
func pool(t *testing.T, name string) {
	t.Helper()
	class := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: nodeClassName},
		Spec: joinerv1alpha1.LocalNodeClassSpec{Region: "us-east-1", NodeRegistrationDelay: &metav1.Duration{Duration: registrationDelay}}}
	if err := cluster.Client.Create(context.Background(), class); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create LocalNodeClass: %v", err)
	}
	cluster.NodePool(t, name, framework.OnDemandC("4"), func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef.Name = nodeClassName
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(0)
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	})
}

// timeToRunning scales the Deployment app to one replica and returns how long it took until its
// pod was Running, with the pod.
func timeToRunning(t *testing.T, app string) (time.Duration, corev1.Pod) {
	t.Helper()
	start := time.Now()
	cluster.Scale(t, app, 1)
	pods := cluster.WaitRunning(t, app, 1, 2*time.Minute)
	return time.Since(start), pods[0]
}

// buffer creates a CapacityBuffer of units shaped like the Deployment app, deleted when the test
// ends.
func buffer(t *testing.T, name, app string, replicas int32) *autoscalingv1beta1.CapacityBuffer {
	t.Helper()
	cb := &autoscalingv1beta1.CapacityBuffer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: autoscalingv1beta1.CapacityBufferSpec{
			ScalableRef: &autoscalingv1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: app},
			Replicas:    ptr.To(replicas),
		},
	}
	if err := cluster.Client.Create(context.Background(), cb); err != nil {
		t.Fatalf("create CapacityBuffer: %v", err)
	}
	t.Cleanup(func() {
		if err := cluster.Client.Delete(context.Background(), cb); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CapacityBuffer: %v", err)
		}
	})
	return cb
}

// readyNodes returns the Nodes of the live, Initialized NodeClaims of the NodePool.
func readyNodes(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, nc := range framework.Live(cluster.NodeClaims(t, name)) {
		if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) && nc.Status.NodeName != "" {
			out = append(out, nc.Status.NodeName)
		}
	}
	return out
}

// TestBufferedPodStartsFaster measures, on two NodePools alike, the time from scaling a
// Deployment to one replica to its pod Running: without a buffer (a NodeClaim is launched and
// registers after registrationDelay) and with a CapacityBuffer of one unit of the same shape
// (the pod starts on the room the buffer kept free). Along the way it checks that the buffer's
// empty node survives consolidation, that the pod lands on it without a new NodeClaim for the
// pod, and that the buffer refills with another NodeClaim afterwards.
func TestBufferedPodStartsFaster(t *testing.T) {
	// Without a buffer.
	pool(t, "cold")
	cluster.Deployment(t, "cold-app", "cold", 0, "3", nil)
	cold, _ := timeToRunning(t, "cold-app")
	t.Logf("without a buffer: pod Running %s after the scale-up (registration delay %s)", cold.Round(time.Millisecond), registrationDelay)

	// With a buffer of one unit: one node's worth of room (3 of 4 vCPU).
	pool(t, "warm")
	cluster.Deployment(t, "warm-app", "warm", 0, "3", nil)
	cb := buffer(t, "warm", "warm-app", 1)
	var room []string
	framework.Eventually(t, 2*time.Minute, "the buffer's room: one Initialized NodeClaim of warm", func(ctx context.Context) (bool, error) {
		room = readyNodes(t, "warm")
		return len(room) == 1, nil
	})
	framework.Eventually(t, time.Minute, "the buffer's units reported as fitting existing capacity", func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ConditionTypeProvisioning)
		return ptr.Deref(cb.Status.Replicas, 0) == 1 && c != nil && c.Reason == autoscalingv1beta1.ReasonFitsExistingCapacity, nil
	})
	// Consolidation passes every second with no delay for empty nodes: the buffer's node stays,
	// and says why.
	if !cluster.HasEvent(t, room[0], "Unconsolidatable", `Node "`+room[0]+`" has buffer pods`) {
		t.Errorf("no Unconsolidatable event on the buffer's node %s", room[0])
	}
	framework.Hold(t, 8*time.Second, "the buffer's empty node is kept", func(ctx context.Context) string {
		if got := readyNodes(t, "warm"); len(got) != 1 || got[0] != room[0] {
			return "warm's nodes are " + strings.Join(got, ", ") + ", want only " + room[0]
		}
		return ""
	})

	warm, pod := timeToRunning(t, "warm-app")
	t.Logf("with a buffer: pod Running %s after the scale-up, on %s", warm.Round(time.Millisecond), pod.Spec.NodeName)
	if pod.Spec.NodeName != room[0] {
		t.Errorf("the pod runs on %s, want the buffer's node %s", pod.Spec.NodeName, room[0])
	}
	if warm >= cold || warm >= registrationDelay {
		t.Errorf("with a buffer the pod took %s, without %s: want it faster than a launch (%s)", warm, cold, registrationDelay)
	}

	// The buffer refills: a second node is launched for its unit, and the pod's own node stays.
	framework.Eventually(t, 2*time.Minute, "the buffer refilled: a second Initialized NodeClaim of warm", func(ctx context.Context) (bool, error) {
		return len(readyNodes(t, "warm")) == 2, nil
	})
	checkNoVirtualPodEvents(t)
}

// checkNoVirtualPodEvents fails when an Event names a buffer's virtual pod: they are never
// written to the apiserver, so nothing may refer to one.
func checkNoVirtualPodEvents(t *testing.T) {
	t.Helper()
	events := &corev1.EventList{}
	if err := cluster.Client.List(context.Background(), events); err != nil {
		t.Fatalf("list events: %v", err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.InvolvedObject.Name, "-buffer-") {
			t.Errorf("event %s %q names virtual pod %s", e.Reason, e.Message, e.InvolvedObject.Name)
		}
	}
}
