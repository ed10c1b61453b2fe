package convert

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Options tune a conversion. The zero value converts as Karpenter's documented migration does: AMI
// aliases at "latest", the v1alpha5 requirement defaults written out, and node classes without an
// instance profile reported rather than given a role.
type Options struct {
	// Role is written as spec.role of a converted EC2NodeClass that names neither a role nor an
	// instance profile (the alpha API fell back to the global aws.defaultInstanceProfile setting, which
	// v1 removed). Empty leaves such a class without one and reports it.
	Role string
	// AMIAliasVersion is the version of the amiSelectorTerms alias written for a node class that chose
	// its AMIs by amiFamily alone. Empty means "latest", which moves nodes to each new AMI release as the
	// old APIs did; a release version pins it. Windows families accept only "latest".
	AMIAliasVersion string
	// IgnoreDefaults leaves out the requirements the v1alpha5 webhook added to a Provisioner that did
	// not set them (linux, amd64, on-demand, and c/m/r instances of generation > 2).
	IgnoreDefaults bool
}

// Output is the converted content of one Input.
type Output struct {
	// Name and Rel are those of the Input.
	Name, Rel string
	// Data is the converted multi-document YAML.
	Data []byte
}

// Result is what Convert produced: one Output per Input, in order, and the findings.
type Result struct {
	Outputs  []Output
	Findings []Finding
	// Converted counts the objects written in a new form (including generated EC2NodeClasses);
	// Unchanged counts those written back as they were.
	Converted, Unchanged int
}

// Empty reports whether the inputs held no object at all (only comments, or nothing).
func (r *Result) Empty() bool { return r.Converted+r.Unchanged == 0 }

// Failed reports whether a finding is an error: something was not converted or was dropped.
func (r *Result) Failed() bool {
	for _, f := range r.Findings {
		if f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Joined returns every output as one multi-document YAML stream.
func (r *Result) Joined() []byte {
	var b bytes.Buffer
	for _, o := range r.Outputs {
		if len(o.Data) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("---\n")
		}
		b.Write(o.Data)
	}
	return b.Bytes()
}

// WriteDir writes each non-empty output to dir, at its Rel path, creating folders as needed. It
// refuses to overwrite an input, and two outputs with the same path.
func (r *Result) WriteDir(dir string) error {
	inputs := map[string]bool{}
	for _, o := range r.Outputs {
		if o.Name != stdinName {
			if abs, err := filepath.Abs(o.Name); err == nil {
				inputs[abs] = true
			}
		}
	}
	written := map[string]string{}
	for _, o := range r.Outputs {
		if len(o.Data) == 0 {
			continue
		}
		path := filepath.Join(dir, o.Rel)
		abs, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if inputs[abs] {
			return fmt.Errorf("write %s: it is an input; choose an output folder that holds no input", path)
		}
		if first, dup := written[abs]; dup {
			return fmt.Errorf("write %s: both %s and %s would be written there; convert them into different folders",
				path, displayName(first), displayName(o.Name))
		}
		written[abs] = o.Name
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := os.WriteFile(path, o.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// document is one YAML document of an input.
type document struct {
	// text is the document as read, written back when nothing in it changed.
	text []byte
	// root is the parsed document node; nil for a document of comments only.
	root *yaml.Node
	// changed says the document is written from objects (or list) instead of text.
	changed bool
	// objects are the objects written for the document, each as its own YAML document, or as the
	// items of list.
	objects []*object
	// list is the mapping of a List document whose items are objects.
	list *yaml.Node
}

// object is one object written to the output.
type object struct {
	// node is the object's mapping.
	node *yaml.Node
	// kind and name are the object's, as written to the output.
	kind, name string
	rep        *reporter
	// converted is false for an object written back unchanged.
	converted bool
	// primary marks the object that replaces the document's own, which keeps the document's comments.
	primary bool
	// comment is written before a generated object.
	comment string
	// doc is the document the object is written in.
	doc *document
	// copyOf is the EC2NodeClass a generated class copies.
	copyOf *object

	// kubelet are kubelet settings of a NodePool that move to its EC2NodeClass; kubeletKey and
	// kubeletField locate them in the input.
	kubelet      *yaml.Node
	kubeletKey   *yaml.Node
	kubeletField string
	// classRef is the nodeClassRef mapping of a NodePool that points at an EC2NodeClass.
	classRef *yaml.Node
	// nodePool is the NodePool a converted NodeClaim takes its expireAfter from.
	nodePool string
}

// converter holds the state of one Convert call.
type converter struct {
	opts     Options
	findings []Finding
	objects  []*object
}

// Convert converts inputs. Objects of the legacy kinds become v1 objects; other objects get the
// legacy Karpenter annotations and labels renamed; objects in v1, and objects that need no change,
// are written back byte for byte. It returns an error only for input it cannot parse, or when ctx is
// done (checked between documents); everything else is in the Result's findings.
func Convert(ctx context.Context, inputs []Input, opts Options) (*Result, error) {
	c := &converter{opts: opts}
	docs := make([][]*document, len(inputs))
	for i, in := range inputs {
		d, err := c.input(ctx, in)
		if err != nil {
			return nil, err
		}
		docs[i] = d
	}
	c.checkNames()
	c.moveKubelet()
	c.nodeClaimExpiry()
	order := map[string]int{}
	for i, in := range inputs {
		order[in.Name] = i
	}
	slices.SortStableFunc(c.findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(order[a.Source], order[b.Source]), cmp.Compare(a.Line, b.Line))
	})
	res := &Result{Findings: c.findings}
	for i, in := range inputs {
		data, err := render(docs[i])
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", displayName(in.Name), err)
		}
		res.Outputs = append(res.Outputs, Output{Name: in.Name, Rel: in.Rel, Data: data})
	}
	for _, o := range c.objects {
		if o.converted {
			res.Converted++
		} else {
			res.Unchanged++
		}
	}
	return res, nil
}

// input parses and converts the documents of one input.
func (c *converter) input(ctx context.Context, in Input) ([]*document, error) {
	var docs []*document
	for n, ch := range splitDocuments(in.Data) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("convert %s: stopped: %w", displayName(in.Name), context.Cause(ctx))
		}
		d := &document{text: ch.text}
		docs = append(docs, d)
		if onlyComments(ch.text) {
			continue
		}
		var root yaml.Node
		if err := yaml.Unmarshal(ch.text, &root); err != nil {
			return nil, fmt.Errorf("%s: document %d (starting at line %d): not valid YAML: %w", displayName(in.Name), n+1, ch.line, err)
		}
		d.root = &root
		if len(root.Content) == 0 || !isMap(root.Content[0]) {
			continue
		}
		c.document(in.Name, ch.line, d)
	}
	return docs, nil
}

// document converts the object, or the items of the List, that d holds.
func (c *converter) document(source string, line int, d *document) {
	m := d.root.Content[0]
	if items := value(m, "items"); strings.HasSuffix(scalarAt(m, "kind"), "List") && isSeq(items) {
		var objs []*object
		for _, it := range items.Content {
			if !isMap(it) {
				objs = append(objs, &object{node: it, doc: d})
				continue
			}
			out := c.object(it, c.reporter(source, line, it))
			for _, o := range out {
				o.doc = d
				d.changed = d.changed || o.converted
			}
			objs = append(objs, out...)
		}
		if len(objs) != len(items.Content) {
			d.changed = true
		}
		d.objects, d.list = objs, m
		return
	}
	out := c.object(m, c.reporter(source, line, m))
	for _, o := range out {
		o.doc = d
		d.changed = d.changed || o.converted
	}
	if len(out) != 1 {
		d.changed = true
	}
	d.objects = out
}

// reporter returns the reporter of the object m of a document starting at line of source.
func (c *converter) reporter(source string, line int, m *yaml.Node) *reporter {
	name := scalarAt(value(m, "metadata"), "name")
	if name == "" {
		name = "(no name)"
	}
	return &reporter{source: source, firstLine: line, object: scalarAt(m, "kind") + "/" + name, findings: &c.findings}
}

// object converts one object and returns what to write for it: nothing (it cannot be converted), the
// object, or the object and the EC2NodeClass made from a Provisioner's inline provider.
func (c *converter) object(m *yaml.Node, rep *reporter) []*object {
	apiVersion, kind := scalarAt(m, "apiVersion"), scalarAt(m, "kind")
	var out []*object
	switch {
	case apiVersion == apiAlpha5 && kind == kindProvisioner:
		out = c.provisioner(m, rep)
	case apiVersion == apiAlpha5 && kind == kindMachine:
		rep.fail(m, "", "not converted, and left out: Machines are created by the controller and are not migrated "+
			"by manifest; Joiner creates NodeClaims from NodePools. Convert the Provisioner instead")
		return nil
	case apiVersion == apiAWSAlpha1 && kind == kindAWSNodeTemplate:
		out = []*object{c.nodeTemplate(m, rep)}
	case apiVersion == apiBeta1 && kind == kindNodePool:
		out = []*object{c.betaNodePool(m, rep)}
	case apiVersion == apiBeta1 && kind == kindNodeClaim:
		out = []*object{c.betaNodeClaim(m, rep)}
	case apiVersion == apiAWSBeta1 && kind == kindEC2NodeClass:
		out = []*object{c.betaNodeClass(m, rep)}
	case apiVersion == apiV1 && (kind == kindNodePool || kind == kindNodeClaim), apiVersion == apiAWSV1 && kind == kindEC2NodeClass:
		out = []*object{c.unchanged(m, rep)}
	case strings.HasPrefix(apiVersion, groupKarpenter+"/") || strings.HasPrefix(apiVersion, groupAWS+"/"):
		rep.fail(value(m, "apiVersion"), "apiVersion", "no conversion for kind %s in %s, written back unchanged: check apiVersion and kind", kind, apiVersion)
		out = []*object{c.unchanged(m, rep)}
	default:
		o := c.unchanged(m, rep)
		o.converted = renameLegacyKeys(rep, m, "")
		out = []*object{o}
	}
	c.objects = append(c.objects, out...)
	return out
}

// unchanged returns the object m as written.
func (c *converter) unchanged(m *yaml.Node, rep *reporter) *object {
	return &object{node: m, kind: scalarAt(m, "kind"), name: scalarAt(value(m, "metadata"), "name"), rep: rep, primary: true}
}

// checkNames reports two objects of the same kind and name in the output, such as an EC2NodeClass
// made from a Provisioner's inline provider and an AWSNodeTemplate of the same name.
func (c *converter) checkNames() {
	seen := map[string]*object{}
	for _, o := range c.objects {
		if o.name == "" || (o.kind != kindNodePool && o.kind != kindEC2NodeClass && o.kind != kindNodeClaim) {
			continue
		}
		key := o.kind + "/" + o.name
		if first, dup := seen[key]; dup {
			o.rep.fail(o.node, "metadata.name", "the output holds %s %q twice (also from %s); rename one and convert again",
				o.kind, o.name, first.rep.object)
			continue
		}
		seen[key] = o
	}
}

// render writes the documents of one input.
func render(docs []*document) ([]byte, error) {
	var parts [][]byte
	for _, d := range docs {
		if !d.changed {
			parts = append(parts, withNewline(d.text))
			continue
		}
		if d.list != nil {
			items := value(d.list, "items")
			items.Content = items.Content[:0]
			for _, o := range d.objects {
				items.Content = append(items.Content, o.node)
			}
			b, err := encode(d.root)
			if err != nil {
				return nil, err
			}
			parts = append(parts, b)
			continue
		}
		for _, o := range d.objects {
			doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: o.comment, Content: []*yaml.Node{o.node}}
			if o.primary {
				doc = d.root
				doc.Content = []*yaml.Node{o.node}
			}
			b, err := encode(doc)
			if err != nil {
				return nil, err
			}
			parts = append(parts, b)
		}
	}
	return bytes.Join(parts, []byte("---\n")), nil
}

// encode writes one YAML document with two-space indentation, sequences not indented under their key
// (as kubectl writes them).
func encode(doc *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	return b.Bytes(), nil
}

// withNewline returns text ending in a newline.
func withNewline(text []byte) []byte {
	if len(text) > 0 && text[len(text)-1] != '\n' {
		return append(bytes.Clone(text), '\n')
	}
	return text
}
