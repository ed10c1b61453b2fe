package pack

import (
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// packOpt is a packer option of cpu millicores, memory GiB, pod slots and GPUs.
func packOpt(price float64, cpu, memGiB, pods, gpus int64) Option {
	o := Option{Alloc: resources.Vec{Core: [resources.NumCore]int64{cpu, memGiB << 30, pods, resources.UnknownCapacity}}, Price: price}
	if gpus > 0 {
		o.Alloc.Extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": gpus * 1000}
	}
	return o
}

// packReq is a request of cpu millicores, memory MiB and GPUs.
func packReq(cpu, memMiB, gpus int64) resources.Vec {
	v := resources.Vec{Core: [resources.NumCore]int64{cpu, memMiB << 20, 1, 0}}
	if gpus > 0 {
		v.Extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": gpus * 1000}
	}
	return v
}

// TestPack checks packings whose optimum is known.
func TestPack(t *testing.T) {
	weights := [resources.NumCore]float64{resources.CPU: 1.0 / 8000, resources.Memory: 1.0 / (32 << 30)}
	ladder := []Option{packOpt(0.0106, 1900, 4, 29, 0), packOpt(0.0213, 3900, 8, 58, 0), packOpt(0.0362, 7900, 16, 58, 0), packOpt(0.0836, 15900, 32, 234, 0)}
	tests := []struct {
		name   string
		opts   []Option
		base   resources.Vec
		shapes []Shape
		// want lists the chosen options, sorted, and the price.
		want  []int
		price float64
	}{
		{"identical pods: a 7-pod and a 3-pod node", ladder, resources.Vec{}, []Shape{{packReq(1000, 0, 0), 10}}, []int{1, 2}, 0.0575},
		{"a single pod", ladder, resources.Vec{}, []Shape{{packReq(1000, 0, 0), 1}}, []int{0}, 0.0106},
		{"the base takes room", ladder, packReq(1000, 0, 0), []Shape{{packReq(1000, 0, 0), 6}}, []int{2}, 0.0362},
		// A cpu-rich and a memory-rich type, each the cheapest for one kind of pod: 16 cpu-heavy
		// pods fill the first, 8 memory-heavy ones the second.
		{"complementary types", []Option{packOpt(1.0, 16000, 16, 110, 0), packOpt(1.0, 4000, 64, 110, 0)}, resources.Vec{},
			[]Shape{{packReq(1000, 1024, 0), 16}, {packReq(500, 8192, 0), 8}}, []int{0, 1}, 2.0},
		// The GPU pods open GPU nodes (2 GPUs each), and the other pods fill them.
		{"gpu pods first", []Option{packOpt(0.3, 8000, 32, 110, 0), packOpt(1.0, 8000, 32, 110, 2)}, resources.Vec{},
			[]Shape{{packReq(1000, 1024, 0), 10}, {packReq(1000, 1024, 1), 4}}, []int{1, 1}, 2.0},
		{"a pod that fits no option", ladder, resources.Vec{}, []Shape{{packReq(64000, 0, 0), 1}}, nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, price := Pack(tt.opts, tt.base, tt.shapes, weights)
			var got []int
			held := make([]int, len(tt.shapes))
			for _, n := range nodes {
				got = append(got, n.Option)
				var sum resources.Vec
				sum = sum.Plus(tt.base)
				for _, c := range n.Counts {
					held[c.Shape] += c.Count
					for range c.Count {
						sum = sum.Plus(tt.shapes[c.Shape].Req)
					}
				}
				if !resources.FitsSum(&sum, &resources.Vec{}, &tt.opts[n.Option].Alloc) {
					t.Errorf("node of option %d holds %v, more than it has", n.Option, sum.Core)
				}
				if sum.Core != n.Used.Core {
					t.Errorf("node of option %d says it uses %v, its pods add up to %v", n.Option, n.Used.Core, sum.Core)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) || math.Abs(price-tt.price) > 1e-9 {
				t.Errorf("options %v at %v, want %v at %v", got, price, tt.want, tt.price)
			}
			if price >= 0 {
				for s, sh := range tt.shapes {
					if held[s] != sh.Count {
						t.Errorf("shape %d: %d of %d pods packed", s, held[s], sh.Count)
					}
				}
			}
		})
	}
}
