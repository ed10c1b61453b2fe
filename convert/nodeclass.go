package convert

import (
	"strings"

	"go.yaml.in/yaml/v3"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// The v1alpha1 and v1beta1 defaults of spec.metadataOptions. v1 lowered the hop limit to 1, which keeps
// pods without host networking from reaching the instance metadata service, so converted classes carry
// the old value explicitly.
const (
	legacyHTTPEndpoint     = "enabled"
	legacyHTTPProtocolIPv6 = "disabled"
	legacyHopLimit         = 2
	legacyHTTPTokens       = "required"
	// maxSelectorTerms is v1's limit on the terms of each selector.
	maxSelectorTerms = 30
	// amiFamilyUbuntu is the v1beta1 family v1 removed.
	amiFamilyUbuntu = "Ubuntu"
)

// nodeTemplate converts a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate to a v1 EC2NodeClass.
func (c *converter) nodeTemplate(m *yaml.Node, rep *reporter) *object {
	class, meta, sk, sv := c.start(m, rep, apiAWSV1, kindEC2NodeClass, kindAWSNodeTemplate)
	put(class, sk, "spec", c.alphaNodeClassSpec(rep, fieldsOf(sv, "spec"), firstNode(sk, m), meta.aliasVersion, kindAWSNodeTemplate))
	return &object{node: class, kind: kindEC2NodeClass, name: meta.name, rep: rep, converted: true, primary: true}
}

// alphaNodeClassSpec converts the spec of an AWSNodeTemplate, or a Provisioner's inline provider (kind
// kindProvider), to an EC2NodeClass spec. Findings about missing fields point at at.
func (c *converter) alphaNodeClassSpec(rep *reporter, f *fields, at *yaml.Node, aliasVersion, kind string) *yaml.Node {
	out := newMap()
	famK, famV := f.take("amiFamily")
	var amiK, amiTerms *yaml.Node
	if kind != kindProvider {
		var amiV *yaml.Node
		if amiK, amiV = f.take("amiSelector"); amiV != nil {
			amiTerms = selectorTerms(rep, amiK, amiV, f.field("amiSelector"), selectAMIs)
		}
	}
	c.amiSelection(rep, out, amiSelection{famK: famK, famV: famV, famField: f.field("amiFamily"), termsK: amiK, terms: amiTerms,
		aliasVersion: aliasVersion, at: at})
	for _, s := range []struct {
		from, to string
		what     selectorKind
	}{{"subnetSelector", "subnetSelectorTerms", selectSubnets}, {"securityGroupSelector", "securityGroupSelectorTerms", selectSecurityGroups}} {
		k, v := f.take(s.from)
		if v == nil {
			if _, lt := lookup(f.node, "launchTemplate"); lt == nil || s.what == selectSubnets {
				rep.fail(at, f.field(s.from), "missing: v1 requires %s; add them to the EC2NodeClass", s.to)
			}
			continue
		}
		if terms := selectorTerms(rep, k, v, f.field(s.from), s.what); terms != nil {
			put(out, k, s.to, terms)
		}
	}
	ipK, ipV := f.take("instanceProfile")
	c.identity(rep, out, at, nil, nil, ipK, ipV, f.field("instanceProfile"))
	if k, v := f.take("launchTemplate"); v != nil {
		rep.fail(k, f.field("launchTemplate"), "left out: v1 has no launchTemplate; write its settings as EC2NodeClass fields "+
			"(securityGroupSelectorTerms, blockDeviceMappings, metadataOptions, userData with amiFamily Custom...)")
	}
	copied := []string{"userData", "tags", "metadataOptions", "blockDeviceMappings", "detailedMonitoring", "context"}
	if kind == kindProvider {
		copied = []string{"tags", "metadataOptions", "blockDeviceMappings", "context"}
	}
	for _, key := range copied {
		k, v := f.take(key)
		switch key {
		case "tags":
			if v != nil {
				put(out, k, key, tags(rep, v, f.field(key)))
			}
		case "metadataOptions":
			put(out, k, key, metadataOptions(rep, k, v, f.field(key), at))
		default:
			if v != nil {
				put(out, k, key, v)
			}
		}
	}
	rep.unknown(f, kind)
	return out
}

// betaNodeClass converts a karpenter.k8s.aws/v1beta1 EC2NodeClass to v1. Fields keep their order.
func (c *converter) betaNodeClass(m *yaml.Node, rep *reporter) *object {
	class, meta, sk, sv := c.start(m, rep, apiAWSV1, kindEC2NodeClass, kindEC2NodeClass)
	out := newMap()
	put(class, sk, "spec", out)
	f := fieldsOf(sv, "spec")
	famK, famV := lookup(sv, "amiFamily")
	termsK, terms := lookup(sv, "amiSelectorTerms")
	roleK, roleV := lookup(sv, "role")
	ipK, ipV := lookup(sv, "instanceProfile")
	amiDone, identityDone := false, false
	for i := 0; i+1 < len(sv.Content); i += 2 {
		k, v := sv.Content[i], sv.Content[i+1]
		// Keys are marked by node: amiSelection may rename the amiFamily key it moves.
		switch key := k.Value; key {
		case "amiFamily", "amiSelectorTerms":
			f.taken[k] = true
			if !amiDone {
				c.amiSelection(rep, out, amiSelection{famK: famK, famV: famV, famField: "spec.amiFamily", termsK: termsK, terms: terms,
					aliasVersion: meta.aliasVersion})
				amiDone = true
			}
		case "role", "instanceProfile":
			f.taken[k] = true
			if !identityDone {
				c.identity(rep, out, sk, roleK, roleV, ipK, ipV, "spec."+key)
				identityDone = true
			}
		case "tags":
			f.taken[k] = true
			put(out, k, key, tags(rep, v, "spec.tags"))
		case "metadataOptions":
			f.taken[k] = true
			put(out, k, key, metadataOptions(rep, k, v, "spec.metadataOptions", sk))
		case "subnetSelectorTerms", "securityGroupSelectorTerms", "userData", "blockDeviceMappings", "instanceStorePolicy",
			"detailedMonitoring", "associatePublicIPAddress", "context":
			f.taken[k] = true
			put(out, k, key, v)
		}
	}
	if !amiDone {
		c.amiSelection(rep, out, amiSelection{famField: "spec.amiFamily", aliasVersion: meta.aliasVersion, at: sk})
	}
	if !identityDone {
		c.identity(rep, out, sk, nil, nil, nil, nil, "spec.role")
	}
	if value(out, "metadataOptions") == nil {
		set(out, "metadataOptions", metadataOptions(rep, sk, nil, "spec.metadataOptions", sk))
	}
	for _, key := range []string{"subnetSelectorTerms", "securityGroupSelectorTerms"} {
		if value(out, key) == nil {
			rep.fail(sk, "spec."+key, "missing: v1 requires it; add it")
		}
	}
	rep.unknown(f, kindEC2NodeClass)
	return &object{node: class, kind: kindEC2NodeClass, name: meta.name, rep: rep, converted: true, primary: true}
}

// amiSelection is how a legacy node class chose its AMIs.
type amiSelection struct {
	// famK and famV are the amiFamily key and value (nil when absent), at famField.
	famK, famV *yaml.Node
	famField   string
	// termsK and terms are the AMI selector terms (converted from a v1alpha1 amiSelector), nil when absent.
	termsK, terms *yaml.Node
	// aliasVersion is the version the class's annotation asks for, if any.
	aliasVersion string
	// at locates findings when the class has neither field.
	at *yaml.Node
}

// amiSelection writes amiFamily and amiSelectorTerms for a legacy AMI choice s into the spec out:
// a family alone (AL2 when none was set, the old default) becomes an alias term such as al2@latest;
// with selector terms the family is kept; Ubuntu, which v1 removed, is reported.
func (c *converter) amiSelection(rep *reporter, out *yaml.Node, s amiSelection) {
	at := firstNode(s.famK, s.termsK, s.at)
	family := ""
	if s.famV != nil {
		family = s.famV.Value
	}
	hasTerms := isSeq(s.terms) && len(s.terms.Content) > 0
	defaulted := family == ""
	if defaulted {
		family = awsv1.AMIFamilyAL2
		if hasTerms {
			rep.note(at, s.famField, "not set; wrote AL2, the legacy default")
		}
	}
	writeFamily := func(f string) {
		put(out, s.famK, "amiFamily", replacing(s.famV, str(f)))
	}
	switch family {
	case amiFamilyUbuntu:
		if hasTerms {
			writeFamily(awsv1.AMIFamilyAL2)
			put(out, s.termsK, "amiSelectorTerms", s.terms)
			rep.fail(at, s.famField, "v1 removed the Ubuntu family; wrote AL2, whose userData format Ubuntu AMIs accept, with the "+
				"AMI selector: check the AMIs boot with it, or use amiFamily Custom with your own userData")
			return
		}
		rep.fail(at, s.famField, "left out: v1 removed the Ubuntu family; add amiSelectorTerms that pin your Ubuntu AMIs and "+
			"set amiFamily AL2 (its userData format is compatible) or Custom")
		return
	case awsv1.AMIFamilyCustom:
		writeFamily(family)
		if hasTerms {
			put(out, s.termsK, "amiSelectorTerms", s.terms)
			return
		}
		rep.fail(at, s.famField, "amiFamily Custom needs amiSelectorTerms naming the AMIs; add them")
		return
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023, awsv1.AMIFamilyBottlerocket, awsv1.AMIFamilyWindows2019,
		awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
	default:
		rep.fail(at, s.famField, "%q is not an AMI family v1 knows (AL2, AL2023, Bottlerocket, Custom, Windows2019, "+
			"Windows2022, Windows2025); written as is: fix it", family)
		writeFamily(family)
		if hasTerms {
			put(out, s.termsK, "amiSelectorTerms", s.terms)
		}
		return
	}
	if hasTerms {
		writeFamily(family)
		put(out, s.termsK, "amiSelectorTerms", s.terms)
		return
	}
	version := firstNonEmpty(s.aliasVersion, c.opts.AMIAliasVersion, awsv1.AliasVersionLatest)
	if strings.HasPrefix(family, "Windows") && version != awsv1.AliasVersionLatest {
		rep.note(at, s.famField, "Windows families only take the alias version latest, not %q", version)
		version = awsv1.AliasVersionLatest
	}
	alias := awsv1.Alias{Family: family, Version: version}.String()
	if _, err := awsv1.ParseAlias(alias); err != nil {
		rep.fail(at, s.famField, "cannot write the alias: %v; fix --ami-alias-version", err)
		return
	}
	term := newMap()
	set(term, "alias", replacing(s.famV, str(alias)))
	terms := newSeq()
	terms.Content = append(terms.Content, term)
	put(out, s.famK, "amiSelectorTerms", terms)
	how := "nodes follow each new AMI release, as before"
	if version != awsv1.AliasVersionLatest {
		how = "pinned by --ami-alias-version or the class's " + annotationAliasVersion + " annotation"
	}
	what := "amiFamily " + family
	if defaulted {
		what = "not set; the legacy default AL2"
	}
	rep.note(at, s.famField, "%s, with no AMI selector, became amiSelectorTerms [{alias: %s}] (%s)", what, alias, how)
}

// firstNonEmpty returns the first non-empty string, or "".
func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// identity writes role or instanceProfile into the spec out (findings point at at): what the class
// names, else the role of the options; a class with neither used the global aws.defaultInstanceProfile,
// which v1 removed, and is reported.
func (c *converter) identity(rep *reporter, out, at, roleK, roleV, ipK, ipV *yaml.Node, field string) {
	switch {
	case roleV != nil && ipV != nil:
		put(out, roleK, "role", roleV)
		rep.fail(ipK, "spec.instanceProfile", "left out: v1 takes role or instanceProfile, not both; kept role")
	case roleV != nil:
		put(out, roleK, "role", roleV)
	case ipV != nil:
		put(out, ipK, "instanceProfile", ipV)
	case c.opts.Role != "":
		set(out, "role", str(c.opts.Role))
		rep.note(at, field, "no instanceProfile (the class used the global aws.defaultInstanceProfile, which v1 removed); "+
			"wrote role: %s from --role, for which Joiner manages an instance profile", c.opts.Role)
	default:
		rep.fail(at, field, "no instanceProfile, and v1 has no global default (aws.defaultInstanceProfile is gone): pass "+
			"--role with the nodes' IAM role, or set spec.instanceProfile, and convert again")
	}
}

// metadataOptions returns the metadataOptions v (key k, at field, nil when absent) of a legacy class,
// with the legacy hop limit of 2 written out where v1 would default it to 1. Findings about a missing
// block point at spec.
func metadataOptions(rep *reporter, k, v *yaml.Node, field string, spec *yaml.Node) *yaml.Node {
	if v == nil {
		v = newMap()
		set(v, "httpEndpoint", str(legacyHTTPEndpoint))
		set(v, "httpProtocolIPv6", str(legacyHTTPProtocolIPv6))
		set(v, "httpPutResponseHopLimit", integer(legacyHopLimit))
		set(v, "httpTokens", str(legacyHTTPTokens))
		rep.note(spec, field, "not set; wrote the legacy defaults, whose hop limit of 2 lets pods reach the instance metadata "+
			"service (v1 defaults to 1)")
		return v
	}
	if isMap(v) && value(v, "httpPutResponseHopLimit") == nil {
		set(v, "httpPutResponseHopLimit", integer(legacyHopLimit))
		rep.note(k, field+".httpPutResponseHopLimit", "not set; wrote the legacy default 2 (v1 defaults to 1, which keeps "+
			"pods from the instance metadata service)")
	}
	return v
}

// tags returns the tags v (at field) without those v1 reserves, which are reported.
func tags(rep *reporter, v *yaml.Node, field string) *yaml.Node {
	if !isMap(v) {
		return v
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		key := v.Content[i]
		if !restrictedTag(key.Value) {
			continue
		}
		rep.fail(key, field+"["+key.Value+"]", "left out: v1 reserves this tag (Joiner sets it on every instance)")
		v.Content = append(v.Content[:i:i], v.Content[i+2:]...)
		i -= 2
	}
	return v
}

// restrictedTag reports whether v1 rejects the EC2 tag key.
func restrictedTag(key string) bool {
	switch key {
	case "eks:eks-cluster-name", labelNodePool, "karpenter.sh/nodeclaim", awsv1.LabelNodeClass:
		return true
	}
	return strings.HasPrefix(key, "kubernetes.io/cluster/")
}

// selectorKind is what a v1alpha1 selector selects.
type selectorKind int

const (
	selectSubnets selectorKind = iota
	selectSecurityGroups
	selectAMIs
)

// Keys of v1alpha1 selectors that are not tags.
const (
	selectorIDs       = "aws::ids"
	selectorIDsLegacy = "aws-ids"
	selectorName      = "aws::name"
	selectorOwners    = "aws::owners"
)

// selectorTerms converts a v1alpha1 selector map (v, key k, at field) to v1 selector terms. Values are
// comma-separated alternatives, so each combination of values becomes one term (terms are ORed, the
// fields of a term ANDed); aws::ids gives one id term per ID. For AMIs, aws::name and aws::owners
// become the name and owner of each term.
func selectorTerms(rep *reporter, k, v *yaml.Node, field string, what selectorKind) *yaml.Node {
	if !isMap(v) {
		rep.fail(k, field, "not a mapping, left out; write it as tag: value pairs")
		return nil
	}
	type entry struct {
		key    *yaml.Node
		values []string
	}
	var ids, names, owners []string
	var tagEntries []entry
	var others []string
	split := false
	for i := 0; i+1 < len(v.Content); i += 2 {
		key, val := v.Content[i], v.Content[i+1]
		values := splitValues(val.Value)
		split = split || len(values) > 1
		switch {
		case key.Value == selectorIDs || key.Value == selectorIDsLegacy:
			ids = append(ids, values...)
			continue
		case what == selectAMIs && key.Value == selectorName:
			names = append(names, values...)
		case what == selectAMIs && key.Value == selectorOwners:
			owners = append(owners, values...)
		default:
			tagEntries = append(tagEntries, entry{key: key, values: values})
		}
		others = append(others, key.Value)
	}
	terms := newSeq()
	if len(ids) > 0 {
		for _, id := range ids {
			t := newMap()
			set(t, "id", str(id))
			terms.Content = append(terms.Content, t)
		}
		if len(others) > 0 {
			rep.fail(k, field, "left out %s: IDs select on their own and v1 takes no other field in an id term; move "+
				"them to another term if they select something else", strings.Join(others, ", "))
		}
		return checkTerms(rep, k, field, terms)
	}
	tagSets := []*yaml.Node{nil}
	for _, e := range tagEntries {
		var next []*yaml.Node
		for _, base := range tagSets {
			for _, val := range e.values {
				m := newMap()
				if base != nil {
					m = deepCopy(base)
				}
				set(m, e.key.Value, str(val))
				next = append(next, m)
			}
		}
		tagSets = next
	}
	if len(names) == 0 {
		names = []string{""}
	}
	if len(owners) == 0 {
		owners = []string{""}
	}
	for _, name := range names {
		for _, owner := range owners {
			for _, ts := range tagSets {
				if name == "" && ts == nil {
					continue
				}
				t := newMap()
				if name != "" {
					set(t, "name", str(name))
				}
				if owner != "" {
					set(t, "owner", str(owner))
				}
				if ts != nil {
					set(t, "tags", ts)
				}
				terms.Content = append(terms.Content, t)
			}
		}
	}
	if len(terms.Content) == 0 {
		rep.fail(k, field, "selects nothing v1 can express (aws::owners alone is not a term); add aws::name, aws::ids or tags")
		return nil
	}
	if split {
		rep.note(k, field, "comma-separated values became one term each (v1 ORs terms and ANDs the fields of a term)")
	}
	return checkTerms(rep, k, field, terms)
}

// checkTerms reports terms over v1's limit.
func checkTerms(rep *reporter, k *yaml.Node, field string, terms *yaml.Node) *yaml.Node {
	if n := len(terms.Content); n > maxSelectorTerms {
		rep.fail(k, field, "makes %d terms, over v1's limit of %d; select by fewer values, or split the class", n, maxSelectorTerms)
	}
	return terms
}

// splitValues splits a comma-separated selector value into its trimmed, non-empty alternatives.
func splitValues(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{s}
	}
	return out
}
