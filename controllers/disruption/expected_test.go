package disruption

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// TestEmptyNodeKeptForPodsStillComing: an empty node of a NodePool that removes empty nodes at
// once, and a ReplicaSet that wants 5 pods of which one exists (pending, kube-controller-manager is
// still creating the others). With PlanForExpectedPods the pass places the 4 missing pods on the
// empty node and leaves it alone, saying why; without the gate, or once the ReplicaSet wants no
// more pods than exist, the empty node is removed.
func TestEmptyNodeKeptForPodsStillComing(t *testing.T) {
	tests := []struct {
		name     string
		gate     bool
		replicas int32
		wantKept bool
	}{
		{name: "pods still coming keep the empty node", gate: true, replicas: 5, wantKept: true},
		{name: "without the gate the empty node goes", gate: false, replicas: 5},
		{name: "scaled down to the pods there are: the empty node goes", gate: true, replicas: 1},
	}
	it := fake.NewInstanceType(fake.InstanceTypeOptions{Name: "fake-4cpu",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Offerings: cloudprovider.Offerings{cloudprovider.NewOffering(fake.Zone1, karpv1.CapacityTypeOnDemand, 0.15, true)}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(func() { env.Wipe(t) })
			pool := createDriftPool(t)
			makeEmptyConsolidatable(t, pool)
			createDriftedNode(t, pool, "empty", it)
			undrift(t, "claim-empty")
			untaint(t, "empty")
			createArrivingReplicaSet(t, env.Namespace(t), tt.replicas)

			recorder := events.NewFakeRecorder(1000)
			c, err := NewController(env.Client, env.Client, fake.New(it), clocktesting.NewFakeClock(time.Now()), recorder, testr.New(t), nil,
				Options{ValidationDelay: -1, PlanForExpectedPods: tt.gate, Planner: planner.Options{Cooldown: -1}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.pass(t.Context())
			if err != nil {
				t.Fatalf("pass: %v", err)
			}
			if kept := res != passStarted; kept != tt.wantKept {
				t.Fatalf("pass %v: empty node kept %t, want %t", res, kept, tt.wantKept)
			}
			if tt.wantKept && !hasEvent(recorder, `Node "empty" has room for pods still to be created`) {
				t.Errorf("no Unconsolidatable event saying the node keeps room for the pods still coming")
			}
		})
	}
}

// makeEmptyConsolidatable makes the NodePool remove empty nodes at once.
func makeEmptyConsolidatable(t *testing.T, name string) {
	t.Helper()
	patch(t, &karpv1.NodePool{}, name, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(0)
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	})
}

// undrift clears the NodeClaim's Drifted condition and marks it Consolidatable.
func undrift(t *testing.T, name string) {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	stored := nc.DeepCopy()
	now := time.Now()
	nc.SetCondition(now, karpv1.ConditionTypeDrifted, metav1.ConditionFalse, "NotDrifted", "")
	nc.SetCondition(now, karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, karpv1.ConditionTypeConsolidatable, "")
	if err := env.Client.Status().Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
		t.Fatalf("set the conditions of NodeClaim %s: %v", name, err)
	}
}

// untaint removes the taints the apiserver put on the new Node (node.kubernetes.io/not-ready), as
// kube-controller-manager does once it is Ready.
func untaint(t *testing.T, name string) {
	t.Helper()
	patch(t, &corev1.Node{}, name, func(n *corev1.Node) { n.Spec.Taints = nil })
}

// patch reads the cluster-scoped object name into obj, changes it with mutate and patches it.
func patch[T client.Object](t *testing.T, obj T, name string, mutate func(T)) {
	t.Helper()
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	stored := obj.DeepCopyObject().(client.Object)
	mutate(obj)
	if err := env.Client.Patch(t.Context(), obj, client.MergeFrom(stored)); err != nil {
		t.Fatalf("patch %T %s: %v", obj, name, err)
	}
}

// createArrivingReplicaSet creates a ReplicaSet of replicas 500m pods and its first pod, pending:
// the test bed runs no kube-controller-manager, so the others stay to come.
func createArrivingReplicaSet(t *testing.T, ns string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": "coming"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "coming", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}},
	}
	if err := env.Client.Create(t.Context(), rs); err != nil {
		t.Fatalf("create ReplicaSet: %v", err)
	}
	pod := nct.Pod(ns, "coming-0", "", labels)
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	if err := env.Client.Create(t.Context(), pod); err != nil {
		t.Fatalf("create the ReplicaSet's first pod: %v", err)
	}
}

// hasEvent reports whether the recorder holds an event whose text contains text.
func hasEvent(r *events.FakeRecorder, text string) bool {
	for {
		select {
		case e := <-r.Events:
			if strings.Contains(e, text) {
				return true
			}
		default:
			return false
		}
	}
}
