package scheduling

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

// hostnameKey marks a group whose domain is the node itself.
const hostnameKey = -1

type groupKind uint8

const (
	kindSpread groupKind = iota
	kindAffinity
	kindAntiAffinity
)

// String names the kind for messages.
func (k groupKind) String() string {
	switch k {
	case kindSpread:
		return "topology spread"
	case kindAffinity:
		return "pod affinity"
	}
	return "pod anti-affinity"
}

// topoKey is a topology key other than the hostname, with the domains (label values) nodes can
// have for it.
type topoKey struct {
	name    string
	domains []string
	index   map[string]int32
}

func (k *topoKey) domain(value string) int32 {
	if i, ok := k.index[value]; ok {
		return i
	}
	k.index[value] = int32(len(k.domains))
	k.domains = append(k.domains, value)
	return int32(len(k.domains) - 1)
}

// group is one distinct topology constraint, shared by every pod that declares it: a kind, a
// topology key and the pods its selector counts. It counts, per domain, the pods it selects and
// the pods that declare it as a hard constraint (owners), so that placing a selected pod next to
// an owner can be checked from the owner's side too.
type group struct {
	kind          groupKind
	key           int32 // index into topology.keys, or hostnameKey
	keyName       string
	selector      labels.Selector
	allNamespaces bool
	namespaces    []string
	maxSkew       int32
	minDomains    int32
	// eligible marks the domains that count for a spread's minimum (node affinity honoured);
	// nil means all.
	eligible []bool
	counts   []int32
	owners   []int32
	total    int32
	// hard is set when some pod declares the group as a hard constraint; only then do pods it
	// selects have to keep it balanced.
	hard bool
}

func (g *group) selects(pod *corev1.Pod) bool {
	if !g.allNamespaces {
		if _, ok := slices.BinarySearch(g.namespaces, pod.Namespace); !ok {
			return false
		}
	}
	return g.selector.Matches(labels.Set(pod.Labels))
}

func (g *group) describe() string {
	s := fmt.Sprintf("%s on %s (selector %s", g.kind, g.keyName, g.selector)
	if g.kind == kindSpread {
		s += fmt.Sprintf(", maxSkew %d", g.maxSkew)
	}
	return s + ")"
}

// grow makes room for every domain of the key.
func (g *group) grow(n int) {
	for len(g.counts) < n {
		g.counts = append(g.counts, 0)
		g.owners = append(g.owners, 0)
	}
	for g.eligible != nil && len(g.eligible) < n {
		g.eligible = append(g.eligible, false)
	}
}

// minCount is the smallest count over the eligible domains; 0 when fewer than minDomains are
// eligible. With extra > 0 the count of domain d is taken as one higher.
func (g *group) minCount(d int32, extra int32) int32 {
	eligible := int32(0)
	low := int32(-1)
	for i, c := range g.counts {
		if g.eligible != nil && !g.eligible[i] {
			continue
		}
		eligible++
		if int32(i) == d {
			c += extra
		}
		if low < 0 || c < low {
			low = c
		}
	}
	if low < 0 || eligible < g.minDomains {
		return 0
	}
	return low
}

// topology holds the topology keys and groups of one simulation.
type topology struct {
	keys   []*topoKey
	byName map[string]int32
	groups []*group
	byID   map[string]int32
}

func newTopology() *topology {
	return &topology{byName: map[string]int32{}, byID: map[string]int32{}}
}

// keyIndex returns the index of a topology key, registering it; hostnameKey for the hostname.
func (t *topology) keyIndex(name string) int32 {
	if name == karpv1.LabelHostname {
		return hostnameKey
	}
	if i, ok := t.byName[name]; ok {
		return i
	}
	t.keys = append(t.keys, &topoKey{name: name, index: map[string]int32{}})
	t.byName[name] = int32(len(t.keys) - 1)
	return int32(len(t.keys) - 1)
}

// addDomains records the values a node may have for each registered key.
func (t *topology) addDomains(reqs requirements.Requirements) {
	for _, k := range t.keys {
		if r, ok := reqs.Get(k.name); ok {
			for _, v := range r.Values() {
				k.domain(v)
			}
		}
	}
}

// constraint is a topology constraint of one pod before it is matched to a group.
type constraint struct {
	kind       groupKind
	keyName    string
	selector   labels.Selector
	allNs      bool
	namespaces []string
	maxSkew    int32
	minDomains int32
	honorAff   bool // spread: count only domains the pod's node affinity allows
	hard       bool
	weight     int32
}

// constraintsOf lists a pod's topology spread constraints and pod (anti-)affinity terms, hard
// and soft. Soft ones are left out under PreferencePolicyIgnore.
func constraintsOf(pod *corev1.Pod, withSoft bool) ([]constraint, error) {
	var out []constraint
	for i, tsc := range pod.Spec.TopologySpreadConstraints {
		sel, err := selectorOf(tsc.LabelSelector, tsc.MatchLabelKeys, pod)
		if err != nil {
			return nil, fmt.Errorf("topologySpreadConstraints[%d]: %w", i, err)
		}
		hard := tsc.WhenUnsatisfiable != corev1.ScheduleAnyway
		if !hard && !withSoft {
			continue
		}
		c := constraint{kind: kindSpread, keyName: tsc.TopologyKey, selector: sel, namespaces: []string{pod.Namespace},
			maxSkew: max(tsc.MaxSkew, 1), hard: hard, honorAff: tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor}
		if tsc.MinDomains != nil {
			c.minDomains = *tsc.MinDomains
		}
		out = append(out, c)
	}
	aff := pod.Spec.Affinity
	if aff == nil {
		return out, nil
	}
	add := func(kind groupKind, term corev1.PodAffinityTerm, hard bool, weight int32, what string) error {
		sel, err := selectorOf(term.LabelSelector, term.MatchLabelKeys, pod)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		c := constraint{kind: kind, keyName: term.TopologyKey, selector: sel, hard: hard, weight: weight}
		switch {
		case term.NamespaceSelector != nil:
			// Namespace labels are not an input; any namespace selector is taken as all namespaces.
			c.allNs = true
		case len(term.Namespaces) > 0:
			c.namespaces = slices.Clone(term.Namespaces)
			slices.Sort(c.namespaces)
			c.namespaces = slices.Compact(c.namespaces)
		default:
			c.namespaces = []string{pod.Namespace}
		}
		out = append(out, c)
		return nil
	}
	if pa := aff.PodAffinity; pa != nil {
		for i, term := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			if err := add(kindAffinity, term, true, 0, fmt.Sprintf("podAffinity required term %d", i)); err != nil {
				return nil, err
			}
		}
		for i, wt := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			if !withSoft {
				break
			}
			if err := add(kindAffinity, wt.PodAffinityTerm, false, wt.Weight, fmt.Sprintf("podAffinity preferred term %d", i)); err != nil {
				return nil, err
			}
		}
	}
	if pa := aff.PodAntiAffinity; pa != nil {
		for i, term := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			if err := add(kindAntiAffinity, term, true, 0, fmt.Sprintf("podAntiAffinity required term %d", i)); err != nil {
				return nil, err
			}
		}
		for i, wt := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			if !withSoft {
				break
			}
			if err := add(kindAntiAffinity, wt.PodAffinityTerm, false, wt.Weight, fmt.Sprintf("podAntiAffinity preferred term %d", i)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// selectorOf converts a label selector, adding key=value for each matchLabelKeys key the pod has.
// A nil selector selects nothing.
func selectorOf(ls *metav1.LabelSelector, matchLabelKeys []string, pod *corev1.Pod) (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("labelSelector: %w", err)
	}
	for _, k := range matchLabelKeys {
		v, ok := pod.Labels[k]
		if !ok {
			continue
		}
		r, err := labels.NewRequirement(k, selection.Equals, []string{v})
		if err != nil {
			return nil, fmt.Errorf("matchLabelKeys %q: %w", k, err)
		}
		sel = sel.Add(*r)
	}
	return sel, nil
}

// groupFor returns the group of a constraint, creating it. When a spread honours node affinity,
// reachable says whether a node the pod could use (one of its alternative requirements) can be in
// a domain; only such domains count for the spread's minimum.
func (t *topology) groupFor(c constraint, alternatives []requirements.Requirements, reachable func(alt requirements.Requirements, key, value string) bool) int32 {
	key := t.keyIndex(c.keyName)
	var eligible []bool
	if c.kind == kindSpread && c.honorAff && key != hostnameKey && reachable != nil {
		k := t.keys[key]
		eligible = make([]bool, len(k.domains))
		all := true
		for d, v := range k.domains {
			for _, alt := range alternatives {
				if reachable(alt, k.name, v) {
					eligible[d] = true
					break
				}
			}
			all = all && eligible[d]
		}
		if all {
			eligible = nil
		}
	}
	var id strings.Builder
	fmt.Fprintf(&id, "%d|%d|%s|%v|%s|%d|%d|", c.kind, key, c.selector, c.allNs, strings.Join(c.namespaces, ","), c.maxSkew, c.minDomains)
	for _, e := range eligible {
		if e {
			id.WriteByte('1')
		} else {
			id.WriteByte('0')
		}
	}
	if i, ok := t.byID[id.String()]; ok {
		return i
	}
	g := &group{kind: c.kind, key: key, keyName: c.keyName, selector: c.selector, allNamespaces: c.allNs, namespaces: c.namespaces,
		maxSkew: c.maxSkew, minDomains: c.minDomains, eligible: eligible}
	if c.kind != kindSpread {
		g.maxSkew = 0
	}
	if key != hostnameKey {
		g.grow(len(t.keys[key].domains))
	}
	t.groups = append(t.groups, g)
	t.byID[id.String()] = int32(len(t.groups) - 1)
	return int32(len(t.groups) - 1)
}

// groupCount is a per-node count of one group, kept in short slices on each node.
type groupCount struct {
	group int32
	count int32
}

func countOf(cs []groupCount, g int32) int32 {
	for _, c := range cs {
		if c.group == g {
			return c.count
		}
	}
	return 0
}

func incCount(cs []groupCount, g int32) []groupCount {
	for i := range cs {
		if cs[i].group == g {
			cs[i].count++
			return cs
		}
	}
	return append(cs, groupCount{group: g, count: 1})
}
