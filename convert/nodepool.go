package convert

import (
	"go.yaml.in/yaml/v3"
)

// betaNodePool converts a karpenter.sh/v1beta1 NodePool to v1: expireAfter moves into the template,
// WhenUnderutilized becomes WhenEmptyOrUnderutilized, nodeClassRef gets a group, and kubelet
// settings move to the EC2NodeClass.
func (c *converter) betaNodePool(m *yaml.Node, rep *reporter) *object {
	pool, meta, sk, sv := c.start(m, rep, apiV1, kindNodePool, kindNodePool)
	spec := fieldsOf(sv, "spec")
	obj := &object{node: pool, kind: kindNodePool, name: meta.name, rep: rep, converted: true, primary: true}
	out := newMap()
	put(pool, sk, "spec", out)

	tk, tv := spec.take("template")
	tf := fieldsOf(tv, "spec.template")
	template := newMap()
	put(out, tk, "template", template)
	if mk, mv := tf.take("metadata"); mv != nil {
		mf := fieldsOf(mv, "spec.template.metadata")
		tmeta := templateMeta(rep, mf)
		rep.unknown(mf, kindNodePool)
		put(template, mk, "metadata", tmeta)
	}
	sKey, sVal := tf.take("spec")
	rep.unknown(tf, kindNodePool)
	if !isMap(sVal) {
		rep.fail(firstNode(tk, sk), "spec.template.spec", "missing; a NodePool needs a template spec with requirements and nodeClassRef")
	}
	sf := fieldsOf(sVal, "spec.template.spec")
	tspec := newMap()
	put(template, sKey, "spec", tspec)
	if ref := c.claimSpec(rep, sf, sKey, tspec); ref != nil {
		obj.classRef = ec2Ref(ref)
	}
	sf.copyTo(tspec, "taints", "startupTaints")
	if k, v := sf.take("kubelet"); v != nil {
		obj.kubelet = kubelet(rep, k, v, "spec.template.spec.kubelet")
		obj.kubeletKey, obj.kubeletField = k, "spec.template.spec.kubelet"
	}
	if k, v := sf.take("resources"); v != nil {
		rep.fail(k, "spec.template.spec.resources", "left out: v1 NodePool templates have no resources; NodeClaims get their "+
			"requests from the pods they are launched for")
	}
	rep.unknown(sf, kindNodePool)

	if dk, dv := spec.take("disruption"); dv != nil {
		put(out, dk, "disruption", betaDisruption(rep, dk, dv, tspec))
	}
	spec.copyTo(out, "limits", "weight")
	rep.unknown(spec, kindNodePool)
	return obj
}

// betaDisruption converts a v1beta1 disruption block (v, key k) and moves its expireAfter into the
// template spec tspec.
func betaDisruption(rep *reporter, k, v, tspec *yaml.Node) *yaml.Node {
	f := fieldsOf(v, "spec.disruption")
	d := newMap()
	if ek, ev := f.take("expireAfter"); ev != nil {
		put(tspec, ek, "expireAfter", ev)
	}
	pk, pv := f.take("consolidationPolicy")
	ak, av := f.take("consolidateAfter")
	policy := ""
	if pv != nil {
		policy = pv.Value
	}
	switch policy {
	case "", policyWhenUnderutilized:
		put(d, pk, "consolidationPolicy", replacing(pv, str(policyWhenEmptyOrUnderutilized)))
		if av != nil && av.Value != durationNever {
			put(d, ak, "consolidateAfter", av)
			break
		}
		put(d, ak, "consolidateAfter", replacing(av, str(durationZero)))
		if av != nil {
			rep.note(ak, "spec.disruption.consolidateAfter", "v1beta1 ignored Never with %s; wrote 0s, which is what it did",
				policyWhenUnderutilized)
		}
	case policyWhenEmpty:
		put(d, pk, "consolidationPolicy", pv)
		if av != nil {
			put(d, ak, "consolidateAfter", av)
			break
		}
		set(d, "consolidateAfter", str(durationNever))
		rep.note(firstNode(pk, k), "spec.disruption.consolidateAfter", "not set with WhenEmpty, which v1 requires; wrote Never, "+
			"so empty nodes are not removed: set a duration if they should be")
	default:
		rep.fail(pv, "spec.disruption.consolidationPolicy", "%q is not a consolidation policy; written as is: use WhenEmpty or "+
			"WhenEmptyOrUnderutilized", policy)
		put(d, pk, "consolidationPolicy", pv)
		if av != nil {
			put(d, ak, "consolidateAfter", av)
		}
	}
	if bk, bv := f.take("budgets"); bv != nil {
		put(d, bk, "budgets", bv)
	}
	rep.unknown(f, kindNodePool)
	return d
}

// betaNodeClaim converts a karpenter.sh/v1beta1 NodeClaim to v1. Joiner creates NodeClaims from
// NodePools; one applied by hand launches a node. Its expireAfter is its NodePool's (see
// nodeClaimExpiry).
func (c *converter) betaNodeClaim(m *yaml.Node, rep *reporter) *object {
	claim, meta, sk, sv := c.start(m, rep, apiV1, kindNodeClaim, kindNodeClaim)
	spec := fieldsOf(sv, "spec")
	out := newMap()
	put(claim, sk, "spec", out)
	c.claimSpec(rep, spec, sk, out)
	spec.copyTo(out, "taints", "startupTaints", "resources")
	if k, v := spec.take("kubelet"); v != nil {
		rep.fail(k, "spec.kubelet", "left out: a v1 NodeClaim has no kubelet settings; they belong in the EC2NodeClass's "+
			"spec.kubelet (a NodeClaim's spec cannot change once created)")
	}
	rep.unknown(spec, kindNodeClaim)
	return &object{node: claim, kind: kindNodeClaim, name: meta.name, rep: rep, converted: true, primary: true,
		nodePool: scalarAt(value(meta.node, "labels"), labelNodePool)}
}

// templateMeta takes the labels (checked by templateLabels) and annotations (renamed) of f into a
// new NodeClaim template metadata mapping.
func templateMeta(rep *reporter, f *fields) *yaml.Node {
	tmeta := newMap()
	if k, v := f.take("labels"); v != nil {
		put(tmeta, k, "labels", templateLabels(rep, v, f.field("labels")))
	}
	if k, v := f.take("annotations"); isMap(v) {
		renameAnnotations(rep, v, f.field("annotations"))
		put(tmeta, k, "annotations", v)
	}
	return tmeta
}

// claimSpec converts the requirements and the nodeClassRef of a v1beta1 NodeClaim spec, or of a
// NodePool's template spec, f (key sk) into out. It returns the converted nodeClassRef, or nil when
// it is missing, which it reports.
func (c *converter) claimSpec(rep *reporter, f *fields, sk, out *yaml.Node) *yaml.Node {
	rk, rv := f.take("requirements")
	put(out, rk, "requirements", c.requirements(rep, firstNode(rk, sk), rv, f.field("requirements"), false))
	k, v := f.take("nodeClassRef")
	if v == nil {
		rep.fail(sk, f.field("nodeClassRef"), "missing: v1 requires it; name the EC2NodeClass")
		return nil
	}
	ref := nodeClassRef(rep, v, f.field("nodeClassRef"))
	put(out, k, "nodeClassRef", ref)
	return ref
}
