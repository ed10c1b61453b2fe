package scheduling

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
)

type prefKind uint8

// Kinds of soft constraint. The weighted ones (pod anti-affinity, pod affinity, node affinity)
// are dropped first, lightest first whatever their kind, in this kind order among equal weights;
// then ScheduleAnyway spreads, then PreferNoSchedule avoidance, then prefOthersSpread.
const (
	prefAntiAffinity prefKind = iota
	prefAffinity
	prefNodeAffinity
	prefSpread
	prefTaints
	// prefOthersSpread is not the pod's own: it keeps the topology spread of the pods that
	// select it balanced (which the Kubernetes scheduler does not demand), and is dropped last.
	prefOthersSpread
)

// preference is one soft constraint of a pod.
type preference struct {
	kind   prefKind
	weight int32
	group  int32 // for the pod (anti-)affinity and spread kinds
	node   int   // index into podInfo.prefNode
}

// owned is a topology group a pod declares.
type owned struct {
	group int32
	hard  bool
}

// hostPort is a host port a pod binds.
type hostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

func (a hostPort) conflicts(b hostPort) bool {
	if a.port != b.port || a.protocol != b.protocol {
		return false
	}
	wild := func(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
	return a.ip == b.ip || wild(a.ip) || wild(b.ip)
}

// podInfo is a pod prepared for the simulation.
type podInfo struct {
	pod      *corev1.Pod
	requests resources.Vec
	// terms are the alternative node requirements (required node affinity terms with the
	// nodeSelector, intersected with those of its volumes); terms without their hostname
	// requirement are in noHost.
	terms  []requirements.Requirements
	noHost []requirements.Requirements
	// volumes are where the pod's volumes can be used (volumes.go), for explanations.
	volumes []volumeTopology
	// prefNode are the preferred node affinity terms, heaviest first.
	prefNode []requirements.Preference
	// prefs are the soft constraints in the order they are dropped; the first dropped are gone.
	prefs   []preference
	dropped int
	// active are terms intersected with the preferred node affinity terms still in force.
	active       []requirements.Requirements
	activeNoHost []requirements.Requirements
	ownedGroups  []owned
	// activeGroups are the groups the pod declares that are in force: the hard ones and the soft
	// ones not dropped yet.
	activeGroups []int32
	selectedBy   []int32 // groups whose selector counts the pod
	keys         []int32 // non-hostname topology keys the pod must have a fixed domain for
	ports        []hostPort
	// tolerance per template: 0 ok, 1 only a PreferNoSchedule taint is not tolerated, 2 no.
	tolerance []uint8
	err       error
	order     int
	// separate is set for pods whose required hostname anti-affinity selects themselves: each
	// needs a node of its own, so they are placed first.
	separate bool
	// size is the pod's dominant share: the larger of its cpu and memory in units of the
	// reference shape.
	size float64
	// buffer is set for a virtual pod (a CapacityBuffer's unit or an expected pod,
	// podpredicates.IsVirtualPod): it is placed after every real pod, so that real pods take the
	// free room first.
	buffer bool
}

func (p *podInfo) name() string { return p.pod.Namespace + "/" + p.pod.Name }

// newPodInfo prepares the pod's requests, node requirements (with those of its volumes, looked up
// in volumes, which may be nil), host ports and soft node affinity. Topology is prepared by the
// solver once every key is known. preferNoSchedule says whether any node or NodePool has a
// PreferNoSchedule taint worth avoiding.
func newPodInfo(pod *corev1.Pod, withSoft, preferNoSchedule bool, volumes *Volumes) *podInfo {
	return newPodInfoWith(pod, resources.PodRequests(pod), withSoft, preferNoSchedule, volumes)
}

// newPodInfoWith is newPodInfo for a pod whose requests (resources.PodRequests) are known.
func newPodInfoWith(pod *corev1.Pod, requests resources.Vec, withSoft, preferNoSchedule bool, volumes *Volumes) *podInfo {
	p := &podInfo{pod: pod, requests: requests, buffer: podpredicates.IsVirtualPod(pod)}
	terms, err := requirements.ForPod(pod)
	if err == nil {
		if p.volumes, err = volumes.topologyOf(pod); err == nil {
			terms, err = withVolumes(pod, terms, p.volumes)
		}
	}
	if err != nil {
		p.err = err
		return p
	}
	p.terms = terms
	p.noHost = make([]requirements.Requirements, len(terms))
	for i, t := range terms {
		p.noHost[i] = withoutHostname(t)
	}
	if withSoft {
		prefs, err := requirements.PreferencesForPod(pod)
		if err != nil {
			p.err = err
			return p
		}
		p.prefNode = prefs
		for i, pr := range prefs {
			p.prefs = append(p.prefs, preference{kind: prefNodeAffinity, weight: pr.Weight, node: i})
		}
		if preferNoSchedule {
			p.prefs = append(p.prefs, preference{kind: prefTaints})
		}
	}
	p.ports = hostPortsOf(pod)
	return p
}

// hostPortsOf returns the host ports the pod's containers bind.
func hostPortsOf(pod *corev1.Pod) []hostPort {
	var out []hostPort
	for i := range pod.Spec.Containers {
		for _, port := range pod.Spec.Containers[i].Ports {
			if port.HostPort > 0 {
				proto := port.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{ip: port.HostIP, protocol: proto, port: port.HostPort})
			}
		}
	}
	return out
}

func withoutHostname(r requirements.Requirements) requirements.Requirements {
	if !r.Has(karpv1.LabelHostname) {
		return r
	}
	var out []requirements.Requirement
	for _, it := range r.Items() {
		if it.Key() != karpv1.LabelHostname {
			out = append(out, it)
		}
	}
	return requirements.New(out...)
}

// sortPrefs orders the soft constraints for dropping: the weighted ones lightest first (kind
// order among equal weights, then declaration order), then the unweighted ones by kind.
func (p *podInfo) sortPrefs() {
	weighted := func(k prefKind) int {
		if k <= prefNodeAffinity {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(p.prefs, func(a, b preference) int {
		if c := cmp.Compare(weighted(a.kind), weighted(b.kind)); c != 0 {
			return c
		}
		if weighted(a.kind) == 0 {
			if c := cmp.Compare(a.weight, b.weight); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.kind, b.kind)
	})
	p.refreshActive()
}

// relax drops the next soft constraint, reporting false when none is left.
func (p *podInfo) relax() bool {
	if p.dropped >= len(p.prefs) {
		return false
	}
	p.dropped++
	p.refreshActive()
	return true
}

// avoidsPreferNoSchedule reports whether the pod still avoids untolerated PreferNoSchedule taints.
func (p *podInfo) avoidsPreferNoSchedule() bool { return p.keeps(prefTaints) }

// keepsOthersSpread reports whether placing the pod must keep the spread of the pods that select
// it within their skew.
func (p *podInfo) keepsOthersSpread() bool { return p.keeps(prefOthersSpread) }

func (p *podInfo) keeps(kind prefKind) bool {
	for i := p.dropped; i < len(p.prefs); i++ {
		if p.prefs[i].kind == kind {
			return true
		}
	}
	return false
}

// refreshActive recomputes the groups and the node requirements still in force.
func (p *podInfo) refreshActive() {
	p.activeGroups = p.activeGroups[:0]
	for _, o := range p.ownedGroups {
		p.activeGroups = append(p.activeGroups, o.group)
	}
	for i := p.dropped; i < len(p.prefs); i++ {
		if pr := p.prefs[i]; pr.kind == prefAntiAffinity || pr.kind == prefAffinity || pr.kind == prefSpread {
			p.activeGroups = append(p.activeGroups, pr.group)
		}
	}
	var extra requirements.Requirements
	for i := p.dropped; i < len(p.prefs); i++ {
		if pr := p.prefs[i]; pr.kind == prefNodeAffinity {
			extra = extra.Intersect(p.prefNode[pr.node].Requirements)
		}
	}
	if extra.Len() == 0 {
		p.active, p.activeNoHost = p.terms, p.noHost
		return
	}
	p.active = make([]requirements.Requirements, len(p.terms))
	p.activeNoHost = make([]requirements.Requirements, len(p.terms))
	for i, t := range p.terms {
		p.active[i] = t.Intersect(extra)
		p.activeNoHost[i] = withoutHostname(p.active[i])
	}
}

// describePreference names a soft constraint for messages.
func (p *podInfo) describePreference(pr preference, t *topology.Topology) string {
	switch pr.kind {
	case prefNodeAffinity:
		return fmt.Sprintf("preferred node affinity %s (weight %d)", p.prefNode[pr.node].Requirements, pr.weight)
	case prefTaints:
		return "avoiding PreferNoSchedule taints"
	case prefOthersSpread:
		return "keeping the topology spread of the pods that select it"
	}
	return "preferred " + t.Groups[pr.group].Describe()
}
