package convert

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Legacy annotation and label keys, and what v1 calls them.
const (
	labelProvisionerName       = "karpenter.sh/provisioner-name"
	labelNodePool              = karpv1.NodePoolLabelKey
	labelInstancePods          = "karpenter.k8s.aws/instance-pods"
	annotationDoNotEvict       = "karpenter.sh/do-not-evict"
	annotationDoNotConsolidate = "karpenter.sh/do-not-consolidate"
	annotationDoNotDisrupt     = karpv1.DoNotDisruptAnnotationKey
	// annotationAliasVersion is the v1beta1 EC2NodeClass annotation that chose the version of the alias
	// Karpenter's conversion webhook wrote.
	annotationAliasVersion = "compatibility.karpenter.k8s.aws/v1-alias-version"
	annotationLastApplied  = "kubectl.kubernetes.io/last-applied-configuration"
)

// managedAnnotation reports whether an annotation is written by a controller or by kubectl for the old
// object, and so is left out of a converted manifest.
func managedAnnotation(key string) bool {
	switch key {
	case annotationLastApplied, "karpenter.sh/provisioner-hash", "karpenter.sh/nodepool-hash", "karpenter.sh/nodepool-hash-version",
		"karpenter.k8s.aws/nodetemplate-hash", "karpenter.k8s.aws/ec2nodeclass-hash", "karpenter.k8s.aws/ec2nodeclass-hash-version":
		return true
	}
	return strings.HasPrefix(key, "compatibility.karpenter.sh/") || strings.HasPrefix(key, "compatibility.karpenter.k8s.aws/")
}

// objectMeta is the metadata of a legacy object, cleaned for its v1 manifest.
type objectMeta struct {
	// key and node are the metadata key and mapping, to put in the output object.
	key, node *yaml.Node
	name      string
	// aliasVersion is the value of annotationAliasVersion, if any.
	aliasVersion string
}

// metadata takes metadata and status from the root of a legacy object of kind and cleans metadata in
// place for the v1 manifest: it keeps name, generateName, labels and annotations, renames the legacy
// annotations, and leaves out status, what the API server sets (uid, resourceVersion, managedFields...),
// the namespace (every Karpenter kind is cluster-scoped) and annotations written by controllers or
// kubectl for the old object. What it leaves out is reported in one note.
func (c *converter) metadata(rep *reporter, root *fields, kind string) objectMeta {
	k, v := root.take("metadata")
	if !isMap(v) {
		rep.fail(k, "metadata", "missing; set metadata.name")
		v = newMap()
	}
	meta := objectMeta{key: k, node: v}
	var left []string
	if _, st := root.take("status"); st != nil {
		left = append(left, "status")
	}
	f := fieldsOf(v, "metadata")
	nk, _ := f.take("name")
	if meta.name = scalarAt(v, "name"); meta.name == "" {
		rep.fail(nk, "metadata.name", "missing; set it")
	}
	f.skip("labels", "generateName")
	if nsk, _ := f.take("namespace"); nsk != nil {
		remove(v, "namespace")
		left = append(left, "metadata.namespace (a "+kind+" is cluster-scoped)")
	}
	for _, s := range serverMetadata() {
		f.skip(s)
		if sk, _ := remove(v, s); sk != nil {
			left = append(left, "metadata."+s)
		}
	}
	if _, ann := f.take("annotations"); isMap(ann) {
		meta.aliasVersion = scalarAt(ann, annotationAliasVersion)
		for i := 0; i+1 < len(ann.Content); i += 2 {
			key := ann.Content[i].Value
			if !managedAnnotation(key) {
				continue
			}
			// The alias version is not lost: it goes into the alias, and that finding names it.
			if key != annotationAliasVersion {
				left = append(left, "metadata.annotations["+key+"]")
			}
			ann.Content = append(ann.Content[:i:i], ann.Content[i+2:]...)
			i -= 2
		}
		renameAnnotations(rep, ann, "metadata.annotations")
		if len(ann.Content) == 0 {
			remove(v, "annotations")
		}
	}
	rep.unknown(f, kind)
	dropRest(f)
	if len(left) > 0 {
		rep.note(k, "", "left out what the API server and controllers write for the old object: %s", strings.Join(left, ", "))
	}
	return meta
}

// dropRest removes the fields of f that were not taken from its mapping.
func dropRest(f *fields) {
	for _, kv := range f.rest() {
		remove(f.node, kv[0].Value)
	}
}

// renameAnnotations renames karpenter.sh/do-not-evict (Pods) and karpenter.sh/do-not-consolidate
// (Nodes) to karpenter.sh/do-not-disrupt in the annotations mapping ann found at field. It reports
// whether it changed ann.
func renameAnnotations(rep *reporter, ann *yaml.Node, field string) bool {
	changed := false
	for i := 0; i+1 < len(ann.Content); i += 2 {
		k := ann.Content[i]
		old := k.Value
		if old != annotationDoNotEvict && old != annotationDoNotConsolidate {
			continue
		}
		changed = true
		if exists, _ := lookup(ann, annotationDoNotDisrupt); exists != nil {
			ann.Content = append(ann.Content[:i:i], ann.Content[i+2:]...)
			i -= 2
			rep.note(k, field+"["+old+"]", "left out: %s is set too, and v1 reads only that one", annotationDoNotDisrupt)
			continue
		}
		k.Value = annotationDoNotDisrupt
		rep.note(k, field+"["+old+"]", "renamed to %s (v1 removed %s)", annotationDoNotDisrupt, old)
	}
	return changed
}

// renameLegacyKeys renames, anywhere under n (found at path), the legacy Karpenter annotations (see
// renameAnnotations) and the label karpenter.sh/provisioner-name — in nodeSelectors, node affinity
// and topology keys — to karpenter.sh/nodepool, which v1 nodes carry instead. NodePools keep the
// names of the Provisioners they come from, so selected values stay valid. It reports whether it
// changed anything.
func renameLegacyKeys(rep *reporter, n *yaml.Node, path string) bool {
	changed := false
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			field := joinPath(path, k.Value)
			switch {
			case k.Value == "annotations" && isMap(v):
				changed = renameAnnotations(rep, v, field) || changed
			case k.Value == "nodeSelector" && isMap(v):
				changed = renameSelectorKey(rep, v, field) || changed
			case (k.Value == "key" || k.Value == "topologyKey") && isScalar(v) && v.Value == labelProvisionerName:
				v.Value = labelNodePool
				rep.note(v, field, "%s renamed to %s (v1 nodes carry only the new label)", labelProvisionerName, labelNodePool)
				changed = true
			}
			changed = renameLegacyKeys(rep, v, field) || changed
		}
	case yaml.SequenceNode:
		for i, it := range n.Content {
			changed = renameLegacyKeys(rep, it, fmt.Sprintf("%s[%d]", path, i)) || changed
		}
	}
	return changed
}

// renameSelectorKey renames karpenter.sh/provisioner-name in the nodeSelector sel found at field.
func renameSelectorKey(rep *reporter, sel *yaml.Node, field string) bool {
	k, _ := lookup(sel, labelProvisionerName)
	if k == nil {
		return false
	}
	if exists, _ := lookup(sel, labelNodePool); exists != nil {
		remove(sel, labelProvisionerName)
		rep.note(k, field+"["+labelProvisionerName+"]", "left out: %s is set too, and v1 nodes carry only that label", labelNodePool)
		return true
	}
	k.Value = labelNodePool
	rep.note(k, field+"["+labelProvisionerName+"]", "renamed to %s (v1 nodes carry only the new label)", labelNodePool)
	return true
}
