package scheduling

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Scheduler is the part of a simulation that depends only on the NodePools, their instance
// types, the DaemonSets and the Options: each NodePool's template (its requirements narrowed by
// its instance types, the instance types converted and ordered by price, the DaemonSet overhead
// of its nodes), in weight order. Building it costs time proportional to the number of instance
// types, so it can be built once and reused for many simulations while those inputs are
// unchanged.
//
// A Scheduler is immutable once Prepare returns it: Solve never changes it, and any number of
// Solve calls may run on one Scheduler concurrently.
//
// NodePool limits are not part of it: they shrink as NodeClaims launch, so every Solve takes the
// NodePools' remaining limits itself, and Prepare ignores NodePool.Remaining. The cluster's
// storage is not read by Prepare either: WithVolumes adds it.
type Scheduler struct {
	opts  Options
	pools []*poolTemplate // in weight order
	// byName maps a NodePool name to its position in the NodePools given to Prepare.
	byName map[string]int
	// preferNoSchedule is set when some NodePool has a PreferNoSchedule taint.
	preferNoSchedule bool
	// volumes are the cluster's storage (WithVolumes); nil when unknown.
	volumes *Volumes
}

// Prepare builds a Scheduler for nodePools (their NodePool and InstanceTypes; Remaining is not
// read), daemonSetPods and opts, with the same meaning as the fields of Input. It reads nothing
// else and changes nothing in its arguments, which must not change while the Scheduler is in
// use. A NodePool that cannot launch anything does not make Prepare fail: it is skipped by every
// Solve, which gives its reason in the explanations of unschedulable pods. The error is reserved
// for future checks and is currently always nil.
func Prepare(nodePools []NodePool, daemonSetPods []*corev1.Pod, opts Options) (*Scheduler, error) {
	s := &Scheduler{opts: opts, byName: make(map[string]int, len(nodePools))}
	daemons := make([]*podInfo, 0, len(daemonSetPods))
	for _, ds := range daemonSetPods {
		daemons = append(daemons, newPodInfo(ds, false, false, nil))
	}
	for i, np := range nodePools {
		for _, t := range np.NodePool.Spec.Template.Spec.Taints {
			s.preferNoSchedule = s.preferNoSchedule || t.Effect == corev1.TaintEffectPreferNoSchedule
		}
		if _, dup := s.byName[np.NodePool.Name]; !dup {
			s.byName[np.NodePool.Name] = i
		}
		s.pools = append(s.pools, newPoolTemplate(i, np, daemons))
	}
	slices.SortStableFunc(s.pools, weightOrder)
	for i, t := range s.pools {
		t.index = i
	}
	return s, nil
}

// Options returns the options the Scheduler was prepared with.
func (s *Scheduler) Options() Options { return s.opts }

// WithVolumes returns a Scheduler like s whose simulations place a pod with volumes only where
// they can be used, as volumes (see Volumes; nil knows no storage) say. It shares s's prepared
// NodePools and leaves s unchanged.
func (s *Scheduler) WithVolumes(volumes *Volumes) *Scheduler {
	out := *s
	out.volumes = volumes
	return &out
}

// Solve places pods on the existing nodes and on new NodeClaims from the prepared NodePools, like
// the package-level Solve. remaining gives, by NodePool name, what is left of each NodePool's
// limits for this simulation, with the meaning of NodePool.Remaining; a NodePool it does not list
// (or a nil map) is unlimited. Solve reads nothing but its arguments and the Scheduler, and
// changes none of them.
//
// Results are always returned. When ctx ends first, the pods not yet placed are reported as
// unschedulable and the error is ctx.Err().
func (s *Scheduler) Solve(ctx context.Context, pods []*corev1.Pod, existing []*ExistingNode, remaining map[string]corev1.ResourceList) (*Results, error) {
	return s.solve(ctx, pods, NewNodeSet(existing), nil, s.byInput(remaining))
}

// SolveOn is Solve over a prepared set of existing nodes, leaving out the nodes whose entry in
// leave is true (leave is indexed like the set and may be shorter, or nil): a disruption pass
// prepares its nodes once and simulates the removal of each candidate by leaving it out.
func (s *Scheduler) SolveOn(ctx context.Context, pods []*corev1.Pod, set *NodeSet, leave []bool, remaining map[string]corev1.ResourceList) (*Results, error) {
	return s.solve(ctx, pods, set, leave, s.byInput(remaining))
}

// byInput indexes remaining like the NodePools given to Prepare (nil when it lists nothing).
func (s *Scheduler) byInput(remaining map[string]corev1.ResourceList) []corev1.ResourceList {
	if len(remaining) == 0 {
		return nil
	}
	out := make([]corev1.ResourceList, len(s.pools))
	for name, left := range remaining {
		if i, ok := s.byName[name]; ok {
			out[i] = left
		}
	}
	return out
}

// solve runs one simulation; remaining is indexed like the NodePools given to Prepare.
func (s *Scheduler) solve(ctx context.Context, pods []*corev1.Pod, set *NodeSet, leave []bool, remaining []corev1.ResourceList) (*Results, error) {
	sv := newSolver(s, pods, set, leave, remaining)
	sv.run(ctx)
	return sv.results(), sv.stopped
}
