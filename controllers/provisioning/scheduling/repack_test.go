package scheduling

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// TestMovable checks which pods the repacking pass may move between NodeClaims with the same
// requirements.
func TestMovable(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"resources only", newPod("p", "1", "1Gi"), true},
		{"own zone spread", newPod("p", "1", "1Gi", withLabels("app", "a"), withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "a")), true},
		{"zone affinity", newPod("p", "1", "1Gi", withLabels("app", "a"), withPodAffinity(term(karpv1.LabelTopologyZone, "app", "a"))), true},
		{"zone selector", newPod("p", "1", "1Gi", withNodeSelector(karpv1.LabelTopologyZone, "test-zone-1")), true},
		{"host port", newPod("p", "1", "1Gi", withHostPort(8080)), false},
		{"own hostname spread", newPod("p", "1", "1Gi", withLabels("app", "a"), withSpread(karpv1.LabelHostname, 1, corev1.DoNotSchedule, "app", "a")), false},
		{"selected by another pod's hostname spread", newPod("p", "1", "1Gi", withLabels("app", "b")), false},
		{"hostname anti-affinity", newPod("p", "1", "1Gi", withLabels("app", "a"), withPodAntiAffinity(term(karpv1.LabelHostname, "app", "a"))), false},
		{"preferred hostname anti-affinity", newPod("p", "1", "1Gi", withLabels("app", "a"), withPreferredPodAntiAffinity(1, term(karpv1.LabelHostname, "app", "a"))), false},
		{"hostname in its node affinity", newPod("p", "1", "1Gi", withNodeAffinity(nodeSelectorRequirement(karpv1.LabelHostname, corev1.NodeSelectorOpNotIn, "node-1"))), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The other pod's hostname spread selects app=b.
			other := newPod("other", "1", "1Gi", withSpread(karpv1.LabelHostname, 1, corev1.DoNotSchedule, "app", "b"))
			in := Input{Pods: []*corev1.Pod{tt.pod, other}, NodePools: []NodePool{pool(newNodePool("default"), fakeTypes(4)...)}}
			sch, err := Prepare(in.NodePools, nil, in.Options)
			if err != nil {
				t.Fatal(err)
			}
			s := newSolver(sch, in.Pods, NewNodeSet(nil), nil, nil)
			if s.pods[0].err != nil {
				t.Fatal(s.pods[0].err)
			}
			if got := s.movable(s.pods[0]); got != tt.want {
				t.Errorf("movable %v, want %v", got, tt.want)
			}
		})
	}
}

// complementaryTypes are a cpu-rich and a memory-rich type, each the cheaper per unit of its own
// resource, and small ones that cost more per unit.
func complementaryTypes() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		pricedType("c-16", "16", "32Gi", 1.0), pricedType("m-8", "8", "128Gi", 1.0),
		pricedType("c-2", "2", "4Gi", 0.2), pricedType("m-2", "2", "32Gi", 0.3),
	}
}

// TestRepackKeepsConstraints solves workloads that the repacking pass changes and checks that
// every constraint still holds: zone spreads within their skew, hostname spreads and
// anti-affinity per node, NodePool limits and minValues, every pod placed once, every option
// fitting its NodeClaim's pods; and that the price is the one a careful packing reaches.
func TestRepackKeepsConstraints(t *testing.T) {
	spreadDeployment := func(prefix string, n int, cpu, mem string) []*corev1.Pod {
		pods := podsOf(prefix, n, cpu, mem)
		for _, p := range pods {
			withLabels("app", prefix)(p)
			withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", prefix)(p)
		}
		return pods
	}
	hostSpread := func(prefix string, n int) []*corev1.Pod {
		pods := podsOf(prefix, n, "500m", "1Gi")
		for _, p := range pods {
			withLabels("app", prefix)(p)
			withSpread(karpv1.LabelHostname, 1, corev1.DoNotSchedule, "app", prefix)(p)
		}
		return pods
	}
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		pool     *karpv1.NodePool
		maxPrice float64
	}{
		// 20 cpu-heavy and 8 memory-heavy pods in each zone: an m-8 for the memory pods and 3
		// cpu pods, a c-16 for 15 cpu pods, two c-2 for the last 2; 2.4 a zone.
		{"zone spreads", append(spreadDeployment("cpu", 60, "1", "1Gi"), spreadDeployment("mem", 24, "500m", "14Gi")...), newNodePool("default"), 7.2},
		// 10 cpu pods a zone on a c-16; 6 web pods, one per node: 3 on the c-16s, 3 on c-2s.
		{"hostname spreads stay put", append(spreadDeployment("cpu", 30, "1", "1Gi"), hostSpread("web", 6)...), newNodePool("default"), 3.6},
		// Three c-16s hold the 40 pods; their 48 cpus are what the limit allows.
		{"within limits", podsOf("cpu", 40, "1", "1Gi"), func() *karpv1.NodePool {
			np := newNodePool("default")
			np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("48")}
			return np
		}(), 3.0},
		// Two instance types must fit every NodeClaim: only the c-16 fits 8 pods or more, so no
		// NodeClaim may hold more than 7 (for 1.0) or more than one on a c-2 (0.2); 6.0 at best.
		{"minValues", podsOf("cpu", 40, "1", "1Gi"), newNodePool("default", poolRequirements(karpv1.NodeSelectorRequirementWithMinValues{
			Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpExists, MinValues: ptrTo(2)})), 6.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := NodePool{NodePool: tt.pool, InstanceTypes: complementaryTypes(), Remaining: tt.pool.Spec.Limits}
			r := solve(t, Input{Pods: tt.pods, NodePools: []NodePool{np}})
			checkPlans(t, tt.pods, r)
			if np.Remaining != nil {
				limit := np.Remaining[corev1.ResourceCPU]
				var largest int64
				for _, nc := range r.NewNodeClaims {
					most := int64(0)
					for _, it := range nc.InstanceTypeOptions {
						most = max(most, it.Capacity.Cpu().MilliValue())
					}
					largest += most
				}
				if largest > limit.MilliValue() {
					t.Errorf("the largest options add up to %dm cpu, over the limit %s", largest, limit.String())
				}
			}
			if mv := tt.pool.Spec.Template.Spec.Requirements; len(mv) > 0 && mv[0].MinValues != nil {
				for i, nc := range r.NewNodeClaims {
					if len(nc.InstanceTypeOptions) < *mv[0].MinValues {
						t.Errorf("NodeClaim %d has %d options, minValues is %d", i, len(nc.InstanceTypeOptions), *mv[0].MinValues)
					}
				}
			}
			if price := totalCost(r); price > tt.maxPrice+1e-9 {
				t.Errorf("price %.3f, want at most %.3f (%v)", price, tt.maxPrice, typesOf(r))
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// checkPlans checks what every solution must be: every pod placed once, every option of a
// NodeClaim fitting its pods, each zone spread within its skew counting every pod it selects, each
// hostname spread within its skew on every NodeClaim.
func checkPlans(t *testing.T, pods []*corev1.Pod, r *Results) {
	t.Helper()
	for _, pe := range r.PodErrors {
		t.Fatalf("unschedulable: %v", pe.Err)
	}
	zoneOf := map[*corev1.Pod]string{}
	nodeOf := map[*corev1.Pod]int{}
	for i, nc := range r.NewNodeClaims {
		var sum resources.Vec
		for _, p := range nc.Pods {
			if _, dup := nodeOf[p]; dup {
				t.Fatalf("pod %s placed twice", p.Name)
			}
			nodeOf[p] = i
			zoneOf[p] = single(nc, karpv1.LabelTopologyZone)
			sum = sum.Plus(resources.PodRequests(p))
		}
		for _, it := range nc.InstanceTypeOptions {
			a := resources.CapacityOf(it.Allocatable())
			if !resources.FitsSum(&sum, &resources.Vec{}, &a) {
				t.Errorf("NodeClaim %d: option %s does not fit its pods", i, it.Name)
			}
		}
	}
	if len(nodeOf) != len(pods) {
		t.Fatalf("%d of %d pods placed", len(nodeOf), len(pods))
	}
	for _, p := range pods {
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			sel := tsc.LabelSelector.MatchLabels
			counts := map[string]int{}
			for _, o := range pods {
				if o.Labels["app"] != sel["app"] {
					continue
				}
				if tsc.TopologyKey == karpv1.LabelHostname {
					counts[fmt.Sprint(nodeOf[o])]++
				} else {
					counts[zoneOf[o]]++
				}
			}
			switch tsc.TopologyKey {
			case karpv1.LabelHostname:
				if n := counts[fmt.Sprint(nodeOf[p])]; n > int(tsc.MaxSkew) {
					t.Errorf("pod %s: %d pods of app=%s on its node", p.Name, n, sel["app"])
				}
			default:
				low := math.MaxInt
				for _, z := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
					low = min(low, counts[z])
				}
				if counts[zoneOf[p]]-low > int(tsc.MaxSkew) {
					t.Errorf("pod %s: zone spread of app=%s is %v", p.Name, sel["app"], counts)
				}
			}
		}
	}
}
