package scheduling

import (
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// packOpt is a packer option of cpu millicores, memory GiB, pod slots and GPUs.
func packOpt(price float64, cpu, memGiB, pods, gpus int64) packOption {
	o := packOption{alloc: vec{core: [numCore]int64{cpu, memGiB << 30, pods, unknownCapacity}}, price: price}
	if gpus > 0 {
		o.alloc.extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": gpus * 1000}
	}
	return o
}

// packReq is a request of cpu millicores, memory MiB and GPUs.
func packReq(cpu, memMiB, gpus int64) vec {
	v := vec{core: [numCore]int64{cpu, memMiB << 20, 1, 0}}
	if gpus > 0 {
		v.extended = map[corev1.ResourceName]int64{"nvidia.com/gpu": gpus * 1000}
	}
	return v
}

// TestPack checks packings whose optimum is known.
func TestPack(t *testing.T) {
	weights := [numCore]float64{resCPU: 1.0 / 8000, resMemory: 1.0 / (32 << 30)}
	ladder := []packOption{packOpt(0.0106, 1900, 4, 29, 0), packOpt(0.0213, 3900, 8, 58, 0), packOpt(0.0362, 7900, 16, 58, 0), packOpt(0.0836, 15900, 32, 234, 0)}
	tests := []struct {
		name   string
		opts   []packOption
		base   vec
		shapes []packShape
		// want lists the chosen options, sorted, and the price.
		want  []int
		price float64
	}{
		{"identical pods: a 7-pod and a 3-pod node", ladder, vec{}, []packShape{{packReq(1000, 0, 0), 10}}, []int{1, 2}, 0.0575},
		{"a single pod", ladder, vec{}, []packShape{{packReq(1000, 0, 0), 1}}, []int{0}, 0.0106},
		{"the base takes room", ladder, packReq(1000, 0, 0), []packShape{{packReq(1000, 0, 0), 6}}, []int{2}, 0.0362},
		// A cpu-rich and a memory-rich type, each the cheapest for one kind of pod: 16 cpu-heavy
		// pods fill the first, 8 memory-heavy ones the second.
		{"complementary types", []packOption{packOpt(1.0, 16000, 16, 110, 0), packOpt(1.0, 4000, 64, 110, 0)}, vec{},
			[]packShape{{packReq(1000, 1024, 0), 16}, {packReq(500, 8192, 0), 8}}, []int{0, 1}, 2.0},
		// The GPU pods open GPU nodes (2 GPUs each), and the other pods fill them.
		{"gpu pods first", []packOption{packOpt(0.3, 8000, 32, 110, 0), packOpt(1.0, 8000, 32, 110, 2)}, vec{},
			[]packShape{{packReq(1000, 1024, 0), 10}, {packReq(1000, 1024, 1), 4}}, []int{1, 1}, 2.0},
		{"a pod that fits no option", ladder, vec{}, []packShape{{packReq(64000, 0, 0), 1}}, nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, price := pack(tt.opts, tt.base, tt.shapes, weights)
			var got []int
			held := make([]int, len(tt.shapes))
			for _, n := range nodes {
				got = append(got, n.option)
				var sum vec
				sum = sum.plus(tt.base)
				for _, c := range n.counts {
					held[c.shape] += c.count
					for range c.count {
						sum = sum.plus(tt.shapes[c.shape].req)
					}
				}
				if !fitsSum(&sum, &vec{}, &tt.opts[n.option].alloc) {
					t.Errorf("node of option %d holds %v, more than it has", n.option, sum.core)
				}
				if sum.core != n.used.core {
					t.Errorf("node of option %d says it uses %v, its pods add up to %v", n.option, n.used.core, sum.core)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) || math.Abs(price-tt.price) > 1e-9 {
				t.Errorf("options %v at %v, want %v at %v", got, price, tt.want, tt.price)
			}
			if price >= 0 {
				for s, sh := range tt.shapes {
					if held[s] != sh.count {
						t.Errorf("shape %d: %d of %d pods packed", s, held[s], sh.count)
					}
				}
			}
		})
	}
}
