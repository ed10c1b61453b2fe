package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

type preferenceCase struct {
	name   string
	policy PreferencePolicy
	pods   []*corev1.Pod
	check  func(t *testing.T, r *Results)
}

func TestPreferences(t *testing.T) {
	tests := append(nodePreferenceCases(), podPreferenceCases()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, NodePools: []NodePool{pool(newNodePool("default"))}, Options: Options{PreferencePolicy: tt.policy}})
			tt.check(t, r)
		})
	}
}

func nodePreferenceCases() []preferenceCase {
	zone, host := karpv1.LabelTopologyZone, karpv1.LabelHostname
	return []preferenceCase{
		{
			name: "preferred zone is honoured",
			pods: []*corev1.Pod{newPod("p", "1", "1Gi", withPreferredNodeAffinity(10, nodeSelectorRequirement(zone, corev1.NodeSelectorOpIn, fake.Zone3)))},
			check: func(t *testing.T, r *Results) {
				if z := zoneOf(t, r, "p"); z != fake.Zone3 {
					t.Errorf("zone %q", z)
				}
			},
		},
		{
			name:   "preferred zone is ignored under Ignore",
			policy: PreferencePolicyIgnore,
			pods:   []*corev1.Pod{newPod("p", "1", "1Gi", withPreferredNodeAffinity(10, nodeSelectorRequirement(zone, corev1.NodeSelectorOpIn, fake.Zone3)))},
			check: func(t *testing.T, r *Results) {
				if z := zoneOf(t, r, "p"); z == fake.Zone3 {
					t.Errorf("zone %q: the preference should not narrow the NodeClaim", z)
				}
			},
		},
		{
			name: "impossible preference is dropped, the heavier one kept",
			pods: []*corev1.Pod{newPod("p", "1", "1Gi",
				withPreferredNodeAffinity(50, nodeSelectorRequirement(zone, corev1.NodeSelectorOpIn, fake.Zone2)),
				withPreferredNodeAffinity(1, nodeSelectorRequirement(zone, corev1.NodeSelectorOpIn, "test-zone-9")))},
			check: func(t *testing.T, r *Results) {
				if z := zoneOf(t, r, "p"); z != fake.Zone2 {
					t.Errorf("zone %q, want the weight-50 preference %s", z, fake.Zone2)
				}
			},
		},
		{
			name: "preferred anti-affinity spreads when it can",
			pods: replicas(3, "web", "100m", withLabels("app", "web"), withPreferredPodAntiAffinity(10, term(host, "app", "web"))),
			check: func(t *testing.T, r *Results) {
				if len(r.NewNodeClaims) != 3 {
					t.Errorf("%d NodeClaims, want 3", len(r.NewNodeClaims))
				}
			},
		},
	}
}

func podPreferenceCases() []preferenceCase {
	zone, host := karpv1.LabelTopologyZone, karpv1.LabelHostname
	return []preferenceCase{
		{
			name:   "preferred anti-affinity packs under Ignore",
			policy: PreferencePolicyIgnore,
			pods:   replicas(3, "web", "100m", withLabels("app", "web"), withPreferredPodAntiAffinity(10, term(host, "app", "web"))),
			check: func(t *testing.T, r *Results) {
				if len(r.NewNodeClaims) != 1 {
					t.Errorf("%d NodeClaims, want 1", len(r.NewNodeClaims))
				}
			},
		},
		{
			name: "zone anti-affinity preference gives way after three zones",
			pods: replicas(5, "web", "100m", withLabels("app", "web"), withPreferredPodAntiAffinity(10, term(zone, "app", "web"))),
			check: func(t *testing.T, r *Results) {
				if len(r.PodErrors) != 0 {
					t.Fatalf("errors: %v", outcome(r))
				}
				seen := map[string]bool{}
				for _, nc := range r.NewNodeClaims {
					seen[single(nc, zone)] = true
				}
				if len(seen) != 3 {
					t.Errorf("zones %v, want all three used", seen)
				}
			},
		},
		{
			name: "the heavier preference outlives a lighter one of another kind",
			// Zone anti-affinity (weight 10) and zone 1 (weight 1) conflict from the second pod on:
			// the node affinity goes first, so the first three pods take one zone each.
			pods: replicas(3, "web", "100m", withLabels("app", "web"), withPreferredPodAntiAffinity(10, term(zone, "app", "web")),
				withPreferredNodeAffinity(1, nodeSelectorRequirement(zone, corev1.NodeSelectorOpIn, fake.Zone1))),
			check: func(t *testing.T, r *Results) {
				seen := map[string]bool{}
				for i := range 3 {
					seen[zoneOf(t, r, fmt.Sprintf("web-%d", i))] = true
				}
				if len(seen) != 3 {
					t.Errorf("zones %v, want one pod per zone", seen)
				}
			},
		},
		{
			name: "preferred affinity joins the target when possible",
			pods: []*corev1.Pod{newPod("db", "1", "1Gi", withLabels("app", "db")), newPod("web", "100m", "100Mi", withPreferredPodAffinity(10, term(host, "app", "db")))},
			check: func(t *testing.T, r *Results) {
				if planOf(t, r, "web") != planOf(t, r, "db") {
					t.Errorf("web not with db")
				}
			},
		},
		{
			name: "ScheduleAnyway spread is a preference",
			pods: replicas(3, "web", "100m", withLabels("app", "web"), withSpread(host, 1, corev1.ScheduleAnyway, "app", "web")),
			check: func(t *testing.T, r *Results) {
				if len(r.NewNodeClaims) != 3 {
					t.Errorf("%d NodeClaims, want 3 while the preference holds", len(r.NewNodeClaims))
				}
			},
		},
	}
}

func TestRelaxationIsReported(t *testing.T) {
	// Pinned to zone 1 by a requirement, the pod cannot meet its preferred zone 3, and also not
	// a required anti-affinity: the error lists what was dropped before giving up.
	p := newPod("p", "1", "1Gi", withLabels("app", "p"), withNodeSelector(karpv1.LabelTopologyZone, fake.Zone1),
		withPreferredNodeAffinity(5, nodeSelectorRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, fake.Zone3)),
		withPodAntiAffinity(term(karpv1.LabelTopologyZone, "app", "p")))
	blocker := existingNode("n1", fake.Zone1, newPod("other", "15", "1Gi", withLabels("app", "p")))
	r := solve(t, Input{Pods: []*corev1.Pod{p}, ExistingNodes: []*ExistingNode{blocker}, NodePools: []NodePool{pool(newNodePool("default"))}})
	wantContains(t, errorOf(r, "p"),
		"pod anti-affinity on topology.kubernetes.io/zone (selector app=p)",
		"after dropping preferences: preferred node affinity topology.kubernetes.io/zone In [test-zone-3] (weight 5)")
}
