package topology

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

// HostnameKey is the key of a group whose domain is the node itself.
const HostnameKey = -1

// Kind is the kind of a topology constraint.
type Kind uint8

// The kinds of topology constraint: a topology spread, a pod affinity and a pod anti-affinity.
const (
	Spread Kind = iota
	Affinity
	AntiAffinity
)

// String names the kind for messages.
func (k Kind) String() string {
	switch k {
	case Spread:
		return "topology spread"
	case Affinity:
		return "pod affinity"
	}
	return "pod anti-affinity"
}

// Key is a topology key other than the hostname, with the domains (label values) nodes can
// have for it.
type Key struct {
	Name    string
	Domains []string
	Index   map[string]int32
}

// Domain returns the index of a domain of the key, registering it.
func (k *Key) Domain(value string) int32 {
	if i, ok := k.Index[value]; ok {
		return i
	}
	k.Index[value] = int32(len(k.Domains))
	k.Domains = append(k.Domains, value)
	return int32(len(k.Domains) - 1)
}

// Group is one distinct topology constraint, shared by every pod that declares it: a kind, a
// topology key and the pods its selector counts. It counts, per domain, the pods it selects and
// the pods that declare it as a hard constraint (owners), so that placing a selected pod next to
// an owner can be checked from the owner's side too.
type Group struct {
	Term
	Key int32 // index into Topology.Keys, or HostnameKey
	// Eligible marks the domains that count for a spread's minimum (node affinity honoured);
	// nil means all.
	Eligible []bool
	Counts   []int32 // per domain: the pods it selects
	Owners   []int32 // per domain: the pods that declare it as a hard constraint
	Total    int32   // the pods it selects, everywhere
	// Hard is set when some pod declares the group as a hard constraint; only then do pods it
	// selects have to keep it balanced.
	Hard bool
}

// Selects reports whether the group counts the pod: its namespace and labels.
func (g *Group) Selects(pod *corev1.Pod) bool {
	if !g.AllNamespaces {
		if _, ok := slices.BinarySearch(g.Namespaces, pod.Namespace); !ok {
			return false
		}
	}
	return g.Selector.Matches(labels.Set(pod.Labels))
}

// Describe names the group for messages: kind, key, selector and skew.
func (g *Group) Describe() string {
	s := fmt.Sprintf("%s on %s (selector %s", g.Kind, g.KeyName, g.Selector)
	if g.Kind == Spread {
		s += fmt.Sprintf(", maxSkew %d", g.MaxSkew)
	}
	return s + ")"
}

// Grow makes room for every domain of the key.
func (g *Group) Grow(n int) {
	for len(g.Counts) < n {
		g.Counts = append(g.Counts, 0)
		g.Owners = append(g.Owners, 0)
	}
	for g.Eligible != nil && len(g.Eligible) < n {
		g.Eligible = append(g.Eligible, false)
	}
}

// MinCount is the smallest count over the eligible domains; 0 when fewer than minDomains are
// eligible. With extra > 0 the count of domain d is taken as one higher.
func (g *Group) MinCount(d int32, extra int32) int32 {
	counts, el := g.Counts, g.Eligible
	eligible := int32(0)
	low := int32(-1)
	for i, c := range counts {
		if el != nil && !el[i] {
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
	if low < 0 || eligible < g.MinDomains {
		return 0
	}
	return low
}

// Topology holds the topology keys and groups of one simulation.
type Topology struct {
	Keys   []*Key
	byName map[string]int32
	Groups []*Group
	byID   map[string]int32
}

// New returns an empty Topology.
func New() *Topology {
	return &Topology{byName: map[string]int32{}, byID: map[string]int32{}}
}

// KeyIndex returns the index of a topology key, registering it; HostnameKey for the hostname.
func (t *Topology) KeyIndex(name string) int32 {
	if name == karpv1.LabelHostname {
		return HostnameKey
	}
	if i, ok := t.byName[name]; ok {
		return i
	}
	t.Keys = append(t.Keys, &Key{Name: name, Index: map[string]int32{}})
	t.byName[name] = int32(len(t.Keys) - 1)
	return int32(len(t.Keys) - 1)
}

// AddDomains records the values a node may have for each registered key.
func (t *Topology) AddDomains(reqs requirements.Requirements) {
	for _, k := range t.Keys {
		if r, ok := reqs.Get(k.Name); ok {
			for _, v := range r.Values() {
				k.Domain(v)
			}
		}
	}
}

// Term is what a topology constraint is, whoever declares it: its kind, its topology key (by
// name), the pods its selector counts (in its namespaces, or all) and, for a spread, its maxSkew
// and minDomains.
type Term struct {
	Kind          Kind
	KeyName       string
	Selector      labels.Selector
	AllNamespaces bool
	Namespaces    []string
	MaxSkew       int32
	MinDomains    int32
}

// Constraint is a topology constraint of one pod before it is matched to a group.
type Constraint struct {
	Term
	HonorNodeAffinity bool // spread: count only domains the pod's node affinity allows
	Hard              bool
	Weight            int32
}

// podAffinityTerms are the terms of a pod's podAffinity or podAntiAffinity (field).
type podAffinityTerms struct {
	kind      Kind
	field     string
	required  []corev1.PodAffinityTerm
	preferred []corev1.WeightedPodAffinityTerm
}

// ConstraintsOf lists a pod's topology spread constraints and pod (anti-)affinity terms, hard
// and soft. Soft ones are left out unless withSoft is set.
func ConstraintsOf(pod *corev1.Pod, withSoft bool) ([]Constraint, error) {
	var out []Constraint
	for i, tsc := range pod.Spec.TopologySpreadConstraints {
		sel, err := selectorOf(tsc.LabelSelector, tsc.MatchLabelKeys, pod)
		if err != nil {
			return nil, fmt.Errorf("topologySpreadConstraints[%d]: %w", i, err)
		}
		hard := tsc.WhenUnsatisfiable != corev1.ScheduleAnyway
		if !hard && !withSoft {
			continue
		}
		c := Constraint{Term: Term{Kind: Spread, KeyName: tsc.TopologyKey, Selector: sel, Namespaces: []string{pod.Namespace},
			MaxSkew: max(tsc.MaxSkew, 1)}, Hard: hard, HonorNodeAffinity: tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor}
		if tsc.MinDomains != nil {
			c.MinDomains = *tsc.MinDomains
		}
		out = append(out, c)
	}
	aff := pod.Spec.Affinity
	if aff == nil {
		return out, nil
	}
	// add adds term i of set (required when hard, else preferred with weight); the message of an
	// error names the term.
	add := func(set *podAffinityTerms, i int, term corev1.PodAffinityTerm, hard bool, weight int32) error {
		sel, err := selectorOf(term.LabelSelector, term.MatchLabelKeys, pod)
		if err != nil {
			which := "preferred"
			if hard {
				which = "required"
			}
			return fmt.Errorf("%s %s term %d: %w", set.field, which, i, err)
		}
		c := Constraint{Term: Term{Kind: set.kind, KeyName: term.TopologyKey, Selector: sel}, Hard: hard, Weight: weight}
		switch {
		case term.NamespaceSelector != nil:
			// Namespace labels are not an input; any namespace selector is taken as all namespaces.
			c.AllNamespaces = true
		case len(term.Namespaces) > 0:
			c.Namespaces = slices.Clone(term.Namespaces)
			slices.Sort(c.Namespaces)
			c.Namespaces = slices.Compact(c.Namespaces)
		default:
			c.Namespaces = []string{pod.Namespace}
		}
		out = append(out, c)
		return nil
	}
	sets := [...]podAffinityTerms{{kind: Affinity, field: "podAffinity"}, {kind: AntiAffinity, field: "podAntiAffinity"}}
	if pa := aff.PodAffinity; pa != nil {
		sets[0].required, sets[0].preferred = pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution
	}
	if pa := aff.PodAntiAffinity; pa != nil {
		sets[1].required, sets[1].preferred = pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution
	}
	for _, set := range sets {
		for i, term := range set.required {
			if err := add(&set, i, term, true, 0); err != nil {
				return nil, err
			}
		}
		if !withSoft {
			continue
		}
		for i, wt := range set.preferred {
			if err := add(&set, i, wt.PodAffinityTerm, false, wt.Weight); err != nil {
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

// GroupFor returns the group of a constraint, creating it. When a spread honours node affinity,
// reachable says whether a node the pod could use (one of its alternative requirements) can be in
// a domain; only such domains count for the spread's minimum.
func (t *Topology) GroupFor(c Constraint, alternatives []requirements.Requirements, reachable func(alt requirements.Requirements, key, value string) bool) int32 {
	key := t.KeyIndex(c.KeyName)
	var eligible []bool
	if c.Kind == Spread && c.HonorNodeAffinity && key != HostnameKey && reachable != nil {
		k := t.Keys[key]
		eligible = make([]bool, len(k.Domains))
		all := true
		for d, v := range k.Domains {
			for _, alt := range alternatives {
				if reachable(alt, k.Name, v) {
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
	fmt.Fprintf(&id, "%d|%d|%s|%v|%s|%d|%d|", c.Kind, key, c.Selector, c.AllNamespaces, strings.Join(c.Namespaces, ","), c.MaxSkew, c.MinDomains)
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
	g := &Group{Term: c.Term, Key: key, Eligible: eligible}
	if c.Kind != Spread {
		g.MaxSkew = 0
	}
	if key != HostnameKey {
		g.Grow(len(t.Keys[key].Domains))
	}
	t.Groups = append(t.Groups, g)
	t.byID[id.String()] = int32(len(t.Groups) - 1)
	return int32(len(t.Groups) - 1)
}

// GroupCount is a per-node count of one group, kept in short slices on each node.
type GroupCount struct {
	Group int32
	Count int32
}

// CountOf returns the count of group g in cs.
func CountOf(cs []GroupCount, g int32) int32 {
	for _, c := range cs {
		if c.Group == g {
			return c.Count
		}
	}
	return 0
}

// AddCount adds delta to the count of group g in cs, adding an entry for a group not counted
// yet when delta is positive.
func AddCount(cs []GroupCount, g int32, delta int32) []GroupCount {
	for i := range cs {
		if cs[i].Group == g {
			cs[i].Count += delta
			return cs
		}
	}
	if delta <= 0 {
		return cs
	}
	return append(cs, GroupCount{Group: g, Count: delta})
}
