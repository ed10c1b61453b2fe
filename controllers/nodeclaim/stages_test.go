package nodeclaim

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func readyNode(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		},
	}
}

func TestNotInitialized(t *testing.T) {
	agent := karpv1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.ResourceName("example.com/gpu")
	cases := []struct {
		name       string
		nc         func(*karpv1.NodeClaim)
		node       func(*corev1.Node)
		wantReason string
	}{
		{name: "ready node without taints", wantReason: ""},
		{name: "node not ready", node: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, wantReason: ReasonNodeNotReady},
		{name: "node without a ready condition", node: func(n *corev1.Node) { n.Status.Conditions = nil }, wantReason: ReasonNodeNotReady},
		{
			name: "startup taint still there", nc: func(nc *karpv1.NodeClaim) { nc.Spec.StartupTaints = []karpv1.Taint{agent} },
			node: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{agent.ToCore()} }, wantReason: ReasonStartupTaintsExist,
		},
		{
			name: "startup taint with another effect does not count", nc: func(nc *karpv1.NodeClaim) { nc.Spec.StartupTaints = []karpv1.Taint{agent} },
			node: func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: agent.Key, Effect: corev1.TaintEffectNoExecute}}
			}, wantReason: "",
		},
		{
			name: "not-ready taint still there", node: func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
			}, wantReason: ReasonKnownEphemeralTaintsExist,
		},
		{
			name: "unregistered taint still there", node: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{karpv1.UnregisteredNoExecuteTaint()} },
			wantReason: ReasonKnownEphemeralTaintsExist,
		},
		{
			name: "requested extended resource missing", nc: func(nc *karpv1.NodeClaim) {
				nc.Spec.Resources.Requests = corev1.ResourceList{gpu: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}
			}, wantReason: ReasonResourceNotRegistered,
		},
		{
			name: "requested extended resource registered as zero", nc: func(nc *karpv1.NodeClaim) {
				nc.Spec.Resources.Requests = corev1.ResourceList{gpu: resource.MustParse("1")}
			}, node: func(n *corev1.Node) { n.Status.Allocatable[gpu] = resource.MustParse("0") }, wantReason: ReasonResourceNotRegistered,
		},
		{
			name: "requested extended resource registered", nc: func(nc *karpv1.NodeClaim) {
				nc.Spec.Resources.Requests = corev1.ResourceList{gpu: resource.MustParse("1")}
			}, node: func(n *corev1.Node) { n.Status.Allocatable[gpu] = resource.MustParse("2") }, wantReason: "",
		},
		{
			name: "native resources are not waited for", nc: func(nc *karpv1.NodeClaim) {
				nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
			}, wantReason: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{}
			node := readyNode()
			if tc.nc != nil {
				tc.nc(nc)
			}
			if tc.node != nil {
				tc.node(node)
			}
			reason, message := notInitialized(nc, node)
			if reason != tc.wantReason {
				t.Fatalf("reason %q (%s), want %q", reason, message, tc.wantReason)
			}
			if reason != "" && message == "" {
				t.Fatal("a reason without a message")
			}
		})
	}
}

func TestIsExtendedResource(t *testing.T) {
	cases := map[corev1.ResourceName]bool{
		corev1.ResourceCPU:              false,
		corev1.ResourceMemory:           false,
		corev1.ResourceEphemeralStorage: false,
		"hugepages-2Mi":                 false,
		"kubernetes.io/something":       false,
		"node.kubernetes.io/something":  false,
		"requests.example.com/gpu":      false,
		"nvidia.com/gpu":                true,
		"example.com/widget":            true,
	}
	for name, want := range cases {
		if got := isExtendedResource(name); got != want {
			t.Errorf("isExtendedResource(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestSyncNode(t *testing.T) {
	dedicated := karpv1.Taint{Key: "example.com/dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}
	agent := karpv1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoExecute}
	cases := []struct {
		name       string
		nodeLabels map[string]string
		nodeTaints []corev1.Taint
		wantTaints []string
	}{
		{
			name:       "taints and startup taints are added, the unregistered taint goes",
			nodeTaints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint()},
			wantTaints: []string{dedicated.String(), agent.String()},
		},
		{
			name:       "taints already present are not duplicated",
			nodeTaints: []corev1.Taint{dedicated.ToCore(), karpv1.UnregisteredNoExecuteTaint()},
			wantTaints: []string{dedicated.String(), agent.String()},
		},
		{
			name:       "do-not-sync-taints keeps the node's taints",
			nodeLabels: map[string]string{karpv1.DoNotSyncTaintsLabelKey: "true"},
			nodeTaints: []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}, karpv1.UnregisteredNoExecuteTaint()},
			wantTaints: []string{"other:NoSchedule"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "nc", UID: "uid-1",
					Labels:      map[string]string{karpv1.NodePoolLabelKey: "pool", karpv1.LabelInstanceType: "m5.large"},
					Annotations: map[string]string{"a": "b", corev1.LastAppliedConfigAnnotation: "{}"}},
				Spec: karpv1.NodeClaimSpec{Taints: []karpv1.Taint{dedicated}, StartupTaints: []karpv1.Taint{agent}},
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.nodeLabels}, Spec: corev1.NodeSpec{Taints: tc.nodeTaints}}
			syncNode(nc, node)
			syncNode(nc, node) // idempotent
			var got []string
			for _, tt := range node.Spec.Taints {
				got = append(got, tt.ToString())
			}
			if !slices.Equal(got, tc.wantTaints) {
				t.Errorf("taints %v, want %v", got, tc.wantTaints)
			}
			if node.Labels[karpv1.NodePoolLabelKey] != "pool" || node.Labels[karpv1.LabelInstanceType] != "m5.large" || node.Labels[karpv1.NodeRegisteredLabelKey] != "true" {
				t.Errorf("labels %v", node.Labels)
			}
			if node.Annotations["a"] != "b" || node.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
				t.Errorf("annotations %v", node.Annotations)
			}
			if len(node.OwnerReferences) != 1 || node.OwnerReferences[0].UID != "uid-1" || !*node.OwnerReferences[0].BlockOwnerDeletion {
				t.Errorf("owner references %v", node.OwnerReferences)
			}
			if !slices.Equal(node.Finalizers, []string{karpv1.TerminationFinalizer}) {
				t.Errorf("finalizers %v", node.Finalizers)
			}
		})
	}
}

func TestSetReady(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name                           string
		launched, registered, initized metav1.ConditionStatus
		want                           metav1.ConditionStatus
		wantReason                     string
	}{
		{"all true", metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, "Ready"},
		{"waiting for registration", metav1.ConditionTrue, metav1.ConditionUnknown, metav1.ConditionUnknown, metav1.ConditionUnknown, "NotRegistered"},
		{"launch failed", metav1.ConditionFalse, metav1.ConditionUnknown, metav1.ConditionUnknown, metav1.ConditionFalse, "NotLaunched"},
		{"a later failure wins over an earlier unknown", metav1.ConditionTrue, metav1.ConditionUnknown, metav1.ConditionFalse, metav1.ConditionFalse, "NotInitialized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{}
			nc.SetCondition(now, karpv1.ConditionTypeLaunched, tc.launched, "r", "m")
			nc.SetCondition(now, karpv1.ConditionTypeRegistered, tc.registered, "r", "m")
			nc.SetCondition(now, karpv1.ConditionTypeInitialized, tc.initized, "r", "m")
			setReady(nc, now)
			c := nc.StatusCondition(karpv1.ConditionTypeReady)
			if c.Status != tc.want || c.Reason != tc.wantReason {
				t.Errorf("Ready %s/%s, want %s/%s", c.Status, c.Reason, tc.want, tc.wantReason)
			}
		})
	}
}

func TestLaunchCacheKeepsLaunchesPerNodeClaimUID(t *testing.T) {
	c := newLaunchCache()
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", UID: "one"}}
	created := &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: "fake:///1"}}
	c.put(nc, created)
	if got, ok := c.get(nc); !ok || got.Status.ProviderID != "fake:///1" {
		t.Fatalf("get = %v, %v", got, ok)
	}
	other := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", UID: "two"}}
	if _, ok := c.get(other); ok {
		t.Fatal("a NodeClaim with another UID sees the launch")
	}
	if _, ok := c.take("nc", types.UID("one")); ok {
		t.Fatal("take gave away the launch of the NodeClaim it was told to keep")
	}
	if e, ok := c.take("nc", types.UID("two")); !ok || e.uid != "one" {
		t.Fatalf("take for a newer NodeClaim = %v, %v", e, ok)
	}
	if _, ok := c.get(nc); ok {
		t.Fatal("taken launch still cached")
	}
}

func TestEarliest(t *testing.T) {
	cases := []struct{ a, b, want time.Duration }{
		{0, 0, 0}, {0, time.Second, time.Second}, {time.Second, 0, time.Second}, {2 * time.Second, time.Second, time.Second},
	}
	for _, tc := range cases {
		got := earliest(reconcile.Result{RequeueAfter: tc.a}, reconcile.Result{RequeueAfter: tc.b})
		if got.RequeueAfter != tc.want {
			t.Errorf("earliest(%s, %s) = %s, want %s", tc.a, tc.b, got.RequeueAfter, tc.want)
		}
	}
}
