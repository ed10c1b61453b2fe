package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// estimate is a cheap lower bound of the placement of q on b from resources alone: a real
// placement can only narrow the options, which never makes them cheaper. Its unit price is a
// lower bound too: coverage is at most 1, and an opening's target costs at least its cheapest
// option.
func (s *solver) estimate(q *podInfo, b *bin) (plan, bool) {
	if b.existing != nil {
		if !resources.FitsSum(&b.used, &q.requests, &b.capacity) {
			return plan{}, false
		}
		return plan{target: b, rank: b.rank(), slack: s.slackOf(&b.used, &q.requests, &b.capacity.Core)}, true
	}
	o := b.opts
	if !resources.FitsCore(&b.used, &q.requests, &o.maxAlloc) {
		return plan{}, false
	}
	idx := o.cheapestFit(b.tmpl, b.first, &b.used, &q.requests)
	if idx < 0 {
		return plan{}, false
	}
	unit := max(o.price[idx]-b.budget, 0)
	if b.id < 0 {
		unit = o.price[idx]
	}
	return plan{target: b, rank: b.rank(), unit: unit, delta: o.price[idx] - b.price, slack: s.slackOf(&b.used, &q.requests, &o.alloc[idx])}, true
}

// refusalReason collects the reason a placement was refused, when the caller wants one; only
// the first reason given is kept.
type refusalReason struct{ reason string }

func (r *refusalReason) set(format string, args ...any) {
	if r != nil && r.reason == "" {
		r.reason = fmt.Sprintf(format, args...)
	}
}

// fit checks every constraint of placing q on b and returns the placement. When refusal is not nil
// it receives the reason of a refusal. The checks run in this order, each one its own function:
// taints, host ports, node requirements, topology (topologycheck.go), then for a planned
// NodeClaim the instance types left, minValues and the NodePool's limits.
func (s *solver) fit(q *podInfo, b *bin, refusal *refusalReason) (plan, bool) {
	p := plan{target: b, rank: b.rank(), optionIndex: -1}
	if !fitsTaints(q, b, refusal) || !fitsHostPorts(q, b, refusal) {
		return p, false
	}
	term, ok := fitsNodeRequirements(q, b, refusal)
	if !ok {
		return p, false
	}
	reqs := narrowByTerm(q, b, term, &p)
	if !s.fitsTopology(q, b, &reqs, &p, refusal) {
		return p, false
	}
	if b.existing != nil {
		p.slack = s.slackOf(&b.used, &q.requests, &b.capacity.Core)
		return p, true
	}
	return p, s.fitsPlannedClaim(q, b, reqs, &p, refusal)
}

// fitsTaints checks the taints of b against the pod's tolerations: every NoSchedule and
// NoExecute taint must be tolerated, and a PreferNoSchedule one too while the pod keeps its
// preferences. A planned NodeClaim's taints are those of its NodePool, checked once per pod in
// setup (podInfo.tolerance); the taint is only looked up to explain a refusal.
func fitsTaints(q *podInfo, b *bin, refusal *refusalReason) bool {
	return len(b.taints) == 0 || taintsTolerated(q, b, refusal)
}

// taintsTolerated is fitsTaints for a bin with taints.
func taintsTolerated(q *podInfo, b *bin, refusal *refusalReason) bool {
	var t *corev1.Taint
	if b.existing != nil {
		if t = refusingTaint(q.pod.Spec.Tolerations, b.taints, q.avoidsPreferNoSchedule()); t == nil {
			return true
		}
	} else if tol := q.tolerance[b.tmpl.index]; tol != 2 && (tol != 1 || !q.avoidsPreferNoSchedule()) {
		return true
	} else if refusal != nil {
		t = refusingTaint(q.pod.Spec.Tolerations, b.taints, q.avoidsPreferNoSchedule())
	}
	if refusal != nil && t != nil {
		refusal.set("%s", taintRefusal(t))
	}
	return false
}

// refusingTaint returns the first NoSchedule or NoExecute taint the tolerations do not cover,
// else, when avoidSoft is set, the first such PreferNoSchedule taint; nil when none refuses.
func refusingTaint(tolerations []corev1.Toleration, taints []corev1.Taint, avoidSoft bool) *corev1.Taint {
	hard, soft := untolerated(tolerations, taints)
	switch {
	case hard != nil:
		return hard
	case avoidSoft:
		return soft
	}
	return nil
}

// taintRefusal is the reason a taint refusingTaint returned refuses the pod.
func taintRefusal(t *corev1.Taint) string {
	if t.Effect == corev1.TaintEffectPreferNoSchedule {
		return fmt.Sprintf("PreferNoSchedule taint %s avoided while preferences are respected", t.ToString())
	}
	return fmt.Sprintf("taint %s not tolerated", t.ToString())
}

// fitsHostPorts checks that no host port of the pod is bound on b already.
func fitsHostPorts(q *podInfo, b *bin, refusal *refusalReason) bool {
	return len(q.ports) == 0 || len(b.ports) == 0 || hostPortsFree(q, b, refusal)
}

// hostPortsFree is fitsHostPorts for a pod with host ports on a bin with some bound.
func hostPortsFree(q *podInfo, b *bin, refusal *refusalReason) bool {
	qp, conflict := conflictingPort(q.ports, b.ports)
	if conflict && refusal != nil {
		refusal.set("host port %d/%s already used on the node", qp.port, qp.protocol)
	}
	return !conflict
}

// conflictingPort returns the first of want that conflicts with one of used.
func conflictingPort(want, used []hostPort) (hostPort, bool) {
	for _, qp := range want {
		for _, bp := range used {
			if qp.conflicts(bp) {
				return qp, true
			}
		}
	}
	return hostPort{}, false
}

// fitsNodeRequirements returns the first of the pod's alternative node requirements (active) that
// b can satisfy. A planned NodeClaim is matched on its hostname separately, since its
// requirements do not hold one.
func fitsNodeRequirements(q *podInfo, b *bin, refusal *refusalReason) (int, bool) {
	var first, other requirements.Conflict
	for i := range q.active {
		c := &other
		if i == 0 {
			c = &first
		}
		if termFits(q, b, i, c) {
			return i, true
		}
	}
	if refusal != nil {
		refusal.set("%s", first.Error())
	}
	return -1, false
}

// termFits reports whether b can satisfy the pod's term i, else puts the first requirement of the
// term it cannot satisfy in c.
func termFits(q *podInfo, b *bin, i int, c *requirements.Conflict) bool {
	bad := false
	if b.existing != nil {
		*c, bad = b.reqs.FirstIncompatibility(q.active[i])
	} else if hr, ok := q.active[i].Get(karpv1.LabelHostname); ok && !hr.Matches(b.hostname, true) {
		*c, bad = requirements.Conflict{Key: karpv1.LabelHostname, Want: hr, Missing: true}, true
	} else {
		*c, bad = b.reqs.FirstIncompatibility(q.activeNoHost[i])
	}
	return !bad
}

// narrowByTerm returns the requirements of b once the pod's term joins it: those of b, narrowed by
// the term on a planned NodeClaim, whose options p.opts then tracks while they are known without a
// lookup.
func narrowByTerm(q *podInfo, b *bin, term int, p *plan) requirements.Requirements {
	reqs := b.reqs
	if b.isNew() {
		p.opts = b.opts
		if q.activeNoHost[term].Len() > 0 && reqs.Add(q.activeNoHost[term].Items()...) {
			p.narrowed, p.addsTerm, p.term = true, true, term
			p.opts = nil
		}
	}
	return reqs
}

// fitsPlannedClaim checks what is left of placing q on the planned NodeClaim b with requirements
// reqs: an instance type that takes the pod, minValues and the NodePool's limits; then prices the
// placement.
func (s *solver) fitsPlannedClaim(q *podInfo, b *bin, reqs requirements.Requirements, p *plan, refusal *refusalReason) bool {
	t := b.tmpl
	opts, from := b.opts, b.first
	if p.narrowed {
		if p.opts == nil {
			p.opts = t.optionsFor(reqs)
		}
		opts, from = p.opts, 0
	}
	idx := opts.cheapestFit(t, from, &b.used, &q.requests)
	if idx < 0 {
		refuseNoInstanceType(q, b, reqs, p.narrowed, refusal)
		return false
	}
	if !s.fitsMinValues(q, b, reqs, opts, idx, p, refusal) || !fitsLimits(b, opts, idx, refusal) {
		return false
	}
	p.reqs, p.opts, p.optionIndex = reqs, opts, idx
	p.delta = opts.price[idx] - b.price
	p.slack = s.slackOf(&b.used, &q.requests, &opts.alloc[idx])
	if b.id < 0 {
		// An opening: sizeOpening chooses its target when the caller needs it.
		p.unit, p.budget = opts.price[idx], opts.price[idx]
	} else {
		p.unit, p.budget = s.growthUnit(q, b, opts, idx), max(b.budget, opts.price[idx])
	}
	return true
}

// refuseNoInstanceType explains why no instance type of b takes the pod.
func refuseNoInstanceType(q *podInfo, b *bin, reqs requirements.Requirements, narrowed bool, refusal *refusalReason) {
	if refusal == nil {
		return
	}
	need := b.used.Plus(q.requests)
	if narrowed {
		refusal.set("no instance type compatible with %s has %s free for the pod and what is already planned", reqs, resources.Describe(need))
		return
	}
	refusal.set("no instance type has %s allocatable for the pod and the DaemonSets that would run with it", resources.Describe(need))
}

// fitsMinValues checks the NodePool's minValues against the instance types that would take the
// pod on b (from option idx of opts); under MinValuesPolicyBestEffort a shortfall relaxes them
// instead of refusing.
func (s *solver) fitsMinValues(q *podInfo, b *bin, reqs requirements.Requirements, opts *optionSet, idx int, p *plan, refusal *refusalReason) bool {
	return !b.tmpl.minValues || s.minValuesMet(q, b, reqs, opts, idx, p, refusal)
}

// minValuesMet is fitsMinValues for a NodePool with minValues.
func (s *solver) minValuesMet(q *podInfo, b *bin, reqs requirements.Requirements, opts *optionSet, idx int, p *plan, refusal *refusalReason) bool {
	t := b.tmpl
	need := b.used.Plus(q.requests)
	err := t.fittingTypes(opts, idx, &need).SatisfiesMinValues(reqs)
	switch {
	case err == nil:
		return true
	case s.opts.MinValuesPolicy == MinValuesPolicyBestEffort:
		p.minRelaxed = true
		return true
	}
	if refusal != nil {
		refusal.set("%s", err.Error())
	}
	return false
}

// fitsLimits checks that growing the planned NodeClaim b to option idx of opts (or opening it)
// keeps within the NodePool's limits.
func fitsLimits(b *bin, opts *optionSet, idx int, refusal *refusalReason) bool {
	return !b.tmpl.limits.any() || withinLimits(b, opts, idx, refusal)
}

// withinLimits is fitsLimits for a NodePool with limits.
func withinLimits(b *bin, opts *optionSet, idx int, refusal *refusalReason) bool {
	t := b.tmpl
	var before resources.Vec
	newClaims := int64(1)
	if b.id >= 0 {
		before, newClaims = t.instanceTypes[b.opts.typeIndices[b.first]].capacity, 0
	}
	ok, which := t.limits.allows(&before, &t.instanceTypes[opts.typeIndices[idx]].capacity, newClaims)
	if !ok && refusal != nil {
		refusal.set("its limits would be exceeded (%s)", which)
	}
	return ok
}
