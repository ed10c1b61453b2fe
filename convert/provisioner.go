package convert

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Consolidation policies and durations of v1 NodePools (and the v1beta1 policy v1 renamed).
const (
	policyWhenEmpty                = "WhenEmpty"
	policyWhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized"
	policyWhenUnderutilized        = "WhenUnderutilized"
	durationNever                  = karpv1.Never
	durationZero                   = "0s"
)

// provisioner converts a karpenter.sh/v1alpha5 Provisioner to a v1 NodePool, preceded by an
// EC2NodeClass when the Provisioner has an inline provider.
func (c *converter) provisioner(m *yaml.Node, rep *reporter) []*object {
	pool, meta, sk, sv := c.start(m, rep, apiV1, kindNodePool, kindProvisioner)
	spec := fieldsOf(sv, "spec")
	obj := &object{node: pool, kind: kindNodePool, name: meta.name, rep: rep, converted: true, primary: true}

	template := newMap()
	tmeta := templateMeta(rep, spec)
	if len(tmeta.Content) > 0 {
		set(template, "metadata", tmeta)
	}
	tspec := newMap()
	set(template, "spec", tspec)
	rk, rv := spec.take("requirements")
	put(tspec, rk, "requirements", c.requirements(rep, firstNode(rk, sk), rv, "spec.requirements", true))

	var class *object
	refK, refV := spec.take("providerRef")
	provK, provV := spec.take("provider")
	switch {
	case refV != nil:
		ref := nodeClassRef(rep, refV, "spec.providerRef")
		put(tspec, refK, "nodeClassRef", ref)
		obj.classRef = ec2Ref(ref)
		if provV != nil {
			rep.fail(provK, "spec.provider", "left out: a Provisioner takes providerRef or provider, not both (the alpha API rejected "+
				"both); move these settings into the node class providerRef names")
		}
	case provV != nil:
		class = c.inlineProvider(rep, provK, provV, meta.name)
		ref := newMap()
		set(ref, "group", str(groupAWS))
		set(ref, "kind", str(kindEC2NodeClass))
		set(ref, "name", str(meta.name))
		set(tspec, "nodeClassRef", ref)
		obj.classRef = ref
		rep.note(provK, "spec.provider", "became EC2NodeClass %q, which the NodePool's nodeClassRef names", meta.name)
	default:
		rep.fail(sk, "spec.providerRef", "missing: a v1 NodePool needs spec.template.spec.nodeClassRef; add providerRef naming "+
			"the AWSNodeTemplate and convert again")
	}
	spec.copyTo(tspec, "taints", "startupTaints")
	if k, v := spec.take("ttlSecondsUntilExpired"); v != nil {
		put(tspec, k, "expireAfter", durationOf(rep, v, "spec.ttlSecondsUntilExpired"))
	} else {
		set(tspec, "expireAfter", str(durationNever))
		rep.note(sk, "spec.ttlSecondsUntilExpired", "not set, so the Provisioner's nodes never expired; wrote "+
			"expireAfter: Never to keep that (v1 defaults to 720h)")
	}
	if k, v := spec.take("kubeletConfiguration"); v != nil {
		obj.kubelet = kubelet(rep, k, v, "spec.kubeletConfiguration")
		obj.kubeletKey, obj.kubeletField = k, "spec.kubeletConfiguration"
	}

	out := newMap()
	put(pool, sk, "spec", out)
	set(out, "template", template)
	set(out, "disruption", c.alphaDisruption(rep, spec, sk))
	if lk, lv := spec.take("limits"); lv != nil {
		lf := fieldsOf(lv, "spec.limits")
		_, res := lf.take("resources")
		rep.unknown(lf, kindProvisioner)
		if res != nil {
			put(out, lk, "limits", res)
		}
	}
	if k, v := spec.take("weight"); v != nil {
		put(out, k, "weight", v)
	}
	rep.unknown(spec, kindProvisioner)
	if class != nil {
		return []*object{class, obj}
	}
	return []*object{obj}
}

// alphaDisruption returns the v1 disruption block of a Provisioner's spec (whose key is sk):
// consolidation.enabled becomes WhenEmptyOrUnderutilized, ttlSecondsAfterEmpty WhenEmpty after that
// long, and neither — which never removed a node — WhenEmpty after Never.
func (c *converter) alphaDisruption(rep *reporter, spec *fields, sk *yaml.Node) *yaml.Node {
	d := newMap()
	ck, cv := spec.take("consolidation")
	enabled := false
	if cv != nil {
		cf := fieldsOf(cv, "spec.consolidation")
		_, ev := cf.take("enabled")
		rep.unknown(cf, kindProvisioner)
		if ev != nil {
			b, err := strconv.ParseBool(ev.Value)
			if err != nil {
				rep.fail(ev, "spec.consolidation.enabled", "%q is not true or false; taken as false", ev.Value)
			}
			enabled = b
		}
	}
	tk, tv := spec.take("ttlSecondsAfterEmpty")
	switch {
	case enabled:
		put(d, ck, "consolidationPolicy", str(policyWhenEmptyOrUnderutilized))
		set(d, "consolidateAfter", str(durationZero))
		if tv != nil {
			rep.fail(tk, "spec.ttlSecondsAfterEmpty", "left out: it cannot be combined with consolidation.enabled (the alpha API "+
				"rejected both); WhenEmptyOrUnderutilized removes empty nodes too, after consolidateAfter: 0s; raise "+
				"consolidateAfter if empty nodes should wait")
		}
	case tv != nil:
		set(d, "consolidationPolicy", str(policyWhenEmpty))
		put(d, tk, "consolidateAfter", durationOf(rep, tv, "spec.ttlSecondsAfterEmpty"))
	default:
		set(d, "consolidationPolicy", str(policyWhenEmpty))
		set(d, "consolidateAfter", str(durationNever))
		rep.note(sk, "spec.consolidation", "neither ttlSecondsAfterEmpty nor consolidation.enabled was set, so the "+
			"Provisioner never removed empty or underutilized nodes; wrote consolidationPolicy: WhenEmpty and "+
			"consolidateAfter: Never to keep that (v1 consolidates by default)")
	}
	return d
}

// inlineProvider converts a Provisioner's inline spec.provider to an EC2NodeClass named after the
// Provisioner, as Karpenter's own converter does.
func (c *converter) inlineProvider(rep *reporter, k, v *yaml.Node, name string) *object {
	f := fieldsOf(v, "spec.provider")
	// An inline provider could carry its own apiVersion and kind (extensions.karpenter.sh/v1alpha1 AWS).
	f.skip("apiVersion", "kind")
	class := newMap()
	set(class, "apiVersion", str(apiAWSV1))
	set(class, "kind", str(kindEC2NodeClass))
	md := newMap()
	set(md, "name", str(name))
	set(class, "metadata", md)
	// The provider block's comments describe what is now the class's spec.
	specKey := str("spec")
	specKey.HeadComment, specKey.LineComment = k.HeadComment, k.LineComment
	put(class, specKey, "spec", c.alphaNodeClassSpec(rep, f, k, "", kindProvider))
	return &object{node: class, kind: kindEC2NodeClass, name: name, rep: rep, converted: true,
		comment: fmt.Sprintf("Converted from the inline spec.provider of Provisioner %s.", name)}
}

// start begins the conversion of the input object m, of kind inKind, to a v1 object of apiVersion
// and outKind: it returns the output with apiVersion, kind and the converted metadata, that
// metadata, and the input's spec key and value. Fields of the input other than these are reported
// as unknown; a missing spec is reported and given as an empty map.
func (c *converter) start(m *yaml.Node, rep *reporter, apiVersion, outKind, inKind string) (out *yaml.Node, meta objectMeta, specKey, spec *yaml.Node) {
	root := fieldsOf(m, "")
	out = typeMeta(root, apiVersion, outKind)
	meta = c.metadata(rep, root, inKind)
	put(out, meta.key, "metadata", meta.node)
	specKey, spec = root.take("spec")
	rep.unknown(root, inKind)
	if !isMap(spec) {
		article := "a"
		if strings.ContainsRune("AEIOU", rune(inKind[0])) {
			article = "an"
		}
		rep.fail(specKey, "spec", "missing; %s %s needs a spec", article, inKind)
		spec = newMap()
	}
	return out, meta, specKey, spec
}

// typeMeta starts a v1 object: apiVersion and kind, reusing the input's key nodes (and their comments).
func typeMeta(root *fields, apiVersion, kind string) *yaml.Node {
	out := newMap()
	ak, av := root.take("apiVersion")
	kk, kv := root.take("kind")
	put(out, ak, "apiVersion", replacing(av, str(apiVersion)))
	put(out, kk, "kind", replacing(kv, str(kind)))
	return out
}

// replacing returns n carrying the comments of old, the node it replaces.
func replacing(old, n *yaml.Node) *yaml.Node {
	if old != nil {
		n.HeadComment, n.LineComment, n.FootComment = old.HeadComment, old.LineComment, old.FootComment
	}
	return n
}

// durationOf converts a whole number of seconds (such as ttlSecondsAfterEmpty, at field) to a v1
// duration: 2592000 becomes 720h, 90 becomes 1m30s. A value that is not a whole non-negative number is
// reported and becomes Never, which removes no node.
func durationOf(rep *reporter, v *yaml.Node, field string) *yaml.Node {
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if !isScalar(v) || err != nil || n < 0 {
		rep.fail(v, field, "%q is not a whole number of seconds; wrote Never instead: fix it and convert again", v.Value)
		return replacing(v, str(durationNever))
	}
	return replacing(v, str(formatSeconds(n)))
}

// formatSeconds writes seconds as hours, minutes and seconds, leaving out zero parts ("0s" for 0).
func formatSeconds(n int64) string {
	if n == 0 {
		return durationZero
	}
	var b strings.Builder
	for _, u := range []struct {
		size int64
		unit string
	}{{3600, "h"}, {60, "m"}, {1, "s"}} {
		if q := n / u.size; q > 0 {
			fmt.Fprintf(&b, "%d%s", q, u.unit)
			n -= q * u.size
		}
	}
	return b.String()
}

// templateLabels checks the labels of a NodePool template (at field): karpenter.sh/provisioner-name and
// karpenter.sh/nodepool are restricted in v1 and left out.
func templateLabels(rep *reporter, v *yaml.Node, field string) *yaml.Node {
	for _, key := range []string{labelProvisionerName, labelNodePool} {
		if k, _ := remove(v, key); k != nil {
			rep.fail(k, field+"["+key+"]", "left out: v1 reserves this label (Joiner puts %s on every node itself); "+
				"select nodes by %s instead", labelNodePool, labelNodePool)
		}
	}
	return v
}

// normalizedKey maps deprecated well-known labels to the names requirements use now.
func normalizedKey(key string) string {
	switch key {
	case "beta.kubernetes.io/arch":
		return karpv1.LabelArch
	case "beta.kubernetes.io/os":
		return karpv1.LabelOS
	case "beta.kubernetes.io/instance-type":
		return karpv1.LabelInstanceType
	case "failure-domain.beta.kubernetes.io/zone":
		return karpv1.LabelTopologyZone
	}
	return key
}

// requirements checks the requirements v (at field; findings about the list point at k) of a NodePool
// template, leaving out those v1 rejects, and with alphaDefaults adds what the v1alpha5 webhook
// defaulted.
func (c *converter) requirements(rep *reporter, k, v *yaml.Node, field string, alphaDefaults bool) *yaml.Node {
	switch {
	case v == nil:
		v = newSeq()
	case !isSeq(v):
		rep.fail(k, field, "not a list, left out; write requirements as a list of {key, operator, values}")
		v = newSeq()
	}
	keys := map[string]bool{}
	kept := v.Content[:0]
	for i, it := range v.Content {
		key := scalarAt(it, "key")
		itemField := fmt.Sprintf("%s[%d]", field, i)
		switch key {
		case labelProvisionerName, labelNodePool:
			rep.fail(it, itemField, "left out: a NodePool may not require %s (v1 rejects it; Joiner sets %s on its nodes); "+
				"workloads select a NodePool with %s", key, labelNodePool, labelNodePool)
			continue
		case labelInstancePods:
			rep.fail(it, itemField, "left out: v1 has no %s label; constrain %s or %s instead, or cap pods with the "+
				"EC2NodeClass's kubelet maxPods", labelInstancePods, awsv1.LabelInstanceCPU, awsv1.LabelInstanceMemory)
			continue
		}
		keys[normalizedKey(key)] = true
		kept = append(kept, it)
	}
	v.Content = kept
	if !alphaDefaults || c.opts.IgnoreDefaults {
		return v
	}
	var added []string
	add := func(key, op string, values ...string) {
		if keys[key] {
			return
		}
		req := newMap()
		set(req, "key", str(key))
		set(req, "operator", str(op))
		vals := newSeq()
		vals.Style = yaml.FlowStyle
		for _, val := range values {
			vals.Content = append(vals.Content, str(val))
		}
		set(req, "values", vals)
		v.Content = append(v.Content, req)
		added = append(added, fmt.Sprintf("%s %s [%s]", key, op, strings.Join(values, ",")))
	}
	add(karpv1.LabelOS, "In", karpv1.OSLinux)
	add(karpv1.LabelArch, "In", karpv1.ArchitectureAmd64)
	add(karpv1.CapacityTypeLabelKey, "In", karpv1.CapacityTypeOnDemand)
	if !keys[karpv1.LabelInstanceType] && !keys[awsv1.LabelInstanceFamily] && !keys[awsv1.LabelInstanceCategory] &&
		!keys[awsv1.LabelInstanceGeneration] {
		add(awsv1.LabelInstanceCategory, "In", "c", "m", "r")
		add(awsv1.LabelInstanceGeneration, "Gt", "2")
	}
	if len(added) > 0 {
		rep.note(k, field, "added what the v1alpha5 webhook defaulted and v1 does not: %s (pass --ignore-defaults to "+
			"leave them out)", strings.Join(added, "; "))
	}
	return v
}

// kubelet checks kubelet settings v (whose key is k, at field) on their way to an EC2NodeClass's
// spec.kubelet: it leaves out, and reports, containerRuntime and what v1 does not know. It returns
// nil when nothing is left.
func kubelet(rep *reporter, k, v *yaml.Node, field string) *yaml.Node {
	if !isMap(v) {
		rep.fail(k, field, "not a mapping, left out")
		return nil
	}
	known := map[string]bool{}
	for _, f := range kubeletFields() {
		known[f] = true
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		key := v.Content[i]
		switch {
		case known[key.Value]:
			continue
		case key.Value == "containerRuntime":
			rep.fail(key, field+".containerRuntime", "left out: v1 runs containerd only; remove it")
		default:
			rep.fail(key, joinPath(field, key.Value), "left out: not a kubelet setting of EC2NodeClass spec.kubelet; set it "+
				"through the class's userData instead")
		}
		v.Content = append(v.Content[:i:i], v.Content[i+2:]...)
		i -= 2
	}
	if len(v.Content) == 0 {
		return nil
	}
	return v
}

// nodeClassRef converts a v1alpha5 providerRef or v1beta1 nodeClassRef {apiVersion, kind, name} (v, at
// field) to a v1 nodeClassRef {group, kind, name}. A missing or legacy kind (AWSNodeTemplate) becomes
// EC2NodeClass in karpenter.k8s.aws.
func nodeClassRef(rep *reporter, v *yaml.Node, field string) *yaml.Node {
	ref := newMap()
	ref.Style = v.Style
	f := fieldsOf(v, field)
	nk, nv := f.take("name")
	_, kv := f.take("kind")
	_, av := f.take("apiVersion")
	_, gv := f.take("group")
	rep.unknown(f, "nodeClassRef")
	kind, group := scalarAt(v, "kind"), scalarAt(v, "group")
	if group == "" && av != nil {
		group, _, _ = strings.Cut(av.Value, "/")
	}
	switch {
	case (kind == "" || kind == kindAWSNodeTemplate || kind == kindEC2NodeClass) && (group == "" || group == groupAWS):
		kind, group = kindEC2NodeClass, groupAWS
	default:
		rep.fail(kv, field, "names %s in group %q, which Joiner does not know; point it at an EC2NodeClass (%s) or a "+
			"LocalNodeClass (joiner.dev)", kind, group, groupAWS)
	}
	set(ref, "group", replacing(firstNode(gv, av), str(group)))
	set(ref, "kind", replacing(kv, str(kind)))
	if nv == nil || nv.Value == "" {
		rep.fail(nk, field+".name", "missing; name the node class")
		nv = str("")
	}
	set(ref, "name", nv)
	return ref
}

// firstNode returns the first non-nil node.
func firstNode(ns ...*yaml.Node) *yaml.Node {
	for _, n := range ns {
		if n != nil {
			return n
		}
	}
	return nil
}

// ec2Ref returns ref when it names an EC2NodeClass, else nil.
func ec2Ref(ref *yaml.Node) *yaml.Node {
	if scalarAt(ref, "group") == groupAWS && scalarAt(ref, "kind") == kindEC2NodeClass {
		return ref
	}
	return nil
}
