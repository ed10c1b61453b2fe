package scheduling

import (
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// pricedType is a fake instance type with the given capacity and price in every default offering,
// keeping 100m cpu and 10Mi for the kubelet; extended resources follow as name, quantity pairs.
func pricedType(name, cpu, memory string, price float64, extended ...string) *cloudprovider.InstanceType {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for i := 0; i < len(extended); i += 2 {
		capacity[corev1.ResourceName(extended[i])] = resource.MustParse(extended[i+1])
	}
	return fake.NewInstanceType(fake.InstanceTypeOptions{Name: name, Capacity: capacity, Offerings: fake.DefaultOfferings(price)})
}

// podsOf returns n pods named prefix-i requesting cpu and memory (and extended name/quantity
// pairs).
func podsOf(prefix string, n int, cpu, memory string, extended ...string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		var opts []podOption
		for j := 0; j < len(extended); j += 2 {
			opts = append(opts, withRequests(corev1.ResourceName(extended[j]), extended[j+1]))
		}
		out[i] = newPod(prefix+"-"+string(rune('a'+i/26))+string(rune('a'+i%26)), cpu, memory, opts...)
	}
	return out
}

// typesOf lists the cheapest option of each planned NodeClaim, sorted.
func typesOf(r *Results) []string {
	var out []string
	for _, nc := range r.NewNodeClaims {
		out = append(out, cheapest(nc))
	}
	slices.Sort(out)
	return out
}

// TestSizingOnPriceLists solves small workloads on price lists where a larger type costs less
// per cpu, where each pod's cheapest fit one at a time is expensive, and checks the exact
// NodeClaims chosen.
func TestSizingOnPriceLists(t *testing.T) {
	// Like c8gd.large, c8gd.xlarge, c6gd.2xlarge and c8gd.4xlarge spot in us-east-1: the 8-cpu
	// type is the cheapest per cpu.
	ladder := []*cloudprovider.InstanceType{
		pricedType("c-2", "2", "4Gi", 0.0106), pricedType("c-4", "4", "8Gi", 0.0213),
		pricedType("c-8", "8", "16Gi", 0.0362), pricedType("c-16", "16", "32Gi", 0.0836),
	}
	tests := []struct {
		name  string
		types []*cloudprovider.InstanceType
		pods  []*corev1.Pod
		want  []string
		price float64
	}{
		// One pod per c-2 would cost 0.106; c-8 holds 7 pods (7.9 cpus), c-4 the other 3.
		{"ten 1-cpu pods", ladder, podsOf("inflate", 10, "1", "0"), []string{"c-4", "c-8"}, 0.0575},
		{"three 1-cpu pods", ladder, podsOf("small", 3, "1", "0"), []string{"c-4"}, 0.0213},
		{"one pod", ladder, podsOf("one", 1, "1", "0"), []string{"c-2"}, 0.0106},
		// Prices linear in size: one node, as the price each pod adds decides.
		{"linear prices", fakeTypes(8), podsOf("linear", 3, "1", "1Gi"), []string{"fake-it-3"}, 4 * 0.3147483648},
		// c holds 2 of these pods, r 7: one r and one c.
		{"memory-heavy pods", []*cloudprovider.InstanceType{pricedType("c", "8", "16Gi", 0.30), pricedType("r", "8", "64Gi", 0.40)},
			podsOf("cache", 8, "1", "7Gi"), []string{"c", "r"}, 0.70},
		// The GPU node has room for the other pods too.
		{"gpu pod with others", []*cloudprovider.InstanceType{pricedType("cpu", "8", "32Gi", 0.30), pricedType("gpu", "8", "32Gi", 1.0, "nvidia.com/gpu", "1")},
			append(podsOf("gpu", 1, "1", "1Gi", "nvidia.com/gpu", "1"), podsOf("web", 6, "1", "1Gi")...), []string{"gpu"}, 1.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, NodePools: []NodePool{pool(newNodePool("default"), tt.types...)}})
			if len(r.PodErrors) > 0 {
				t.Fatalf("unschedulable: %v", r.PodErrors[0].Err)
			}
			if got := typesOf(r); !slices.Equal(got, tt.want) {
				t.Errorf("types %v, want %v", got, tt.want)
			}
			if got := totalCost(r); math.Abs(got-tt.price) > 1e-9 {
				t.Errorf("price %v, want %v", got, tt.price)
			}
		})
	}
}

// TestCoverage checks the share of the pending demand a room holds.
func TestCoverage(t *testing.T) {
	cores := func(cpu, mem, pods int64) resources.Vec {
		return resources.Vec{Core: [resources.NumCore]int64{cpu, mem << 30, pods, 0}}
	}
	tests := []struct {
		name         string
		pending, pod resources.Vec
		alloc, used  resources.Vec
		want         float64
	}{
		{"room for everything", cores(3000, 3, 3), cores(1000, 1, 1), cores(8000, 16, 110), resources.Vec{}, 1},
		// 7.9 cpus hold 7 pods of 1 cpu: 7 of the 10 pending.
		{"whole copies of the pod", cores(10000, 0, 10), cores(1000, 0, 1), cores(7900, 16, 110), resources.Vec{}, 0.7},
		{"the scarcest resource counts", cores(10000, 20, 10), cores(1000, 2, 1), cores(16000, 8, 110), resources.Vec{}, 0.4},
		{"what is used is not room", cores(4000, 0, 4), cores(1000, 0, 1), cores(3900, 16, 110), cores(1000, 0, 1), 0.5},
		{"no room at all", cores(4000, 0, 4), cores(1000, 0, 1), cores(900, 16, 110), resources.Vec{}, 0},
		{"a gpu the pod does not need is not counted",
			resources.Vec{Core: cores(4000, 4, 4).Core, Extended: map[corev1.ResourceName]int64{"nvidia.com/gpu": 2000}}, cores(1000, 1, 1), cores(8000, 16, 110), resources.Vec{}, 1},
		{"a gpu the pod needs is",
			resources.Vec{Core: cores(4000, 4, 4).Core, Extended: map[corev1.ResourceName]int64{"nvidia.com/gpu": 4000}},
			resources.Vec{Core: cores(1000, 1, 1).Core, Extended: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1000}},
			resources.Vec{Core: cores(8000, 16, 110).Core, Extended: map[corev1.ResourceName]int64{"nvidia.com/gpu": 1000}}, resources.Vec{}, 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &solver{pending: tt.pending}
			q := &podInfo{requests: tt.pod}
			if got := s.coverage(q, &tt.alloc.Core, tt.alloc.Extended, &tt.used); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("coverage %v, want %v", got, tt.want)
			}
		})
	}
}

// TestOpeningTarget checks which option a NodeClaim opened for a pod commits to.
func TestOpeningTarget(t *testing.T) {
	// Options cheapest first: 1.9, 3.9, 7.9 and 15.9 cpus.
	prices := []float64{0.0106, 0.0213, 0.0362, 0.0836}
	tmpl := &template{poolTemplate: &poolTemplate{}}
	opts := &optionSet{price: prices}
	for i, cpu := range []int64{1900, 3900, 7900, 15900} {
		tmpl.instanceTypes = append(tmpl.instanceTypes, instanceTypeInfo{alloc: resources.Vec{Core: [resources.NumCore]int64{cpu, 64 << 30, 110, resources.UnknownCapacity}}})
		opts.typeIndices = append(opts.typeIndices, int32(i))
		opts.alloc = append(opts.alloc, tmpl.instanceTypes[i].alloc.Core)
	}
	tests := []struct {
		name    string
		pending int64 // pods of 1 cpu, this one included
		want    int
	}{
		{"one pod left: the cheapest that fits", 1, 0},
		{"three: the one that holds them all", 3, 1},
		{"ten: the cheapest per pod", 10, 2},
		{"many: the cheapest per pod", 1000, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &solver{pending: resources.Vec{Core: [resources.NumCore]int64{tt.pending * 1000, 0, tt.pending, 0}}}
			q := &podInfo{requests: resources.Vec{Core: [resources.NumCore]int64{1000, 0, 1, 0}}}
			got, unit := s.openingTarget(q, tmpl, opts, 0, &resources.Vec{})
			if got != tt.want {
				t.Errorf("option %d (unit price %v), want %d", got, unit, tt.want)
			}
		})
	}
}
