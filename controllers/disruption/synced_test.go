package disruption

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

func TestUnseen(t *testing.T) {
	claims := func(names ...string) []karpv1.NodeClaim {
		var out []karpv1.NodeClaim
		for _, n := range names {
			out = append(out, karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out
	}
	tests := []struct {
		name   string
		queue  map[string]*queued
		claims []karpv1.NodeClaim
		want   []string
	}{
		{"no command", nil, claims("a"), nil},
		{"a delete has no replacement", map[string]*queued{"empty-1": {candidates: []string{"a"}}}, claims("a"), nil},
		{"replacement seen", map[string]*queued{"drifted-1": {candidates: []string{"a"}, replacements: []string{"r1"}}}, claims("a", "r1"), nil},
		{"replacement not seen yet", map[string]*queued{"drifted-1": {candidates: []string{"a"}, replacements: []string{"r1"}}}, claims("a"), []string{"r1"}},
		{"only the unseen ones, sorted, across commands", map[string]*queued{
			"underutilized-1": {candidates: []string{"a", "b"}, replacements: []string{"r3", "r1"}},
			"drifted-2":       {candidates: []string{"c"}, replacements: []string{"r2"}},
		}, claims("a", "b", "c", "r1"), []string{"r2", "r3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unseen(tt.queue, tt.claims); !slices.Equal(got, tt.want) {
				t.Errorf("unseen = %v, want %v", got, tt.want)
			}
		})
	}
}

// lagging is a client whose NodeClaim lists miss the NodeClaims created through it until catchUp,
// as an informer cache that has not yet seen the controller's own writes (a few milliseconds
// normally, more on a loaded machine).
type lagging struct {
	client.Client
	mu     sync.Mutex
	hidden map[string]bool
}

func (l *lagging) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := l.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if _, ok := obj.(*karpv1.NodeClaim); ok {
		l.mu.Lock()
		l.hidden[obj.GetName()] = true
		l.mu.Unlock()
	}
	return nil
}

func (l *lagging) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if ncs, ok := list.(*karpv1.NodeClaimList); ok {
		l.mu.Lock()
		ncs.Items = slices.DeleteFunc(ncs.Items, func(nc karpv1.NodeClaim) bool { return l.hidden[nc.Name] })
		l.mu.Unlock()
	}
	return nil
}

// catchUp makes the NodeClaims created so far visible.
func (l *lagging) catchUp() {
	l.mu.Lock()
	l.hidden = map[string]bool{}
	l.mu.Unlock()
}

// TestPassWaitsForItsReplacementsInTheCache is the drift that launched three nodes for two pods:
// two drifted nodes each hold one 3-CPU pod that avoids the other. The first pass replaces one
// node; the next pass ran at once, from a cache that did not show that replacement yet, so the
// held node's pod looked homeless again and the second node's command launched two nodes, one
// of which stayed empty for good in a NodePool without consolidation. Now a pass plans nothing
// until the cache shows the replacements this process created, and then launches one node.
func TestPassWaitsForItsReplacementsInTheCache(t *testing.T) {
	ctx := t.Context()
	t.Cleanup(func() { env.Wipe(t) })
	it := fake.NewInstanceType(fake.InstanceTypeOptions{Name: "fake-4cpu",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Offerings: cloudprovider.Offerings{cloudprovider.NewOffering(fake.Zone1, karpv1.CapacityTypeOnDemand, 0.15, true)}})
	pool := createDriftPool(t)
	ns := env.Namespace(t)
	for _, name := range []string{"node-a", "node-b"} {
		createDriftedNode(t, pool, name, it)
		createAntiAffinePod(t, ns, name)
	}
	kube := &lagging{Client: env.Client, hidden: map[string]bool{}}
	c, err := NewController(kube, env.Client, fake.New(it), clocktesting.NewFakeClock(time.Now()), events.NewFakeRecorder(1000), testr.New(t), nil,
		Options{ValidationDelay: -1, Planner: planner.Options{Cooldown: -1}})
	if err != nil {
		t.Fatal(err)
	}

	if res, err := c.pass(ctx); err != nil || res != passStarted {
		t.Fatalf("first pass: %v, %v; want the first drifted node replaced", res, err)
	}
	if got := replacements(t); len(got) != 1 {
		t.Fatalf("after the first pass: %d replacements (%v), want 1", len(got), got)
	}
	// The cache has not seen that replacement: a pass must neither plan nor launch.
	var results []passResult
	for range 3 {
		res, err := c.pass(ctx)
		if err != nil {
			t.Fatalf("pass before the cache shows the replacement: %v", err)
		}
		results = append(results, res)
	}
	if got := replacements(t); len(got) != 1 {
		t.Fatalf("a pass planned from a cache without the first replacement: %d replacements (%v), want still 1", len(got), got)
	}
	if want := []passResult{passUnsynced, passUnsynced, passUnsynced}; !slices.Equal(results, want) {
		t.Fatalf("passes before the cache shows the replacement returned %v, want %v (wait for the cache)", results, want)
	}
	kube.catchUp()
	res, err := c.pass(ctx)
	if err != nil || res == passUnsynced {
		t.Fatalf("pass once the cache caught up: %v, %v; want it to plan", res, err)
	}
	// One pod is left to move: at most one more node, never one for the held node's pod again.
	if got := replacements(t); len(got) > 2 {
		t.Fatalf("%d replacements for two pods (%v): the held node's pod got a second node", len(got), got)
	}
}

// replacements lists the names of the NodeClaims a disruption command launched.
func replacements(t *testing.T) []string {
	t.Helper()
	var ncs karpv1.NodeClaimList
	if err := env.Client.List(t.Context(), &ncs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, nc := range ncs.Items {
		if nc.Annotations[planner.ReplacementForAnnotationKey] != "" {
			out = append(out, nc.Name)
		}
	}
	return out
}

// createDriftPool creates a NodePool with consolidation off and a 100 % budget: only drift
// replaces its nodes, and nothing removes a node it launched in excess.
func createDriftPool(t *testing.T) string {
	t.Helper()
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: nct.Name("drift")},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}},
				NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"},
			}},
			Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.NeverDuration(), Budgets: []karpv1.Budget{{Nodes: "100%"}}},
		},
	}
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatalf("create NodePool: %v", err)
	}
	return np.Name
}

// createDriftedNode creates a Ready Node of the instance type in zone 1 and its NodeClaim, launched,
// registered, initialized and Drifted.
func createDriftedNode(t *testing.T, pool, name string, it *cloudprovider.InstanceType) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{
		karpv1.NodePoolLabelKey: pool, karpv1.LabelInstanceType: it.Name, karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand,
		karpv1.LabelTopologyZone: fake.Zone1, karpv1.LabelArch: karpv1.ArchitectureAmd64, karpv1.LabelOS: karpv1.OSLinux, corev1.LabelHostname: name,
	}
	providerID := "fake:///" + fake.Zone1 + "/" + name
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatalf("create Node %s: %v", name, err)
	}
	node.Status = corev1.NodeStatus{
		Capacity: it.Capacity, Allocatable: it.Allocatable(),
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatalf("make Node %s Ready: %v", name, err)
	}
	nc := nct.NodeClaim("claim-"+name, pool)
	for k, v := range labels {
		if k != corev1.LabelHostname {
			nc.Labels[k] = v
		}
	}
	if err := env.Client.Create(ctx, nc); err != nil {
		t.Fatalf("create NodeClaim of %s: %v", name, err)
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID, nc.Status.NodeName = providerID, name
	nc.Status.Capacity, nc.Status.Allocatable = it.Capacity, it.Allocatable()
	now := time.Now()
	for _, cond := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		nc.SetCondition(now, cond, metav1.ConditionTrue, cond, "")
	}
	nc.SetCondition(now, karpv1.ConditionTypeDrifted, metav1.ConditionTrue, "NodePoolDrifted", "NodePoolDrifted")
	if err := env.Client.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		t.Fatalf("set the status of NodeClaim %s: %v", nc.Name, err)
	}
}

// createAntiAffinePod creates a Running 3-CPU pod bound to the node that refuses a node holding
// another such pod.
func createAntiAffinePod(t *testing.T, ns, node string) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	pod := nct.Pod(ns, "web-"+node, node, labels)
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
	}}
	if err := env.Client.Create(t.Context(), pod); err != nil {
		t.Fatalf("create pod on %s: %v", node, err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(t.Context(), pod); err != nil {
		t.Fatalf("mark pod on %s Running: %v", node, err)
	}
}
