package convert

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// maxNameLength is the longest object name the API server accepts.
const maxNameLength = 253

// kubeletGroup is the NodePools of one EC2NodeClass that have the same kubelet settings.
type kubeletGroup struct {
	// key identifies the settings ("" for none).
	key     string
	kubelet *yaml.Node
	pools   []*object
}

// moveKubelet puts the kubelet settings of converted NodePools into the EC2NodeClasses they name, where
// v1 keeps them. When the NodePools of one class disagree, the class keeps the settings of the
// NodePools without any (or else of the largest group) and every other group gets a copy of the class,
// named <class>-<first NodePool>, with its settings; the NodePools are pointed at their copy. Settings
// whose class is not among the converted inputs are reported with the YAML to add.
func (c *converter) moveKubelet() {
	classes := map[string]*object{}
	byClass := map[string][]*object{}
	var order []string
	for _, o := range c.objects {
		if o.kind == kindEC2NodeClass && o.name != "" && classes[o.name] == nil {
			classes[o.name] = o
		}
		if o.kind != kindNodePool || !o.converted {
			continue
		}
		if o.classRef == nil {
			if o.kubelet != nil {
				o.rep.fail(o.kubeletKey, o.kubeletField, "left out: the NodePool names no EC2NodeClass to move them to; add "+
					"them to its node class's spec.kubelet: %s", inline(o.kubelet))
			}
			continue
		}
		name := scalarAt(o.classRef, "name")
		if byClass[name] == nil {
			order = append(order, name)
		}
		byClass[name] = append(byClass[name], o)
	}
	for _, name := range order {
		pools := byClass[name]
		if !slices.ContainsFunc(pools, func(p *object) bool { return p.kubelet != nil }) {
			continue
		}
		class := classes[name]
		if class == nil || !class.converted {
			why := "is not among the inputs"
			if class != nil {
				why = "is already v1 and is written back unchanged"
			}
			for _, p := range pools {
				if p.kubelet != nil {
					p.rep.fail(p.kubeletKey, p.kubeletField, "left out: v1 keeps kubelet settings on the EC2NodeClass, and "+
						"EC2NodeClass %q %s; add them to its spec.kubelet: %s", name, why, inline(p.kubelet))
				}
			}
			continue
		}
		groups := groupByKubelet(pools)
		base := baseGroup(groups)
		for _, g := range groups {
			if g == base {
				if g.kubelet != nil {
					setKubelet(class, g)
					for _, p := range g.pools {
						p.rep.note(p.kubeletKey, p.kubeletField, "moved to EC2NodeClass %q spec.kubelet, where v1 keeps kubelet settings", name)
					}
				}
				continue
			}
			c.splitClass(class, classes, g)
		}
	}
}

// splitClass gives the NodePools of g a copy of class with their kubelet settings.
func (c *converter) splitClass(class *object, classes map[string]*object, g *kubeletGroup) {
	first := g.pools[0]
	name := class.name + "-" + first.name
	if classes[name] != nil || len(name) > maxNameLength {
		for _, p := range g.pools {
			p.rep.fail(p.kubeletKey, p.kubeletField, "left out: the NodePools of EC2NodeClass %q disagree on kubelet settings, "+
				"and the name %q for a copy with these is taken or too long; create a class with spec.kubelet %s and point "+
				"the NodePool at it", class.name, name, inline(g.kubelet))
		}
		return
	}
	node := deepCopy(class.node)
	set(child(node, "metadata"), "name", str(name))
	copied := &object{node: node, kind: kindEC2NodeClass, name: name, rep: class.rep, converted: true, doc: class.doc, copyOf: class,
		comment: fmt.Sprintf("A copy of EC2NodeClass %s with the kubelet settings of NodePool %s.", class.name, first.name)}
	setKubelet(copied, g)
	classes[name] = copied
	c.objects = append(c.objects, copied)
	doc := class.doc
	at := slices.Index(doc.objects, class) + 1
	for at < len(doc.objects) && doc.objects[at].copyOf == class {
		at++
	}
	doc.objects = slices.Insert(doc.objects, at, copied)
	doc.changed = true
	for _, p := range g.pools {
		set(p.classRef, "name", str(name))
		p.rep.note(p.kubeletKey, p.kubeletField, "moved to the new EC2NodeClass %q, a copy of %q: the NodePools of %q disagree "+
			"on kubelet settings, which v1 keeps on the class", name, class.name, class.name)
	}
}

// groupByKubelet groups pools by their kubelet settings, in the order the groups first appear.
func groupByKubelet(pools []*object) []*kubeletGroup {
	var groups []*kubeletGroup
	for i, p := range pools {
		key := ""
		if p.kubelet != nil {
			var err error
			if key, err = canonical(p.kubelet); err != nil {
				key = fmt.Sprintf("unreadable %d", i)
			}
		}
		j := slices.IndexFunc(groups, func(g *kubeletGroup) bool { return g.key == key })
		if j < 0 {
			groups = append(groups, &kubeletGroup{key: key, kubelet: p.kubelet})
			j = len(groups) - 1
		}
		groups[j].pools = append(groups[j].pools, p)
	}
	return groups
}

// baseGroup returns the group that keeps the original class: the NodePools without kubelet settings,
// else the largest group (the first of equals).
func baseGroup(groups []*kubeletGroup) *kubeletGroup {
	base := groups[0]
	for _, g := range groups {
		if g.key == "" {
			return g
		}
		if len(g.pools) > len(base.pools) {
			base = g
		}
	}
	return base
}

// setKubelet writes the kubelet settings of g into the class's spec, with the comments of the first
// NodePool's settings.
func setKubelet(class *object, g *kubeletGroup) {
	spec := child(class.node, "spec")
	remove(spec, "kubelet")
	put(spec, deepCopy(g.pools[0].kubeletKey), "kubelet", deepCopy(g.kubelet))
}

// inline renders n on one line (flow style) for a message.
func inline(n *yaml.Node) string {
	c := deepCopy(n)
	var flow func(*yaml.Node)
	flow = func(x *yaml.Node) {
		x.HeadComment, x.LineComment, x.FootComment = "", "", ""
		if x.Kind == yaml.MappingNode || x.Kind == yaml.SequenceNode {
			x.Style = yaml.FlowStyle
		}
		for _, k := range x.Content {
			flow(k)
		}
	}
	flow(c)
	b, err := yaml.Marshal(c)
	if err != nil {
		return "(unreadable)"
	}
	return string(trimNewline(b))
}

// trimNewline drops the trailing newline of b.
func trimNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return b[:len(b)-1]
	}
	return b
}

// nodeClaimExpiry gives each converted NodeClaim the expireAfter of its NodePool (by its
// karpenter.sh/nodepool label), as Karpenter's v1 conversion did; v1beta1 NodeClaims had none.
func (c *converter) nodeClaimExpiry() {
	pools := map[string]*object{}
	for _, o := range c.objects {
		if o.kind == kindNodePool && o.name != "" && pools[o.name] == nil {
			pools[o.name] = o
		}
	}
	for _, o := range c.objects {
		if o.kind != kindNodeClaim || !o.converted || o.nodePool == "" {
			continue
		}
		spec := value(o.node, "spec")
		if p := pools[o.nodePool]; p != nil {
			if exp := value(value(value(value(p.node, "spec"), "template"), "spec"), "expireAfter"); exp != nil {
				set(spec, "expireAfter", str(exp.Value))
				o.rep.note(value(o.node, "metadata"), "spec.expireAfter", "set to %s, its NodePool's", exp.Value)
				continue
			}
		}
		o.rep.note(value(o.node, "metadata"), "spec.expireAfter", "not set: NodePool %q is not among the inputs or has no "+
			"expireAfter, so v1 defaults it to 720h; set it to the NodePool's", o.nodePool)
	}
}
