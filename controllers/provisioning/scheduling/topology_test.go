package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

var zones = []string{fake.Zone1, fake.Zone2, fake.Zone3}

// existingNode is a ready node in a zone with room for 16 cpus and the given pods.
func existingNode(name, zone string, pods ...*corev1.Pod) *ExistingNode {
	return &ExistingNode{
		Name:        name,
		Labels:      map[string]string{karpv1.LabelTopologyZone: zone, karpv1.LabelHostname: name, karpv1.LabelArch: "amd64"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Pods:        pods,
		Initialized: true,
	}
}

// zoneOf returns the zone of the node a pod was placed on.
func zoneOf(t *testing.T, r *Results, podName string) string {
	t.Helper()
	for _, e := range r.ExistingNodes {
		for _, p := range e.Pods {
			if p.Name == podName {
				return e.Node.Labels[karpv1.LabelTopologyZone]
			}
		}
	}
	return single(planOf(t, r, podName), karpv1.LabelTopologyZone)
}

func replicas(n int, prefix, cpu string, opts ...podOption) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = newPod(fmt.Sprintf("%s-%d", prefix, i), cpu, "256Mi", opts...)
	}
	return out
}

type solveCase struct {
	name     string
	pods     []*corev1.Pod
	existing []*ExistingNode
	check    func(t *testing.T, r *Results)
}

func TestTopologySpread(t *testing.T) {
	tests := append(spreadPlacementCases(), spreadLimitCases()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, ExistingNodes: tt.existing, NodePools: []NodePool{pool(newNodePool("default"))}})
			tt.check(t, r)
		})
	}
}

func spreadPlacementCases() []solveCase {
	zone, host := karpv1.LabelTopologyZone, karpv1.LabelHostname
	spreadZone := withSpread(zone, 1, corev1.DoNotSchedule, "app", "web")
	return []solveCase{
		{
			name: "zone spread with skew 1 over three zones",
			pods: replicas(6, "web", "100m", withLabels("app", "web"), spreadZone),
			check: func(t *testing.T, r *Results) {
				perZone := map[string]int{}
				for i := range 6 {
					perZone[zoneOf(t, r, fmt.Sprintf("web-%d", i))]++
				}
				for _, z := range zones {
					if perZone[z] != 2 {
						t.Errorf("zones %v, want 2 pods in each", perZone)
					}
				}
			},
		},
		{
			name:     "existing pods count",
			pods:     replicas(3, "web", "100m", withLabels("app", "web"), spreadZone),
			existing: []*ExistingNode{existingNode("full", fake.Zone1, newPod("old-0", "16", "1Gi", withLabels("app", "web")))},
			check: func(t *testing.T, r *Results) {
				perZone := map[string]int{fake.Zone1: 1} // the existing pod
				for i := range 3 {
					perZone[zoneOf(t, r, fmt.Sprintf("web-%d", i))]++
				}
				// Four pods over three zones with skew 1: 2/1/1 in some order.
				for _, z := range zones {
					if perZone[z] < 1 || perZone[z] > 2 {
						t.Errorf("zones %v with one existing pod in %s", perZone, fake.Zone1)
					}
				}
			},
		},
		{
			name: "hostname spread puts one selected pod per node",
			pods: replicas(4, "web", "100m", withLabels("app", "web"), withSpread(host, 1, corev1.DoNotSchedule, "app", "web")),
			check: func(t *testing.T, r *Results) {
				if len(r.NewNodeClaims) != 4 {
					t.Errorf("%d NodeClaims, want 4", len(r.NewNodeClaims))
				}
			},
		},
		{
			name: "hostname spread with skew 2",
			pods: replicas(4, "web", "100m", withLabels("app", "web"), withSpread(host, 2, corev1.DoNotSchedule, "app", "web")),
			check: func(t *testing.T, r *Results) {
				if len(r.NewNodeClaims) != 2 {
					t.Errorf("%d NodeClaims, want 2", len(r.NewNodeClaims))
				}
			},
		},
	}
}

func spreadLimitCases() []solveCase {
	zone := karpv1.LabelTopologyZone
	spreadZone := withSpread(zone, 1, corev1.DoNotSchedule, "app", "web")
	return []solveCase{
		{
			name: "spread pinned to one zone by node affinity cannot balance",
			pods: replicas(2, "web", "100m", withLabels("app", "web"), spreadZone, withNodeSelector(zone, fake.Zone1)),
			check: func(t *testing.T, r *Results) {
				// Node affinity is honoured: only zone 1 is a domain, so both pods fit there.
				if len(r.PodErrors) != 0 {
					t.Errorf("errors: %v", outcome(r))
				}
			},
		},
		{
			name: "DoNotSchedule spread that cannot be met is an error naming it",
			pods: append(replicas(2, "web", "100m", withLabels("app", "web"), withSpread(zone, 1, corev1.DoNotSchedule, "app", "web")),
				newPod("pinned", "100m", "256Mi", withLabels("app", "web"), withSpread(zone, 1, corev1.DoNotSchedule, "app", "web"),
					withNodeAffinity(nodeSelectorRequirement(zone, corev1.NodeSelectorOpIn, fake.Zone1, fake.Zone2)),
				)),
			existing: []*ExistingNode{existingNode("z1", fake.Zone1, newPod("old-0", "16", "1Gi", withLabels("app", "web")), newPod("old-1", "0", "0", withLabels("app", "web")))},
			check: func(t *testing.T, r *Results) {
				// Zone 1 already has 2: the two free pods go to zones 2 and 3; the pinned one may only go to
				// zones 1 and 2, where the count is 2 and 1 against a minimum of 1, so zone 2 gets 2.
				// Whatever the order, the final counts must stay within skew 1.
				perZone := map[string]int{fake.Zone1: 2}
				for _, name := range []string{"web-0", "web-1", "pinned"} {
					if msg := errorOf(r, name); msg != "" {
						wantContains(t, msg, "topology spread on topology.kubernetes.io/zone")
						continue
					}
					perZone[zoneOf(t, r, name)]++
				}
				low, high := 99, 0
				for _, z := range zones {
					low, high = min(low, perZone[z]), max(high, perZone[z])
				}
				if high-low > 1 {
					t.Errorf("zones %v exceed skew 1", perZone)
				}
			},
		},
		{
			name: "zones without an offering for the pod are not domains",
			// Spot exists only in zones 1 and 2: four spot pods spread 2/2 instead of failing on an
			// empty zone 3 they can never reach.
			pods: replicas(4, "web", "100m", withLabels("app", "web"), spreadZone, withNodeSelector(karpv1.CapacityTypeLabelKey, "spot")),
			check: func(t *testing.T, r *Results) {
				perZone := map[string]int{}
				for i := range 4 {
					perZone[zoneOf(t, r, fmt.Sprintf("web-%d", i))]++
				}
				if perZone[fake.Zone1] != 2 || perZone[fake.Zone2] != 2 {
					t.Errorf("zones %v, want 2 and 2 in zones 1 and 2", perZone)
				}
			},
		},
		{
			name:     "ScheduleAnyway spread is relaxed when it cannot be met",
			pods:     replicas(3, "web", "100m", withLabels("app", "web"), withSpread(zone, 1, corev1.ScheduleAnyway, "app", "web"), withNodeSelector(zone, fake.Zone2)),
			existing: []*ExistingNode{existingNode("z1", fake.Zone1)},
			check: func(t *testing.T, r *Results) {
				if len(r.PodErrors) != 0 {
					t.Errorf("errors: %v", outcome(r))
				}
			},
		},
	}
}

func TestPodAffinityAndAntiAffinity(t *testing.T) {
	tests := append(affinityCases(), antiAffinityCases()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, ExistingNodes: tt.existing, NodePools: []NodePool{pool(newNodePool("default"))}})
			tt.check(t, r)
		})
	}
}

func affinityCases() []solveCase {
	zone, host := karpv1.LabelTopologyZone, karpv1.LabelHostname
	return []solveCase{
		{
			name: "hostname affinity keeps pods together",
			pods: append(replicas(3, "db", "1", withLabels("app", "db")),
				newPod("cache", "1", "1Gi", withPodAffinity(term(host, "app", "db")))),
			check: func(t *testing.T, r *Results) {
				if nc := planOf(t, r, "cache"); len(nc.Pods) < 2 {
					t.Errorf("cache alone on its node")
				}
			},
		},
		{
			name:     "zone affinity follows an existing pod",
			pods:     []*corev1.Pod{newPod("web", "1", "1Gi", withPodAffinity(term(zone, "app", "db")))},
			existing: []*ExistingNode{existingNode("db-node", fake.Zone2, newPod("db", "16", "1Gi", withLabels("app", "db")))},
			check: func(t *testing.T, r *Results) {
				if z := zoneOf(t, r, "web"); z != fake.Zone2 {
					t.Errorf("web in %q, want %s", z, fake.Zone2)
				}
			},
		},
		{
			name: "affinity to pods that do not exist fails",
			pods: []*corev1.Pod{newPod("web", "1", "1Gi", withPodAffinity(term(zone, "app", "db")))},
			check: func(t *testing.T, r *Results) {
				wantContains(t, errorOf(r, "web"), "pod affinity on topology.kubernetes.io/zone (selector app=db)")
			},
		},
		{
			name: "self affinity groups in one zone",
			pods: replicas(5, "web", "2", withLabels("app", "web"), withPodAffinity(term(zone, "app", "web"))),
			check: func(t *testing.T, r *Results) {
				seen := map[string]bool{}
				for i := range 5 {
					seen[zoneOf(t, r, fmt.Sprintf("web-%d", i))] = true
				}
				if len(seen) != 1 || seen[""] {
					t.Errorf("zones %v", seen)
				}
			},
		},
	}
}

func antiAffinityCases() []solveCase {
	zone, host := karpv1.LabelTopologyZone, karpv1.LabelHostname
	return []solveCase{
		{
			name: "hostname anti-affinity spreads over nodes",
			pods: replicas(3, "web", "100m", withLabels("app", "web"), withPodAntiAffinity(term(host, "app", "web"))),
			check: func(t *testing.T, r *Results) {
				if len(r.NewNodeClaims) != 3 {
					t.Errorf("%d NodeClaims, want 3", len(r.NewNodeClaims))
				}
			},
		},
		{
			name: "zone anti-affinity allows one pod per zone",
			pods: replicas(4, "web", "100m", withLabels("app", "web"), withPodAntiAffinity(term(zone, "app", "web"))),
			check: func(t *testing.T, r *Results) {
				placed, failed := 0, 0
				for i := range 4 {
					if msg := errorOf(r, fmt.Sprintf("web-%d", i)); msg != "" {
						wantContains(t, msg, "pod anti-affinity on topology.kubernetes.io/zone")
						failed++
						continue
					}
					placed++
				}
				if placed != 3 || failed != 1 {
					t.Errorf("placed %d, failed %d", placed, failed)
				}
			},
		},
		{
			name:     "an existing pod's anti-affinity keeps selected pods off its node",
			pods:     []*corev1.Pod{newPod("web", "100m", "100Mi", withLabels("app", "web"))},
			existing: []*ExistingNode{existingNode("n1", fake.Zone1, newPod("lonely", "1", "1Gi", withPodAntiAffinity(term(host, "app", "web"))))},
			check: func(t *testing.T, r *Results) {
				planOf(t, r, "web") // on a new NodeClaim, not on n1
			},
		},
		{
			name:     "existing node used when nothing forbids it",
			pods:     []*corev1.Pod{newPod("web", "100m", "100Mi", withLabels("app", "web"))},
			existing: []*ExistingNode{existingNode("n1", fake.Zone1, newPod("friendly", "1", "1Gi"))},
			check: func(t *testing.T, r *Results) {
				if got := outcome(r)["web"]; got != "existing:n1" {
					t.Errorf("web on %s, want existing:n1", got)
				}
			},
		},
	}
}
