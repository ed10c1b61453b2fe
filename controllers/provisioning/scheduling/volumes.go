package scheduling

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

// Volume topology. A pod's PersistentVolumeClaims, and the claims its generic ephemeral volumes
// get, restrict the nodes it can run on, as kube-scheduler's VolumeBinding and VolumeZone plugins
// check:
//
//   - a claim bound (or pre-bound, spec.volumeName) to a PersistentVolume: the volume's required
//     node affinity, and the zone and region labels older volumes carry;
//   - an unbound claim whose StorageClass binds WaitForFirstConsumer: the class's
//     allowedTopologies, since the volume is provisioned where the pod goes;
//   - a generic ephemeral volume: its claim once the ephemeral volume controller created it, and
//     until then its claim template (the template's StorageClass).
//
// An unbound claim of an Immediate StorageClass, or without a class (static binding), restricts
// nothing until it is bound. The requirements are intersected with the pod's own (newPodInfo), so
// every check that places a pod honours them; explain names the claim that rules a NodePool out.

// Annotations that mark the default StorageClass, the one a claim without storageClassName gets.
const (
	defaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// Volumes is the storage a simulation knows of: the PersistentVolumeClaims, PersistentVolumes and
// StorageClasses that say where the volumes of a pod can be used. Build it with NewVolumes; it is
// immutable, and any number of simulations may share it. A nil *Volumes knows no storage: pods'
// volumes then restrict nothing.
type Volumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim // by "namespace/name"
	volumes map[string]*corev1.PersistentVolume      // by name
	classes map[string]*storagev1.StorageClass       // by name
	// defaultClass names the StorageClass a claim without storageClassName gets, "" when none.
	defaultClass string
}

// NewVolumes indexes the cluster's claims, volumes and classes. It keeps pointers into the slices,
// which must not change while the Volumes are in use. When several StorageClasses are marked
// default, the newest is (as the DefaultStorageClass admission plugin picks), then the first by
// name.
func NewVolumes(claims []corev1.PersistentVolumeClaim, volumes []corev1.PersistentVolume, classes []storagev1.StorageClass) *Volumes {
	v := &Volumes{
		claims:  make(map[string]*corev1.PersistentVolumeClaim, len(claims)),
		volumes: make(map[string]*corev1.PersistentVolume, len(volumes)),
		classes: make(map[string]*storagev1.StorageClass, len(classes)),
	}
	for i := range claims {
		v.claims[claims[i].Namespace+"/"+claims[i].Name] = &claims[i]
	}
	for i := range volumes {
		v.volumes[volumes[i].Name] = &volumes[i]
	}
	var defaults []*storagev1.StorageClass
	for i := range classes {
		sc := &classes[i]
		v.classes[sc.Name] = sc
		if sc.Annotations[defaultClassAnnotation] == "true" || sc.Annotations[betaDefaultClassAnnotation] == "true" {
			defaults = append(defaults, sc)
		}
	}
	if len(defaults) > 0 {
		newest := slices.MinFunc(defaults, func(a, b *storagev1.StorageClass) int {
			if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
				return c
			}
			return cmp.Compare(a.Name, b.Name)
		})
		v.defaultClass = newest.Name
	}
	return v
}

// volumeTopology is where one of a pod's volumes can be used: on a node that satisfies one of
// terms.
type volumeTopology struct {
	// claim is the claim's "namespace/name".
	claim string
	// what says what restricts it, e.g. "volume pinned to zone us-east-1a".
	what  string
	terms []requirements.Requirements
}

// allows reports whether a node described by node (the labels it has or may have) can use the
// volume.
func (v *volumeTopology) allows(node requirements.Requirements) bool {
	for _, t := range v.terms {
		if _, bad := node.FirstIncompatibility(t); !bad {
			return true
		}
	}
	return false
}

// topologyOf returns where each of the pod's volumes that restricts its nodes can be used. The
// error names a claim, volume or class the pod needs that does not exist (kube-scheduler does not
// place such a pod either).
func (v *Volumes) topologyOf(pod *corev1.Pod) ([]volumeTopology, error) {
	if v == nil {
		return nil, nil
	}
	var out []volumeTopology
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var vt *volumeTopology
		var err error
		switch {
		case vol.PersistentVolumeClaim != nil:
			vt, err = v.claimTopology(pod.Namespace + "/" + vol.PersistentVolumeClaim.ClaimName)
		case vol.Ephemeral != nil:
			vt, err = v.ephemeralTopology(pod, vol)
		}
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if vt != nil {
			out = append(out, *vt)
		}
	}
	return out, nil
}

// claimTopology is where the claim key ("namespace/name") can be used.
func (v *Volumes) claimTopology(key string) (*volumeTopology, error) {
	claim, ok := v.claims[key]
	if !ok {
		return nil, fmt.Errorf("PersistentVolumeClaim %s does not exist; create it or fix the pod's volume", key)
	}
	return v.specTopology(key, &claim.Spec)
}

// ephemeralTopology is where the claim of a generic ephemeral volume can be used: the claim, once
// created for the pod (named <pod>-<volume>), else its template.
func (v *Volumes) ephemeralTopology(pod *corev1.Pod, vol *corev1.Volume) (*volumeTopology, error) {
	key := pod.Namespace + "/" + pod.Name + "-" + vol.Name
	if claim, ok := v.claims[key]; ok {
		if !metav1.IsControlledBy(claim, pod) {
			return nil, fmt.Errorf("PersistentVolumeClaim %s exists but was not created for the pod's ephemeral volume %s; delete the claim or rename the volume", key, vol.Name)
		}
		return v.specTopology(key, &claim.Spec)
	}
	if vol.Ephemeral.VolumeClaimTemplate == nil {
		return nil, nil
	}
	return v.specTopology(key, &vol.Ephemeral.VolumeClaimTemplate.Spec)
}

// specTopology is where a claim with the spec can be used: its volume's node affinity when it
// names a volume, else, for a WaitForFirstConsumer StorageClass, the class's allowed topologies;
// nil when nothing restricts it.
func (v *Volumes) specTopology(key string, spec *corev1.PersistentVolumeClaimSpec) (*volumeTopology, error) {
	if spec.VolumeName != "" {
		pv, ok := v.volumes[spec.VolumeName]
		if !ok {
			return nil, fmt.Errorf("PersistentVolumeClaim %s is bound to PersistentVolume %s, which does not exist", key, spec.VolumeName)
		}
		terms, err := volumeNodeTerms(pv)
		if err != nil {
			return nil, fmt.Errorf("PersistentVolumeClaim %s: PersistentVolume %s: %w", key, pv.Name, err)
		}
		if terms == nil {
			return nil, nil
		}
		return &volumeTopology{claim: key, what: "volume pinned to " + describeTopology(terms), terms: terms}, nil
	}
	class := v.defaultClass
	if spec.StorageClassName != nil {
		class = *spec.StorageClassName
	}
	if class == "" {
		return nil, nil
	}
	sc, ok := v.classes[class]
	if !ok {
		return nil, fmt.Errorf("PersistentVolumeClaim %s: StorageClass %s does not exist", key, class)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil, nil // bound before the pod schedules; its volume will say where
	}
	terms := allowedTopologyTerms(sc)
	if terms == nil {
		return nil, nil
	}
	return &volumeTopology{claim: key, what: fmt.Sprintf("StorageClass %s provisions only in %s", sc.Name, describeTopology(terms)), terms: terms}, nil
}

// volumeNodeTerms returns the alternative node requirements of a PersistentVolume: the terms of
// its required node affinity, each with the zone and region its labels name; nil when neither
// restricts it. Like pods' node affinity, matchFields are not modelled: a term with matchFields
// only leaves the volume unrestricted.
func volumeNodeTerms(pv *corev1.PersistentVolume) ([]requirements.Requirements, error) {
	var terms []requirements.Requirements
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for i, term := range na.Required.NodeSelectorTerms {
			if len(term.MatchExpressions) == 0 {
				if len(term.MatchFields) > 0 {
					return nil, nil
				}
				continue // matches no node
			}
			exprs := slices.Clone(term.MatchExpressions)
			for j := range exprs {
				exprs[j].Key = volumeTopologyKey(exprs[j].Key)
			}
			reqs, err := requirements.FromNodeSelectorRequirements(exprs...)
			if err != nil {
				return nil, fmt.Errorf("required node affinity term %d: %w", i, err)
			}
			terms = append(terms, reqs)
		}
		if len(terms) == 0 {
			return nil, errors.New("its required node affinity has no term a node can match")
		}
	}
	var labels requirements.Requirements
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion} {
		if value := pv.Labels[key]; value != "" {
			labels.Add(requirements.In(key, strings.Split(value, "__")...)) // several zones are joined by "__"
		}
	}
	if labels.Len() == 0 {
		return terms, nil
	}
	if terms == nil {
		return []requirements.Requirements{labels}, nil
	}
	for i := range terms {
		terms[i] = terms[i].Intersect(labels)
	}
	return terms, nil
}

// allowedTopologyTerms returns the alternative node requirements of a StorageClass's
// allowedTopologies; nil when they allow every node.
func allowedTopologyTerms(sc *storagev1.StorageClass) []requirements.Requirements {
	var terms []requirements.Requirements
	for _, term := range sc.AllowedTopologies {
		if len(term.MatchLabelExpressions) == 0 {
			return nil // a term without expressions allows every node
		}
		reqs := make([]requirements.Requirement, 0, len(term.MatchLabelExpressions))
		for _, e := range term.MatchLabelExpressions {
			reqs = append(reqs, requirements.In(volumeTopologyKey(e.Key), e.Values...))
		}
		terms = append(terms, requirements.New(reqs...))
	}
	return terms
}

// volumeTopologyKey maps a topology key a CSI driver puts on the volumes it provisions to the node
// label a new node has from its launch: the AWS EBS driver's zone key becomes
// topology.kubernetes.io/zone (its node plugin labels the node with it only once running there,
// with the zone's name). Other keys are returned unchanged; beta keys are normalised later.
func volumeTopologyKey(key string) string {
	if key == "topology.ebs.csi.aws.com/zone" {
		return corev1.LabelTopologyZone
	}
	return key
}

// describeTopology says where terms allow a node, for messages: "zone us-east-1a", "zones
// us-east-1a, us-east-1b", "node n1" when every term allows values of one of the zone, region or
// hostname labels; else the terms, "or" between them.
func describeTopology(terms []requirements.Requirements) string {
	nouns := map[string]string{karpv1.LabelTopologyZone: "zone", karpv1.LabelTopologyRegion: "region", karpv1.LabelHostname: "node"}
	key, values, simple := "", []string(nil), true
	for _, t := range terms {
		items := t.Items()
		if len(items) != 1 || items[0].IsComplement() || items[0].AllowsAbsent() || (key != "" && items[0].Key() != key) || nouns[items[0].Key()] == "" {
			simple = false
			break
		}
		key = items[0].Key()
		values = append(values, items[0].Values()...)
	}
	if simple && len(values) > 0 {
		slices.Sort(values)
		values = slices.Compact(values)
		noun := nouns[key]
		if len(values) > 1 {
			noun += "s"
		}
		return noun + " " + strings.Join(values, ", ")
	}
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = t.String()
	}
	return strings.Join(parts, " or ")
}

// withVolumes intersects the pod's alternative node requirements (terms, from its node selector
// and required node affinity) with those of each of its volumes, keeping the combinations some
// node can satisfy. The error names the first volume no combination is left for.
func withVolumes(pod *corev1.Pod, terms []requirements.Requirements, volumes []volumeTopology) ([]requirements.Requirements, error) {
	for i := range volumes {
		v := &volumes[i]
		var out []requirements.Requirements
		for _, t := range terms {
			for _, vt := range v.terms {
				if both := t.Intersect(vt); satisfiableAlone(both) {
					out = append(out, both)
				}
			}
		}
		if len(out) == 0 {
			others := "its node selector and required node affinity"
			if i > 0 {
				others = "its node selector, required node affinity and other volumes"
			}
			return nil, fmt.Errorf("pod %s/%s: PersistentVolumeClaim %s: %s, which %s rule out", pod.Namespace, pod.Name, v.claim, v.what, others)
		}
		terms = out
	}
	return terms, nil
}

// satisfiableAlone reports whether no requirement of reqs is empty, so that some node can satisfy
// them.
func satisfiableAlone(reqs requirements.Requirements) bool {
	for _, r := range reqs.Items() {
		if r.IsEmpty() {
			return false
		}
	}
	return true
}

// volumeRefusal names the first of the pod's volumes that a node described by node cannot use, as
// "PersistentVolumeClaim default/data: volume pinned to zone us-east-1a, which NodePool a cannot
// offer" (where is "NodePool a"); "" when it can use them all.
func (p *podInfo) volumeRefusal(node requirements.Requirements, where string) string {
	for i := range p.volumes {
		if v := &p.volumes[i]; !v.allows(node) {
			return fmt.Sprintf("PersistentVolumeClaim %s: %s, which %s cannot offer", v.claim, v.what, where)
		}
	}
	return ""
}
