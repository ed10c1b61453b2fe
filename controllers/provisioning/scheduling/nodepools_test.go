package scheduling

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

func TestNodePoolOrder(t *testing.T) {
	arm := newNodePool("arm", poolRequirement(karpv1.LabelArch, corev1.NodeSelectorOpIn, karpv1.ArchitectureArm64))
	tests := []struct {
		name  string
		pools []NodePool
		pod   *corev1.Pod
		want  string
	}{
		{"higher weight first", []NodePool{pool(newNodePool("a")), pool(newNodePool("b", poolWeight(10)))}, newPod("p", "1", "1Gi"), "b"},
		{"equal weight: by name", []NodePool{pool(newNodePool("b")), pool(newNodePool("a"))}, newPod("p", "1", "1Gi"), "a"},
		{"higher weight even when dearer", []NodePool{pool(newNodePool("cheap-arm", poolWeight(1)), armType()), pool(newNodePool("amd", poolWeight(2)))},
			newPod("p", "1", "1Gi"), "amd"},
		{"incompatible higher weight is skipped", []NodePool{pool(arm, armType()), pool(newNodePool("amd"))},
			newPod("p", "1", "1Gi", withNodeSelector(karpv1.LabelArch, karpv1.ArchitectureAmd64)), "amd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: []*corev1.Pod{tt.pod}, NodePools: tt.pools})
			if got := planOf(t, r, "p").NodePool.Name; got != tt.want {
				t.Fatalf("NodePool %s, want %s", got, tt.want)
			}
		})
	}
}

func TestUnschedulableErrorNamesEveryNodePool(t *testing.T) {
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	pools := []NodePool{
		pool(newNodePool("arm", poolRequirement(karpv1.LabelArch, corev1.NodeSelectorOpIn, karpv1.ArchitectureArm64), poolWeight(30)), armType()),
		pool(newNodePool("gpu", poolTaints(gpu), poolWeight(20))),
		pool(newNodePool("small", poolWeight(10)), fakeTypes(2)...),
		pool(newNodePool("broken", poolRequirement(karpv1.LabelArch, "Near", "x"))),
	}
	p := newPod("p", "3", "1Gi", withNodeSelector(karpv1.LabelArch, karpv1.ArchitectureAmd64))
	r := solve(t, Input{Pods: []*corev1.Pod{p}, NodePools: pools, ExistingNodes: []*ExistingNode{existingNode("n1", fake.Zone1, newPod("big", "15", "1Gi"))}})
	var ue *UnschedulableError
	if len(r.PodErrors) != 1 || !errors.As(r.PodErrors[0].Err, &ue) {
		t.Fatalf("want an UnschedulableError, got %v", outcome(r))
	}
	want := []NodePoolRejection{
		{"arm", "incompatible requirement kubernetes.io/arch In [amd64] vs [arm64]"},
		{"gpu", "taint nvidia.com/gpu:NoSchedule not tolerated"},
		{"small", "no instance type has cpu 3, memory 1Gi, pods 1 allocatable for the pod and the DaemonSets that would run with it"},
		{"broken", `invalid spec.template.spec.requirements: requirement kubernetes.io/arch: unknown operator "Near" (use In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte)`},
	}
	if !slices.Equal(ue.NodePools, want) {
		t.Errorf("got  %q\nwant %q", ue.NodePools, want)
	}
	wantContains(t, ue.Error(), `pod default/p cannot be placed: NodePool "arm" ruled out: incompatible requirement kubernetes.io/arch In [amd64] vs [arm64]; NodePool "gpu" ruled out`,
		"no existing node fits (1 nodes: 1× not enough free resources)")
}

func TestLimits(t *testing.T) {
	limited := func(remaining corev1.ResourceList) NodePool {
		p := pool(newNodePool("default"))
		p.Remaining = remaining
		return p
	}
	tests := []struct {
		name      string
		pool      NodePool
		pods      []*corev1.Pod
		placed    int
		errorPart string
	}{
		{"within limits", limited(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}), replicas(2, "p", "1"), 2, ""},
		{"cpu limit stops the third pod", limited(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}),
			replicas(3, "p", "1", withPodAntiAffinity(term(karpv1.LabelHostname, "app", "x")), withLabels("app", "x")), 1, "its limits would be exceeded (cpu)"},
		{"node limit", limited(corev1.ResourceList{"nodes": resource.MustParse("2")}),
			replicas(3, "p", "100m", withPodAntiAffinity(term(karpv1.LabelHostname, "app", "x")), withLabels("app", "x")), 2, "its limits would be exceeded (nodes (0 left))"},
		{"memory limit counts capacity, not requests", limited(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}),
			replicas(1, "p", "1"), 0, "its limits would be exceeded (memory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, NodePools: []NodePool{tt.pool}})
			placed := 0
			for _, nc := range r.NewNodeClaims {
				placed += len(nc.Pods)
			}
			if placed != tt.placed {
				t.Fatalf("placed %d, want %d: %v", placed, tt.placed, outcome(r))
			}
			for _, pe := range r.PodErrors {
				wantContains(t, pe.Err.Error(), tt.errorPart)
			}
		})
	}
}

func TestLimitsNarrowInstanceTypeOptions(t *testing.T) {
	// 10 cpus left: the first NodeClaim may keep options up to the size that leaves the second
	// NodeClaim its cheapest option; together their largest options stay within 10 cpus.
	p := pool(newNodePool("default"))
	p.Remaining = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}
	pods := replicas(2, "p", "1", withPodAntiAffinity(term(karpv1.LabelHostname, "app", "x")), withLabels("app", "x"))
	r := solve(t, Input{Pods: pods, NodePools: []NodePool{p}})
	if len(r.NewNodeClaims) != 2 {
		t.Fatalf("%v", outcome(r))
	}
	total := int64(0)
	for _, nc := range r.NewNodeClaims {
		largest := int64(0)
		for _, it := range nc.InstanceTypeOptions {
			c := it.Capacity[corev1.ResourceCPU]
			largest = max(largest, c.Value())
		}
		total += largest
	}
	if total > 10 {
		t.Errorf("largest options add up to %d cpus, the limit leaves 10", total)
	}
}

func TestMinValues(t *testing.T) {
	minFamilies := func(n int) poolOption {
		return poolRequirements(karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(n)})
	}
	tests := []struct {
		name    string
		policy  MinValuesPolicy
		pod     *corev1.Pod
		wantErr string
		relaxed bool
	}{
		{"enough types", "", newPod("p", "1", "1Gi"), "", false},
		{"too big for three types under Strict", "", newPod("p", "14", "1Gi"), "minValues of node.kubernetes.io/instance-type is 3", false},
		{"BestEffort plans it anyway", MinValuesPolicyBestEffort, newPod("p", "14", "1Gi"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: []*corev1.Pod{tt.pod}, NodePools: []NodePool{pool(newNodePool("default", minFamilies(3)))},
				Options: Options{MinValuesPolicy: tt.policy, MaxInstanceTypes: 1}})
			if tt.wantErr != "" {
				wantContains(t, errorOf(r, "p"), tt.wantErr)
				return
			}
			nc := planOf(t, r, "p")
			if nc.MinValuesRelaxed != tt.relaxed {
				t.Errorf("MinValuesRelaxed = %v", nc.MinValuesRelaxed)
			}
			if !tt.relaxed && len(nc.InstanceTypeOptions) != 3 {
				// MaxInstanceTypes 1 is extended to meet minValues 3.
				t.Errorf("%d options %v, want 3", len(nc.InstanceTypeOptions), nc.InstanceTypeNames())
			}
			if tt.relaxed && nc.NodeClaim().Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey] != "true" {
				t.Errorf("relaxed NodeClaim lacks the annotation")
			}
		})
	}
}

func TestMaxInstanceTypes(t *testing.T) {
	tests := []struct {
		max, want int
	}{{0, DefaultMaxInstanceTypes}, {5, 5}, {1000, 99}}
	for _, tt := range tests {
		r := solve(t, Input{Pods: []*corev1.Pod{newPod("p", "1", "1Gi")}, NodePools: []NodePool{pool(newNodePool("default"), fakeTypes(100)...)},
			Options: Options{MaxInstanceTypes: tt.max}})
		nc := planOf(t, r, "p")
		if len(nc.InstanceTypeOptions) != tt.want {
			t.Errorf("max %d: %d options, want %d", tt.max, len(nc.InstanceTypeOptions), tt.want)
		}
		names := nc.InstanceTypeNames()
		if names[0] != "fake-it-1" || !slices.IsSortedFunc(nc.InstanceTypeOptions, func(a, b *cloudprovider.InstanceType) int {
			pa, _ := a.CheapestOffering(nc.Requirements)
			pb, _ := b.CheapestOffering(nc.Requirements)
			return cmp.Compare(pa.Price, pb.Price)
		}) {
			t.Errorf("options not cheapest first: %v", names[:3])
		}
	}
}

func TestNodeClaimFromPlan(t *testing.T) {
	gpu := corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: "cni", Effect: corev1.TaintEffectNoExecute}
	np := newNodePool("team-a", poolLabels("team", "a"), poolTaints(gpu), poolStartupTaints(startup),
		poolRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"))
	np.Spec.Template.Annotations = map[string]string{"example.com/owner": "a"}
	np.UID = "pool-uid"
	// A stale stamp on the NodePool: the NodeClaim carries the hash of the template it is built from.
	np.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: "123", karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion, "example.com/pool-only": "x"}
	pods := replicas(2, "web", "500m", withLabels("app", "web"), withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web"),
		withTolerations(corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists}), withNodeSelector(karpv1.LabelTopologyZone, fake.Zone2))
	r := solve(t, Input{Pods: pods, NodePools: []NodePool{pool(np)}})
	nc := planOf(t, r, "web-0").NodeClaim()
	if nc.GenerateName != "team-a-" || nc.Labels["team"] != "a" || nc.Labels[karpv1.NodePoolLabelKey] != "team-a" || nc.Labels[karpv1.LabelTopologyZone] != fake.Zone2 {
		t.Errorf("metadata %+v", nc.ObjectMeta)
	}
	if nc.Annotations["example.com/owner"] != "a" || nc.Annotations[karpv1.NodePoolHashAnnotationKey] != np.Hash() ||
		nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion || nc.Annotations["example.com/pool-only"] != "" {
		t.Errorf("annotations %v, want the template's and the template's hash annotations only", nc.Annotations)
	}
	if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].Kind != "NodePool" || nc.OwnerReferences[0].Name != "team-a" || nc.OwnerReferences[0].UID != "pool-uid" {
		t.Errorf("owner references %+v, want the NodePool", nc.OwnerReferences)
	}
	if len(nc.Spec.Taints) != 1 || len(nc.Spec.StartupTaints) != 1 || nc.Spec.NodeClassRef.Name != "default" {
		t.Errorf("spec %+v", nc.Spec)
	}
	keys := map[string]karpv1.NodeSelectorRequirementWithMinValues{}
	for _, req := range nc.Spec.Requirements {
		keys[req.Key] = req
	}
	if _, ok := keys[karpv1.LabelHostname]; ok {
		t.Errorf("hostname leaked into the requirements")
	}
	if it := keys[karpv1.LabelInstanceType]; it.Operator != corev1.NodeSelectorOpIn || it.Values[0] != "fake-it-1" {
		t.Errorf("instance types %+v", it)
	}
	if ct := keys[karpv1.CapacityTypeLabelKey]; len(ct.Values) != 2 {
		t.Errorf("capacity types %+v", ct)
	}
	cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]
	if cpu.MilliValue() != 1000 {
		t.Errorf("requests %v", nc.Spec.Resources.Requests)
	}
}

func TestContextEndsSolve(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Solve(ctx, Input{Pods: replicas(3, "p", "1"), NodePools: []NodePool{pool(newNodePool("default"))}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if len(r.PodErrors) != 3 {
		t.Fatalf("%v", outcome(r))
	}
	wantContains(t, r.PodErrors[0].Err.Error(), "the simulation stopped before it was placed (context canceled)")
}

func TestSolveIsDeterministicAndLeavesInputs(t *testing.T) {
	pods := makeDiversePods(200)
	before := pods[7].DeepCopy()
	in := benchInput(pods)
	a, b := solve(t, in), solve(t, in)
	if len(a.NewNodeClaims) != len(b.NewNodeClaims) {
		t.Fatalf("%d vs %d NodeClaims", len(a.NewNodeClaims), len(b.NewNodeClaims))
	}
	for i := range a.NewNodeClaims {
		if !slices.Equal(podNames(a.NewNodeClaims[i].Pods), podNames(b.NewNodeClaims[i].Pods)) ||
			!a.NewNodeClaims[i].Requirements.Equal(b.NewNodeClaims[i].Requirements) {
			t.Fatalf("NodeClaim %d differs", i)
		}
	}
	if pods[7].Labels["my-label"] != before.Labels["my-label"] || len(pods[7].Spec.TopologySpreadConstraints) != len(before.Spec.TopologySpreadConstraints) {
		t.Fatal("Solve changed a pod")
	}
}

func TestInputsThatCannotWork(t *testing.T) {
	badSelector := newPod("bad", "1", "1Gi", withPodAffinity(corev1.PodAffinityTerm{TopologyKey: karpv1.LabelTopologyZone,
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}))
	noTerms := newPod("empty", "1", "1Gi", func(p *corev1.Pod) {
		affinity(p).NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}
	})
	tests := []struct {
		name  string
		pools []NodePool
		pod   *corev1.Pod
		want  string
	}{
		{"no NodePools", nil, newPod("p", "1", "1Gi"), "pod default/p cannot be placed: no NodePool is available"},
		{"NodePool without instance types", []NodePool{{NodePool: newNodePool("empty")}}, newPod("p", "1", "1Gi"),
			`NodePool "empty" ruled out: none of its 0 instance types has an available offering compatible with its requirements karpenter.sh/nodepool In [empty]`},
		{"NodePool label contradicting its requirement", []NodePool{pool(newNodePool("odd", poolLabels("team", "a"), poolRequirement("team", corev1.NodeSelectorOpIn, "b")))},
			newPod("p", "1", "1Gi"), `NodePool "odd" ruled out: spec.template requirement and label team contradict each other; make them agree`},
		{"invalid pod affinity selector", []NodePool{pool(newNodePool("default"))}, badSelector, "pod default/bad: podAffinity required term 0: labelSelector:"},
		{"required node affinity without terms", []NodePool{pool(newNodePool("default"))}, noTerms, "has no terms, so no node matches"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: []*corev1.Pod{tt.pod}, NodePools: tt.pools})
			if len(r.PodErrors) != 1 {
				t.Fatalf("%v", outcome(r))
			}
			wantContains(t, r.PodErrors[0].Err.Error(), tt.want)
		})
	}
}

func TestInFlightNodeClaimIsUsed(t *testing.T) {
	nc := &karpv1.NodeClaim{}
	nc.Name = "default-x"
	nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.LabelTopologyZone: fake.Zone2, karpv1.LabelInstanceType: "fake-it-3"}
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3900m"), corev1.ResourceMemory: resource.MustParse("8182Mi"), corev1.ResourcePods: resource.MustParse("40")}
	inFlight := NewInFlightNodeClaim(nc, []*corev1.Pod{newPod("earlier", "2", "1Gi", withLabels("app", "web"))})
	pods := []*corev1.Pod{
		newPod("fits", "1", "1Gi", withNodeSelector(karpv1.LabelTopologyZone, fake.Zone2)),
		newPod("spread", "100m", "100Mi", withLabels("app", "web"), withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web")),
	}
	r := solve(t, Input{Pods: pods, ExistingNodes: []*ExistingNode{inFlight}, NodePools: []NodePool{pool(newNodePool("default"))}})
	got := outcome(r)
	if got["fits"] != "existing:default-x" {
		t.Errorf("fits went to %q", got["fits"])
	}
	// The earlier pod counts in zone 2, so the spread pod goes elsewhere.
	if z := zoneOf(t, r, "spread"); z == fake.Zone2 || z == "" {
		t.Errorf("spread pod in %q", z)
	}
}
