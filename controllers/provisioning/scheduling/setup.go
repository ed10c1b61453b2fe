package scheduling

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
)

// setup holds what newSolver's stages pass to each other.
type setup struct {
	pods []*corev1.Pod
	// set and leave are the existing nodes of the solve and those it must not use.
	set   *NodeSet
	leave []bool
	// existing and preps are the nodes the solve uses, with what the set prepared for them.
	existing           []*ExistingNode
	preps              []*existingPrep
	pendingConstraints [][]topology.Constraint   // per pending pod
	existingAnti       [][][]topology.Constraint // per existing node, per pod: required anti-affinity
	existingGroups     [][][]int32               // the same, as groups
	volumes            *Volumes                  // the storage the pending pods' volumes are looked up in
}

// newSolver prepares a simulation on a prepared Scheduler: the pods, the NodePools in weight
// order with their remaining limits (remaining is indexed like the NodePools given to Prepare),
// the topology groups and domains, the existing nodes with their pods counted, and the NodeClaim
// each NodePool would open. The existing nodes are those of set whose leave entry is not true
// (leave may be shorter than the set, or nil). It changes nothing in sch or set.
func newSolver(sch *Scheduler, pods []*corev1.Pod, set *NodeSet, leave []bool, remaining []corev1.ResourceList) *solver {
	s := &solver{opts: sch.opts, topo: topology.New(), reach: map[reachKey]bool{}, set: set}
	st := &setup{pods: pods, set: set, leave: leave, volumes: sch.volumes}
	s.preparePods(st, sch)
	s.selectExisting(st)
	s.prepareNodePools(st, sch, remaining)
	s.prepareGroups(st)
	s.prepareSelection()
	s.prepareExistingNodes(st)
	s.prepareOrder()
	return s
}

// preparePods converts the pending pods and registers the topology keys of every constraint, also
// of the existing pods' required anti-affinity. preferNoSchedule says whether some NodePool has
// a PreferNoSchedule taint. The existing pods' constraints come from the NodeSet.
func (s *solver) preparePods(st *setup, sch *Scheduler) {
	preferNoSchedule := sch.preferNoSchedule
	withSoft := s.opts.PreferencePolicy != PreferencePolicyIgnore
	for _, i := range st.set.preferNoSchedule {
		preferNoSchedule = preferNoSchedule || !st.left(i)
	}
	st.pendingConstraints = make([][]topology.Constraint, len(st.pods))
	for i, pod := range st.pods {
		req, known := st.set.requests[pod]
		if !known {
			req = resources.PodRequests(pod)
		}
		p := newPodInfoWith(pod, req, withSoft, preferNoSchedule, st.volumes)
		p.order = i
		s.pods = append(s.pods, p)
		if p.err != nil {
			continue
		}
		cs, err := topology.ConstraintsOf(pod, withSoft)
		if err != nil {
			p.err = fmt.Errorf("pod %s: %w", p.name(), err)
			continue
		}
		st.pendingConstraints[i] = cs
		for _, c := range cs {
			s.topo.KeyIndex(c.KeyName)
		}
	}
	for _, i := range st.set.anti {
		if st.left(i) {
			continue
		}
		for _, cs := range st.set.preps[i].anti {
			for _, c := range cs {
				s.topo.KeyIndex(c.KeyName)
			}
		}
	}
}

// left reports whether the solve leaves out node i of the set.
func (st *setup) left(i int) bool { return i < len(st.leave) && st.leave[i] }

// selectExisting picks the nodes of the set the solve uses: all but those it leaves out, and,
// when no pod has a topology constraint (no topology key is known), only those with room for the
// smallest request of the pods, since no other could take a pod or change where one goes. The
// nodes dropped for want of room are kept aside for the explanations of unschedulable pods.
func (s *solver) selectExisting(st *setup) {
	noTopology := len(s.topo.Keys) == 0
	least := leastRequests(s.pods)
	st.existing = make([]*ExistingNode, 0, len(st.set.nodes))
	st.preps = make([]*existingPrep, 0, len(st.set.nodes))
	for i, en := range st.set.nodes {
		if st.left(i) {
			continue
		}
		prep := st.set.preps[i]
		if noTopology && !prep.roomFor(&least) {
			s.full = append(s.full, int32(i))
			continue
		}
		st.existing = append(st.existing, en)
		st.preps = append(st.preps, prep)
	}
	s.existingNodes = st.existing
	st.existingAnti = make([][][]topology.Constraint, len(st.existing))
	for n, prep := range st.preps {
		st.existingAnti[n] = prep.anti
	}
}

// prepareNodePools starts the simulation's templates from the prepared ones (already in weight
// order) with their remaining limits, and collects the topology domains their nodes and the
// existing nodes can be in.
func (s *solver) prepareNodePools(st *setup, sch *Scheduler, remaining []corev1.ResourceList) {
	for _, pt := range sch.pools {
		var left corev1.ResourceList
		if pt.input < len(remaining) {
			left = remaining[pt.input]
		}
		t := newTemplate(pt, left)
		s.templates = append(s.templates, t)
		if t.err == nil {
			s.topo.AddDomains(t.reqs)
		}
	}
	for _, en := range st.existing {
		for _, k := range s.topo.Keys {
			if v, ok := en.Labels[k.Name]; ok {
				k.Domain(v)
			}
		}
	}
}

// prepareGroups turns constraints into shared topology groups: first the pending pods' own (hard
// ones as owned groups, soft ones as preferences), then the existing pods' required anti-affinity.
func (s *solver) prepareGroups(st *setup) {
	prefKinds := map[topology.Kind]prefKind{topology.Spread: prefSpread, topology.Affinity: prefAffinity, topology.AntiAffinity: prefAntiAffinity}
	for i, p := range s.pods {
		if p.err != nil {
			continue
		}
		for _, c := range st.pendingConstraints[i] {
			g := s.topo.GroupFor(c, p.noHost, s.reachable)
			if c.Hard {
				s.topo.Groups[g].Hard = true
				p.ownedGroups = append(p.ownedGroups, owned{group: g, hard: true})
				continue
			}
			p.prefs = append(p.prefs, preference{kind: prefKinds[c.Kind], weight: c.Weight, group: g})
		}
	}
	st.existingGroups = make([][][]int32, len(st.existing))
	for n := range st.existing {
		if st.existingAnti[n] == nil {
			continue
		}
		st.existingGroups[n] = make([][]int32, len(st.existingAnti[n]))
		for j, cs := range st.existingAnti[n] {
			for _, c := range cs {
				g := s.topo.GroupFor(c, nil, nil)
				s.topo.Groups[g].Hard = true
				st.existingGroups[n][j] = append(st.existingGroups[n][j], g)
			}
		}
	}
	for _, g := range s.topo.Groups {
		if g.Key != topology.HostnameKey {
			g.Grow(len(s.topo.Keys[g.Key].Domains))
		}
	}
}

// prepareSelection records, per pending pod, the groups that count it, the topology keys it
// needs a fixed domain for, whether it needs a node of its own, and which NodePools' taints it
// tolerates.
func (s *solver) prepareSelection() {
	for _, p := range s.pods {
		if p.err != nil {
			continue
		}
		for gi, g := range s.topo.Groups {
			if g.Selects(p.pod) {
				p.selectedBy = append(p.selectedBy, int32(gi))
			}
		}
		addKey := func(g int32) {
			if k := s.topo.Groups[g].Key; k != topology.HostnameKey && !slices.Contains(p.keys, k) {
				p.keys = append(p.keys, k)
			}
		}
		for _, g := range p.selectedBy {
			addKey(g)
		}
		for _, o := range p.ownedGroups {
			addKey(o.group)
			if g := s.topo.Groups[o.group]; g.Key == topology.HostnameKey && g.Kind == topology.AntiAffinity && p.selfSelected(o.group) {
				p.separate = true
			}
		}
		for _, pr := range p.prefs {
			if pr.kind == prefSpread || pr.kind == prefAffinity || pr.kind == prefAntiAffinity {
				addKey(pr.group)
			}
		}
		for _, g := range p.selectedBy {
			if grp := s.topo.Groups[g]; grp.Kind == topology.Spread && grp.Hard {
				p.prefs = append(p.prefs, preference{kind: prefOthersSpread})
				break
			}
		}
		p.sortPrefs()
		p.tolerance = make([]uint8, len(s.templates))
		for i, t := range s.templates {
			switch hard, soft := untolerated(p.pod.Spec.Tolerations, t.taints); {
			case hard != nil:
				p.tolerance[i] = 2
			case soft != nil:
				p.tolerance[i] = 1
			}
		}
	}
}

// prepareExistingNodes adds the existing nodes as bins, with their pods' requests, host ports and
// topology counted.
func (s *solver) prepareExistingNodes(st *setup) {
	for n, en := range st.existing {
		b := s.existingBin(int32(n), en, st.preps[n])
		b.ports = b.basePorts
		s.bins = append(s.bins, b)
		// Without groups there is nothing to count (a node's anti-affinity makes groups): skip the
		// pods, so that a solve without topology costs per node, not per existing pod.
		if len(s.topo.Groups) == 0 {
			continue
		}
		for j, pod := range en.Pods {
			for gi, g := range s.topo.Groups {
				if g.Selects(pod) {
					s.count(b, int32(gi))
				}
			}
			if st.existingGroups[n] != nil {
				for _, g := range st.existingGroups[n][j] {
					s.countOwner(b, g)
				}
			}
		}
	}
	s.existingCount = len(s.bins)
}

// prepareOrder sets the reference shape that makes cpu and memory comparable, the pods' sizes,
// and the NodeClaim each NodePool would open.
func (s *solver) prepareOrder() {
	s.cpuWeight, s.memWeight = 1.0/1000, 1.0/(1<<31)
	for _, t := range s.templates {
		if t.err == nil {
			ref := t.instanceTypes[len(t.instanceTypes)/2].alloc
			if ref.Core[resources.CPU] > 0 && ref.Core[resources.Memory] > 0 {
				s.cpuWeight, s.memWeight = 1/float64(ref.Core[resources.CPU]), 1/float64(ref.Core[resources.Memory])
			}
			break
		}
	}
	for _, p := range s.pods {
		p.size = max(float64(p.requests.Core[resources.CPU])*s.cpuWeight, float64(p.requests.Core[resources.Memory])*s.memWeight)
	}
	for _, t := range s.templates {
		if t.err != nil {
			s.fresh = append(s.fresh, nil)
			continue
		}
		t.domains = s.domainsOf(t.reqs)
		s.fresh = append(s.fresh, &bin{id: -1, tmpl: t, reqs: t.reqs, spec: t.spec, domains: t.domains, used: t.daemon, opts: t.base, taints: t.taints})
	}
}

func (s *solver) existingBin(id int32, en *ExistingNode, prep *existingPrep) *bin {
	b := &bin{id: id, existing: en, hostname: en.Name, reqs: prep.reqs, capacity: prep.capacity, taints: en.Taints,
		used: prep.used, basePorts: prep.ports}
	b.domains = make([]int32, len(s.topo.Keys))
	for k, key := range s.topo.Keys {
		b.domains[k] = -1
		if v, ok := en.Labels[key.Name]; ok {
			b.domains[k] = key.Index[v]
		}
	}
	return b
}

// domainsOf returns, per topology key, the domain reqs fixes (one allowed value), else -1.
func (s *solver) domainsOf(reqs requirements.Requirements) []int32 {
	out := make([]int32, len(s.topo.Keys))
	for k, key := range s.topo.Keys {
		out[k] = -1
		if r, ok := reqs.Get(key.Name); ok {
			if v, single := r.Single(); single {
				out[k] = key.Domain(v)
			}
		}
	}
	return out
}

type reachKey struct {
	altHash    uint64
	key, value string
}

// reachable reports whether a node satisfying alt can have label key=value: an existing node
// with that label and compatible labels, or a new NodeClaim from a NodePool with an instance type
// and offering for alt in that domain.
func (s *solver) reachable(alt requirements.Requirements, key, value string) bool {
	rk := reachKey{alt.Hash(), key, value}
	if ok, done := s.reach[rk]; done {
		return ok
	}
	ok := false
	if r, constrained := alt.Get(key); !constrained || r.Has(value) {
		for _, en := range s.existingNodes {
			if en.Labels[key] == value {
				if _, bad := requirements.FromLabels(en.Labels).FirstIncompatibility(alt); !bad {
					ok = true
					break
				}
			}
		}
		for _, t := range s.templates {
			if ok {
				break
			}
			if t.err != nil {
				continue
			}
			if _, bad := t.reqs.FirstIncompatibility(alt); bad {
				continue
			}
			trial := t.reqs.Intersect(alt)
			if r, defined := trial.Get(key); !defined || !r.Has(value) {
				continue
			}
			trial.Add(requirements.In(key, value))
			ok = len(t.optionsFor(trial).typeIndices) > 0
		}
	}
	s.reach[rk] = ok
	return ok
}
