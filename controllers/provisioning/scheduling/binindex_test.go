package scheduling

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// referenceBins is the best placement of q on the bins, found by trying every one in order with
// no shortcut: the reference the bin index and the scans must agree with.
func referenceBins(s *solver, q *podInfo) (plan, bool) {
	var best plan
	found := false
	for _, b := range s.bins {
		if b.isNew() && len(b.placed) == 0 {
			continue
		}
		if _, ok := s.estimate(q, b); !ok {
			continue
		}
		if p, ok := s.fit(q, b, nil); ok && (!found || p.better(&best)) {
			best, found = p, true
		}
	}
	return best, found
}

// referencePlacement is referenceBins and then a new NodeClaim, as bestPlacement weighs them.
func referencePlacement(s *solver, q *podInfo) (plan, bool) {
	best, found := referenceBins(s, q)
	for _, fresh := range s.fresh {
		if fresh == nil || q.tolerance[fresh.tmpl.index] == 2 {
			continue
		}
		if _, ok := s.estimate(q, fresh); !ok {
			continue
		}
		p, ok := s.fit(q, fresh, nil)
		if !ok {
			continue
		}
		s.sizeOpening(q, &p)
		if !found || p.better(&best) {
			best, found = p, true
		}
		break
	}
	return best, found
}

// referenceTarget is what bestTarget finds, found by trying every bin in order with no shortcut.
func referenceTarget(s *solver, q *podInfo, src *bin, limit float64) (plan, bool) {
	var best plan
	found := false
	free := limit <= 2*priceEpsilon
	for _, b := range s.bins {
		if b == src || (b.isNew() && len(b.placed) == 0) {
			continue
		}
		if free && b.isNew() && !resources.FitsCore(&b.used, &q.requests, &b.opts.alloc[b.first]) {
			continue
		}
		if _, ok := s.estimate(q, b); !ok {
			continue
		}
		p, ok := s.fit(q, b, nil)
		if !ok || p.delta >= limit || (found && !p.betterDelta(&best)) || !s.removalKeepsOthers(q, src, &p) {
			continue
		}
		best, found = p, true
	}
	return best, found
}

// randomWorkload is a workload of n pods drawn from rng with every kind of constraint the index
// filters on (zone spread and affinity, hostname spread and anti-affinity, zone selectors), on
// instance types whose price is linear in size or not, with some existing nodes.
func randomWorkload(rng *rand.Rand, n int) Input {
	var its []*cloudprovider.InstanceType
	linear := rng.Intn(2) == 0
	for i, cpu := range []int{2, 4, 8, 16} {
		price := 0.1 * float64(cpu)
		if !linear {
			price *= []float64{1.2, 1.1, 0.8, 0.95}[i]
		}
		its = append(its, pricedType(fmt.Sprintf("t-%d", cpu), fmt.Sprint(cpu), fmt.Sprintf("%dGi", 2*cpu), price))
	}
	zones := []string{fake.Zone1, fake.Zone2, fake.Zone3}
	labels := []string{"a", "b", "c"}
	var pods []*corev1.Pod
	for i := range n {
		cpu := []string{"100m", "250m", "500m", "1", "1500m"}[rng.Intn(5)]
		mem := []string{"128Mi", "512Mi", "1Gi", "2Gi", "4Gi"}[rng.Intn(5)]
		opts := []podOption{withLabels("my-label", labels[rng.Intn(3)])}
		switch rng.Intn(7) {
		case 1:
			opts = append(opts, withSpread(karpv1.LabelTopologyZone, 1, corev1.DoNotSchedule, "my-label", labels[rng.Intn(3)]))
		case 2:
			opts = append(opts, withSpread(karpv1.LabelHostname, 1, corev1.DoNotSchedule, "my-label", labels[rng.Intn(3)]))
		case 3:
			v := labels[rng.Intn(3)]
			opts = append(opts, withLabels("aff", v), withPodAffinity(term(karpv1.LabelTopologyZone, "aff", v)))
		case 4:
			opts = append(opts, withLabels("app", "solo"), withPodAntiAffinity(term(karpv1.LabelHostname, "app", "solo")))
		case 5:
			opts = append(opts, withNodeSelector(karpv1.LabelTopologyZone, zones[rng.Intn(3)]))
		}
		pods = append(pods, newPod(fmt.Sprintf("p-%d", i), cpu, mem, opts...))
	}
	var existing []*ExistingNode
	for i := range rng.Intn(4) {
		existing = append(existing, &ExistingNode{
			Name:        fmt.Sprintf("node-%d", i),
			Labels:      map[string]string{karpv1.LabelTopologyZone: zones[i%3], karpv1.LabelHostname: fmt.Sprintf("node-%d", i)},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20")},
			Initialized: i%2 == 0,
		})
	}
	return Input{Pods: pods, ExistingNodes: existing, NodePools: []NodePool{pool(newNodePool("default"), its...)}}
}

// TestIndexFindsWhatAScanFinds places random workloads pod by pod and checks, before each
// placement, that the bin index and the scan used below indexFrom bins find the placement that
// trying every bin finds; then, once every pod is placed, that they find the same targets for the
// improvement pass. The workloads are small enough that growthScanLimit never cuts a search short,
// so they must agree exactly.
func TestIndexFindsWhatAScanFinds(t *testing.T) {
	for seed := range int64(40) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			in := randomWorkload(rng, 20+rng.Intn(100))
			sch, err := Prepare(in.NodePools, nil, in.Options)
			if err != nil {
				t.Fatal(err)
			}
			s := newSolver(sch, in.Pods, NewNodeSet(in.ExistingNodes), nil, nil)
			var queue []*podInfo
			for _, p := range s.pods {
				if p.err == nil {
					queue = append(queue, p)
				}
			}
			slices.SortStableFunc(queue, queueOrder)
			s.buildIndex()
			s.startPending(queue)
			agree := func(what string, got, want *plan, gotOK, wantOK bool) {
				t.Helper()
				if gotOK != wantOK || (gotOK && !samePlacement(got, want)) {
					t.Fatalf("%s: found %v (%s), trying every bin %v (%s)", what, gotOK, describePlan(got), wantOK, describePlan(want))
				}
			}
			for _, q := range queue {
				got, gotOK := s.bestPlacement(q)
				want, wantOK := referencePlacement(s, q)
				agree("index, pod "+q.name(), &got, &want, gotOK, wantOK)
				scanned, scannedOK := s.scanPlacement(q)
				onBins, onBinsOK := referenceBins(s, q)
				agree("scan, pod "+q.name(), &scanned, &onBins, scannedOK, onBinsOK)
				if gotOK {
					s.commit(q, &got)
				}
				s.pending.Sub(&q.requests)
			}
			for _, src := range s.bins[s.existingCount:] {
				for _, q := range slices.Clone(src.placed) {
					saving := src.price - s.priceWithout(src, q)
					r := s.remove(q, src)
					for _, limit := range []float64{2 * priceEpsilon, saving - priceEpsilon, 1e9} {
						what := fmt.Sprintf("moving %s off %s under %v", q.name(), src.hostname, limit)
						want, wantOK := referenceTarget(s, q, src, limit)
						got, gotOK := s.bestTarget(q, src, limit)
						agree("index, "+what, &got, &want, gotOK, wantOK)
						scanned, scannedOK := s.scanTarget(q, src, limit)
						agree("scan, "+what, &scanned, &want, scannedOK, wantOK)
					}
					s.undoRemove(&r)
				}
			}
		})
	}
}

func samePlacement(a, b *plan) bool {
	return a.target == b.target && a.delta == b.delta && a.unit == b.unit && a.optionIndex == b.optionIndex
}

func describePlan(p *plan) string {
	if p.target == nil {
		return "nothing"
	}
	return fmt.Sprintf("bin %d %q, unit %.4f, delta %.4f, slack %.4f", p.target.id, p.target.hostname, p.unit, p.delta, p.slack)
}

// TestBuckets checks the sparse buckets the index is made of.
func TestBuckets(t *testing.T) {
	bins := make([]*bin, 6)
	for i := range bins {
		bins[i] = &bin{id: int32(i)}
	}
	var bs buckets
	pos := map[*bin]int32{}
	where := map[*bin]int{}
	put := func(b *bin, k int) { pos[b], where[b] = bs.add(indexedBin{b: b}, k), k }
	take := func(b *bin) {
		if moved := bs.remove(where[b], pos[b]); moved != nil {
			pos[moved] = pos[b]
		}
		delete(pos, b)
	}
	for i, k := range []int{5, 3, 5, 9, 3, 5} {
		put(bins[i], k)
	}
	take(bins[0])
	take(bins[4])
	contents := func() map[int][]int32 {
		out := map[int][]int32{}
		for _, c := range bs.cells {
			for _, ib := range c.bins {
				out[int(c.key)] = append(out[int(c.key)], ib.b.id)
			}
			slices.Sort(out[int(c.key)])
		}
		return out
	}
	want := map[int][]int32{3: {1}, 5: {2, 5}, 9: {3}}
	got := contents()
	for k, ids := range want {
		if !slices.Equal(got[k], ids) {
			t.Errorf("bucket %d holds %v, want %v", k, got[k], ids)
		}
	}
	for b, p := range pos {
		if c := bs.cells[bs.from(where[b])]; c.bins[p].b != b {
			t.Errorf("bin %d is not where its position says", b.id)
		}
	}
	for _, tt := range []struct{ k, want int }{{0, 3}, {3, 3}, {4, 5}, {9, 9}, {10, -1}} {
		i := bs.from(tt.k)
		got := -1
		if i < len(bs.cells) {
			got = int(bs.cells[i].key)
		}
		if got != tt.want {
			t.Errorf("from(%d) is bucket %d, want %d", tt.k, got, tt.want)
		}
	}
	for _, tt := range []struct {
		v    float64
		want int
	}{{0, 0}, {-1, 0}, {1, indexBuckets / 2}, {2, indexBuckets/2 + indexPerOctave}, {1e-300, 1}, {1e300, indexBuckets - 1}} {
		if got := bucketOf(tt.v); got != tt.want {
			t.Errorf("bucketOf(%v) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

// TestBucketBounds checks that every amount lands in a bucket whose floor it reaches and the
// next bucket's floor it does not.
func TestBucketBounds(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range 10000 {
		v := math.Exp2(rng.Float64()*60 - 30)
		k := bucketOf(v)
		if k <= 1 || k >= indexBuckets-1 {
			continue
		}
		if lo, hi := bucketFloor(k), bucketFloor(k+1); v < lo || v >= hi {
			t.Fatalf("%v in bucket %d, which holds [%v, %v)", v, k, lo, hi)
		}
	}
	for k := 2; k < indexBuckets-1; k++ {
		if got := bucketOf(bucketFloor(k)); got != k {
			t.Errorf("the floor of bucket %d lands in bucket %d", k, got)
		}
	}
}
