package scheduling

import (
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// DaemonSet overhead. Every node a NodeClaim becomes runs the DaemonSet pods whose tolerations
// cover the NodePool's taints and whose node selector and required node affinity its labels
// satisfy, so those pods' requests come out of what the node has for pending pods.
//
// A DaemonSet that runs on every node of a NodePool adds its requests to every NodeClaim planned
// from it: poolTemplate.daemon, the used resources a new NodeClaim starts from, which its
// NodeClaimPlan.Requests include. A DaemonSet that runs on some of the NodePool's nodes only,
// because it selects a label the NodePool leaves open (an architecture, instance type, zone or
// capacity type, or a custom label with several allowed values), is charged to the instance
// types it would run on instead, in their allocatable:
//
//   - once, in instanceTypeInfo.alloc, on a type where it runs whatever the offering and
//     whatever the pods narrow (every label it selects is fixed by the type and each offering);
//   - per option set (template.go buildOptions, through optionAlloc) on a type where that depends
//     on the NodeClaim's requirements: it is charged when they leave the type an offering where
//     it may run. Which offering a launch takes is only known at launch, so a spot-only DaemonSet
//     costs nothing on a NodeClaim that requires on-demand capacity, and is counted on one that
//     allows both.

// daemonReach says on which of a NodePool's nodes a DaemonSet pod runs.
type daemonReach uint8

const (
	runsOnNone daemonReach = iota
	runsOnAll
	runsOnSome
)

// varyingDaemons are the DaemonSet pods that run on some of a NodePool's nodes only.
type varyingDaemons struct {
	pods []*podInfo
	// byType lists, per instance type of the template (in poolTemplate.instanceTypes order), the
	// indices into pods of those that may run on some of its nodes but not surely on all, which
	// optionAlloc charges per option set; nil when pods is empty.
	byType [][]int32
}

// prepareDaemons sorts the DaemonSet pods by where they run on the template's nodes: the requests
// of those running on every node go to t.daemon; those running on some nodes go to t.varying, and
// per instance type, are charged to its allocatable when they run on all its nodes, and listed in
// t.varying.byType when they may run on some. The extended resources of a listed pod come out of
// the type's allocatable at once too (extended resources are checked against instanceTypeInfo.alloc
// only), so they are charged wherever the pod may run; its cpu, memory, pods and ephemeral-storage
// are charged per option set by optionAlloc. It runs once, from newPoolTemplate, after
// t.instanceTypes is set.
func (t *poolTemplate) prepareDaemons(daemons []*podInfo) {
	for _, ds := range daemons {
		switch t.reachOf(ds) {
		case runsOnAll:
			t.daemon = t.daemon.Plus(ds.requests)
		case runsOnSome:
			t.varying.pods = append(t.varying.pods, ds)
		}
	}
	if len(t.varying.pods) == 0 {
		return
	}
	t.varying.byType = make([][]int32, len(t.instanceTypes))
	for i := range t.instanceTypes {
		info := &t.instanceTypes[i]
		node := nodeParts{t.reqs, info.instanceType.Requirements}
		var charged resources.Vec
		for d, ds := range t.varying.pods {
			switch reachOn(ds, node, info.instanceType.Offerings) {
			case runsOnAll:
				charged = charged.Plus(ds.requests)
			case runsOnSome:
				t.varying.byType[i] = append(t.varying.byType[i], int32(d))
				if ds.requests.Extended != nil {
					charged = charged.Plus(resources.Vec{Extended: ds.requests.Extended})
				}
			}
		}
		info.alloc = info.alloc.Minus(charged)
	}
}

// reachOf says on which of the template's nodes the DaemonSet pod runs: none when it does not
// tolerate a NoSchedule or NoExecute taint of the NodePool or no term of its node requirements is
// compatible with the NodePool; all when a term holds on every node of the NodePool (it constrains
// only labels they all have alike); some otherwise.
func (t *poolTemplate) reachOf(ds *podInfo) daemonReach {
	if ds.err != nil {
		return runsOnNone
	}
	if hard, _ := untolerated(ds.pod.Spec.Tolerations, t.taints); hard != nil {
		return runsOnNone
	}
	reach := runsOnNone
	for _, term := range ds.terms {
		switch may, sure := termOn(nodeParts{t.reqs}, requirements.Requirements{}, term); {
		case sure:
			return runsOnAll
		case may:
			reach = runsOnSome
		}
	}
	return reach
}

// optionAlloc is the core allocatable of instance type i (an index into t.instanceTypes) for
// pods on a NodeClaim with requirements reqs: its allocatable less the requests of the DaemonSet
// pods that run on some of the NodePool's nodes and may run on one of the type's offerings under
// reqs. The pods that run on every node are in the NodeClaim's used resources instead.
func (t *poolTemplate) optionAlloc(i int32, reqs requirements.Requirements) [resources.NumCore]int64 {
	alloc := t.instanceTypes[i].alloc.Core
	if t.varying.byType == nil || len(t.varying.byType[i]) == 0 {
		return alloc
	}
	it := t.instanceTypes[i].instanceType
	for _, d := range t.varying.byType[i] {
		ds := t.varying.pods[d]
		if !runsOn(ds, nodeParts{reqs, it.Requirements}, it.Offerings) {
			continue
		}
		for r := range resources.NumCore {
			alloc[r] = max(alloc[r]-ds.requests.Core[r], 0)
		}
	}
	return alloc
}

// nodeParts describe the labels a node may have as the intersection of two requirement sets (a
// NodeClaim's and its instance type's), read key by key so that checks need not build it.
type nodeParts [2]requirements.Requirements

// get returns what the parts allow for key, and false when neither constrains it (a label the
// node never carries).
func (n nodeParts) get(key string) (requirements.Requirement, bool) {
	a, inA := n[0].Get(key)
	b, inB := n[1].Get(key)
	switch {
	case inA && inB:
		return a.Intersect(b), true
	case inA:
		return a, true
	}
	return b, inB
}

// compatible reports whether an offering's labels leave the parts satisfiable.
func (n nodeParts) compatible(o *cloudprovider.Offering) bool {
	return o.CompatibleWith(n[0]) && o.CompatibleWith(n[1])
}

// runsOn reports whether the DaemonSet pod may run on a node allowed by node, bought through one
// of the available offerings compatible with it.
func runsOn(ds *podInfo, node nodeParts, offerings cloudprovider.Offerings) bool {
	for _, o := range offerings {
		if !o.Available || !node.compatible(o) {
			continue
		}
		for _, term := range ds.terms {
			if may, _ := termOn(node, o.Requirements, term); may {
				return true
			}
		}
	}
	return false
}

// reachOn says on which nodes allowed by node, bought through the available offerings compatible
// with it, the DaemonSet pod runs: all when on every such offering one of its terms holds whatever
// state node leaves open, none when no term is satisfiable on any, some otherwise.
func reachOn(ds *podInfo, node nodeParts, offerings cloudprovider.Offerings) daemonReach {
	somewhere, everywhere := false, true
	for _, o := range offerings {
		if !o.Available || !node.compatible(o) {
			continue
		}
		may, sure := false, false
		for _, term := range ds.terms {
			m, s := termOn(node, o.Requirements, term)
			may, sure = may || m, sure || s
		}
		somewhere, everywhere = somewhere || may, everywhere && sure
	}
	switch {
	case !somewhere:
		return runsOnNone
	case everywhere:
		return runsOnAll
	}
	return runsOnSome
}

// termOn reports whether some node allowed by node, with the labels an offering fixes, satisfies
// term (may), and whether every such node does (sure: each label term constrains has one state
// there, a value or absence, and it satisfies term). It works key by key, on the few keys term
// constrains.
func termOn(node nodeParts, offering, term requirements.Requirements) (may, sure bool) {
	sure = true
	for _, want := range term.Items() {
		have, ok := node.get(want.Key())
		if fixed, byOffering := offering.Get(want.Key()); byOffering {
			if ok {
				have = have.Intersect(fixed)
			} else {
				have, ok = fixed, true
			}
		}
		if !ok { // a label these nodes never carry
			if !want.AllowsAbsent() {
				return false, false
			}
			continue
		}
		if !have.Intersects(want) {
			return false, false
		}
		if v, single := have.Single(); single {
			sure = sure && want.Has(v)
		} else {
			onlyAbsent := !have.IsComplement() && len(have.Values()) == 0
			sure = sure && onlyAbsent && want.AllowsAbsent()
		}
	}
	return true, sure
}
