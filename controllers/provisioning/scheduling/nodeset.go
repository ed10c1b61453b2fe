package scheduling

import (
	"runtime"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
)

// NodeSet is a list of existing nodes prepared once for many simulations: what each node
// contributes to every solve (its requirements, capacity, the resources its pods use, their host
// ports and required anti-affinity) is computed when the set is made, so that a solve over the
// set costs per node it can use, not per pod already running. A disruption pass simulates the
// removal of each candidate over the same nodes (Scheduler.SolveOn).
//
// The nodes must not change while the set is in use.
type NodeSet struct {
	nodes  []*ExistingNode
	preps  []*existingPrep
	byName map[string]int
	// requests are the requests of the nodes' pods (resources.PodRequests), for the solves that move them.
	requests map[*corev1.Pod]resources.Vec
	// anti and preferNoSchedule list the nodes with pods with required anti-affinity and the
	// nodes with a PreferNoSchedule taint: the only ones a solve must look at before placing.
	anti, preferNoSchedule []int
}

// NewNodeSet prepares nodes for SolveOn, preparing them GOMAXPROCS at a time.
func NewNodeSet(nodes []*ExistingNode) *NodeSet {
	set := &NodeSet{nodes: nodes, preps: make([]*existingPrep, len(nodes)), byName: make(map[string]int, len(nodes))}
	workers := min(runtime.GOMAXPROCS(0), max(len(nodes)/64, 1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(nodes); i += workers {
				set.preps[i] = newExistingPrep(nodes[i])
			}
		}()
	}
	wg.Wait()
	pods := 0
	for _, en := range nodes {
		pods += len(en.Pods)
	}
	set.requests = make(map[*corev1.Pod]resources.Vec, pods)
	for i, en := range nodes {
		p := set.preps[i]
		for j, pod := range en.Pods {
			set.requests[pod] = p.requests[j]
		}
		p.requests = nil
		if _, dup := set.byName[en.Name]; !dup {
			set.byName[en.Name] = i
		}
		if p.anti != nil {
			set.anti = append(set.anti, i)
		}
		if slices.ContainsFunc(en.Taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectPreferNoSchedule }) {
			set.preferNoSchedule = append(set.preferNoSchedule, i)
		}
	}
	return set
}

// Len is the number of nodes in the set.
func (set *NodeSet) Len() int { return len(set.nodes) }

// Index returns the position of the node named name in the set.
func (set *NodeSet) Index(name string) (int, bool) {
	i, ok := set.byName[name]
	return i, ok
}

// RequestedShare is the mean of the shares of node i's allocatable cpu and memory its pods request
// (as the scheduler counts requests), each at most 1; a resource the node does not report counts
// as full.
func (set *NodeSet) RequestedShare(i int) float64 {
	p := set.preps[i]
	sum := 0.0
	for _, r := range []int{resources.CPU, resources.Memory} {
		share := 1.0
		if c := p.capacity.Core[r]; c > 0 {
			share = min(float64(p.used.Core[r])/float64(c), 1)
		}
		sum += share
	}
	return sum / 2
}

// existingPrep is what an existing node contributes to every solve that is the same in each: its
// requirements (from its labels), capacity, the resources its pods use, their host ports and
// their required anti-affinity.
type existingPrep struct {
	reqs     requirements.Requirements
	capacity resources.Vec
	used     resources.Vec
	ports    []hostPort
	// anti holds, per pod of the node, its required anti-affinity constraints; nil when no pod
	// has any.
	anti [][]topology.Constraint
	// requests are the pods' requests until NewNodeSet has indexed them.
	requests []resources.Vec
}

func newExistingPrep(en *ExistingNode) *existingPrep {
	reqs := requirements.FromLabels(en.Labels)
	if !reqs.Has(karpv1.LabelHostname) {
		reqs.Add(requirements.In(karpv1.LabelHostname, en.Name))
	}
	p := &existingPrep{reqs: reqs, capacity: resources.CapacityOf(en.Allocatable), requests: make([]resources.Vec, len(en.Pods))}
	for j, pod := range en.Pods {
		req := resources.PodRequests(pod)
		p.requests[j] = req
		p.used.Add(&req)
		p.ports = append(p.ports, hostPortsOf(pod)...)
		cs, err := topology.ConstraintsOf(pod, false)
		if err != nil {
			continue
		}
		for _, c := range cs {
			if c.Kind != topology.AntiAffinity {
				continue
			}
			if p.anti == nil {
				p.anti = make([][]topology.Constraint, len(en.Pods))
			}
			p.anti[j] = append(p.anti[j], c)
		}
	}
	// A solve appends the ports of the pods it places: make that copy rather than share.
	p.ports = slices.Clip(p.ports)
	return p
}

// roomFor reports whether a pod requesting at least least (in every core resource) could fit
// in what is left of the node.
func (p *existingPrep) roomFor(least *resources.Vec) bool {
	return resources.FitsCore(least, &p.used, &p.capacity.Core)
}

// leastRequests is the smallest amount of each core resource any of pods requests: a node
// without that much room in some resource can take none of them.
func leastRequests(pods []*podInfo) resources.Vec {
	var out resources.Vec
	first := true
	for _, p := range pods {
		if p.err != nil {
			continue
		}
		for i := range out.Core {
			if first || p.requests.Core[i] < out.Core[i] {
				out.Core[i] = p.requests.Core[i]
			}
		}
		first = false
	}
	return out
}
