package scheduling

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// results turns the simulation state into decisions.
func (s *solver) results() *Results {
	r := &Results{}
	for _, b := range s.bins[:s.existingCount] {
		if len(b.placed) > 0 {
			r.ExistingNodes = append(r.ExistingNodes, ExistingNodePlacement{Node: b.existing, Pods: b.pods()})
		}
	}
	budgets := make([]vec, len(s.templates))
	for i, t := range s.templates {
		budgets[i] = t.limits.remaining.minus(t.limits.reserved)
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
func (s *solver) finalizeClaim(b *bin, budget *vec) *NodeClaimPlan {
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
	var base, ceiling vec
	if t.limits.any() {
		base = t.instanceTypes[b.opts.typeIndices[b.first]].capacity
		ceiling = base.plus(*budget)
	}
	var types cloudprovider.InstanceTypes
	var zero vec
	for i := b.first; i < len(b.opts.typeIndices) && (collect == 0 || len(types) < collect); i++ {
		info := &t.instanceTypes[b.opts.typeIndices[i]]
		if !fitsCore(&b.used, &zero, &b.opts.alloc[i]) || (b.used.extended != nil && !fitsSum(&b.used, &zero, &info.alloc)) {
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
			largest = maxOf(largest, vecOf(it.Capacity))
		}
		*budget = budget.minus(largest.minus(base))
	}
	reqs := b.spec
	reqs.Add(requirements.In(karpv1.LabelInstanceType, types.Names()...))
	return &NodeClaimPlan{
		NodePool:            t.pool,
		Hostname:            b.hostname,
		Requirements:        reqs,
		InstanceTypeOptions: types,
		Requests:            b.used.list(),
		Pods:                b.pods(),
		Price:               b.price,
		MinValuesRelaxed:    b.minRelaxed,
	}
}

// withinLimited reports whether c stays under ceiling on every resource the limits cap.
func withinLimited(l *limits, c, ceiling *vec) bool {
	for i := range l.limited {
		if l.limited[i] && c.core[i] > ceiling.core[i] {
			return false
		}
	}
	for name := range l.limitedExtended {
		if c.extended[name] > ceiling.extended[name] {
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

// describeVec formats the cpu, memory and pods of v, plus any extended resource.
func describeVec(v vec) string {
	l := v.list()
	out := ""
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		if q, ok := l[name]; ok {
			if out != "" {
				out += ", "
			}
			out += string(name) + " " + q.String()
		}
	}
	for name, q := range l {
		if coreIndex(name) < 0 {
			out += ", " + string(name) + " " + q.String()
		}
	}
	return out
}
