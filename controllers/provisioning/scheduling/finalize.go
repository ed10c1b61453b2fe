package scheduling

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// results turns the simulation state into decisions.
func (s *solver) results() *Results {
	r := &Results{}
	for _, b := range s.bins[:s.existingCount] {
		if len(b.placed) > 0 {
			r.ExistingNodes = append(r.ExistingNodes, ExistingNodePlacement{Node: b.existing, Pods: b.pods()})
		}
	}
	budgets := make([]resources.Vec, len(s.templates))
	for i, t := range s.templates {
		budgets[i] = t.limits.remaining.Minus(t.limits.reserved)
	}
	for _, b := range s.bins[s.existingCount:] {
		if len(b.placed) == 0 {
			continue // emptied by the improvement pass
		}
		r.NewNodeClaims = append(r.NewNodeClaims, s.finalizeClaim(b, &budgets[b.tmpl.index]))
	}
	for _, p := range s.pods {
		if p.err != nil {
			r.PodErrors = append(r.PodErrors, PodError{Pod: p.pod, Err: p.err})
		}
	}
	for _, p := range s.failed {
		r.PodErrors = append(r.PodErrors, PodError{Pod: p.pod, Err: s.explain(p)})
	}
	return r
}

// finalizeClaim lists the instance types that fit the NodeClaim's pods, cheapest first, keeps
// within the NodePool's limits (the largest option of each NodeClaim may only use what budget
// has left) and truncates to MaxInstanceTypes.
func (s *solver) finalizeClaim(b *bin, budget *resources.Vec) *NodeClaimPlan {
	t := b.tmpl
	limit := s.opts.MaxInstanceTypes
	if limit <= 0 {
		limit = DefaultMaxInstanceTypes
	}
	// Without minValues, the first limit fitting types are all that can be kept.
	collect := limit
	if b.spec.HasMinValues() {
		collect = 0
	}
	var base, ceiling resources.Vec
	if t.limits.any() {
		base = t.instanceTypes[b.opts.typeIndices[b.first]].capacity
		ceiling = base.Plus(*budget)
	}
	var types cloudprovider.InstanceTypes
	var zero resources.Vec
	for i := b.first; i < len(b.opts.typeIndices) && (collect == 0 || len(types) < collect); i++ {
		info := &t.instanceTypes[b.opts.typeIndices[i]]
		if !resources.FitsCore(&b.used, &zero, &b.opts.alloc[i]) || (b.used.Extended != nil && !resources.FitsSum(&b.used, &zero, &info.alloc)) {
			continue
		}
		if t.limits.any() && !withinLimited(&t.limits, &info.capacity, &ceiling) {
			continue
		}
		types = append(types, info.instanceType)
	}
	if truncated, err := types.Truncate(b.spec, limit); err == nil || s.opts.MinValuesPolicy == MinValuesPolicyBestEffort {
		types = truncated
	}
	if t.limits.any() {
		largest := base
		for _, it := range types {
			largest = resources.Max(largest, resources.Of(it.Capacity))
		}
		*budget = budget.Minus(largest.Minus(base))
	}
	reqs := b.spec
	reqs.Add(requirements.In(karpv1.LabelInstanceType, types.Names()...))
	return &NodeClaimPlan{
		NodePool:            t.pool,
		Hostname:            b.hostname,
		Requirements:        reqs,
		InstanceTypeOptions: types,
		Requests:            b.used.List(),
		Pods:                b.pods(),
		Price:               b.price,
		MinValuesRelaxed:    b.minRelaxed,
	}
}

// withinLimited reports whether c stays under ceiling on every resource the limits cap.
func withinLimited(l *limits, c, ceiling *resources.Vec) bool {
	for i := range l.limited {
		if l.limited[i] && c.Core[i] > ceiling.Core[i] {
			return false
		}
	}
	for name := range l.limitedExtended {
		if c.Extended[name] > ceiling.Extended[name] {
			return false
		}
	}
	return true
}

// NodeClaim returns the NodeClaim to create for the plan: named after its NodePool
// (generateName), with the template's labels, annotations, taints, startup taints, node class,
// expiry and termination grace period, the template's hash annotations (karpenter.sh/nodepool-hash
// and karpenter.sh/nodepool-hash-version), an owner reference to the NodePool (deleting the
// NodePool deletes its NodeClaims), the plan's requirements (hostname left out) and requests.
func (p *NodeClaimPlan) NodeClaim() *karpv1.NodeClaim {
	tmpl := &p.NodePool.Spec.Template
	labels := map[string]string{}
	maps.Copy(labels, tmpl.Labels)
	for k, v := range p.Requirements.Labels() {
		if k != karpv1.LabelHostname {
			labels[k] = v
		}
	}
	labels[karpv1.NodePoolLabelKey] = p.NodePool.Name
	var annotations map[string]string
	if len(tmpl.Annotations) > 0 {
		annotations = maps.Clone(tmpl.Annotations)
	}
	set := func(key, value string) {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[key] = value
	}
	if p.MinValuesRelaxed {
		set(karpv1.NodeClaimMinValuesRelaxedAnnotationKey, "true")
	}
	// The hash of the template it is built from, and the hash scheme's version: static drift
	// compares them with the NodePool's.
	set(karpv1.NodePoolHashAnnotationKey, p.NodePool.Hash())
	set(karpv1.NodePoolHashVersionAnnotationKey, karpv1.NodePoolHashVersion)
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    p.NodePool.Name + "-",
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{p.NodePool.OwnerReference()},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints:                 tmpl.Spec.Taints,
			StartupTaints:          tmpl.Spec.StartupTaints,
			Requirements:           p.Requirements.NodeSelectorRequirements(karpv1.LabelHostname),
			Resources:              karpv1.ResourceRequirements{Requests: p.Requests},
			NodeClassRef:           tmpl.Spec.NodeClassRef,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
		},
	}
	return nc.DeepCopy()
}

// InstanceTypeNames returns the names of the plan's instance-type options, cheapest first.
func (p *NodeClaimPlan) InstanceTypeNames() []string {
	return cloudprovider.InstanceTypes(p.InstanceTypeOptions).Names()
}
