package planner

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// Event reasons a pass gives for the nodes it does not disrupt, as Karpenter v1.14 names them.
const (
	// ReasonDisruptionBlocked: the node cannot be disrupted at all right now (it is not
	// initialized, an annotation or a PodDisruptionBudget protects it, ...).
	ReasonDisruptionBlocked = "DisruptionBlocked"
	// ReasonUnconsolidatable: the node could be disrupted, but consolidation has nothing better
	// for it (consolidation disabled, not consolidatable yet, no cheaper option, ...).
	ReasonUnconsolidatable = "Unconsolidatable"
)

// Verdict says why a pass left a node alone.
type Verdict struct {
	// Node is the Node's name and NodeClaim its NodeClaim's ("" when unmanaged).
	Node, NodeClaim string
	// Reason is ReasonDisruptionBlocked or ReasonUnconsolidatable.
	Reason string
	// Message is the explanation, a sentence.
	Message string
}

// Candidate is a node a disruption method may act on.
type Candidate struct {
	*nodeInfo
}

// Node returns the candidate's node.
func (c *Candidate) Node() *Node { return c.node }

// Name is the candidate's Node name.
func (c *Candidate) Name() string { return c.node.Name() }

// NodePool returns the candidate's NodePool.
func (c *Candidate) NodePool() *karpv1.NodePool { return c.nodePool }

// Price is the hourly price of the candidate's offering.
func (c *Candidate) Price() float64 { return c.price }

// Reschedulable are the pods that need a new home when the candidate goes.
func (c *Candidate) Reschedulable() []*corev1.Pod { return c.reschedulable }

// Empty reports whether no reschedulable pod has a positive eviction cost (Karpenter v1.14).
func (c *Candidate) Empty() bool { return c.cost <= perNodeBaseDisruptionCost }

// SavingsRatio is price per unit of disruption cost; methods try the highest first.
func (c *Candidate) SavingsRatio() float64 { return c.price / c.cost }

// CapacityType is the candidate's karpenter.sh/capacity-type.
func (c *Candidate) CapacityType() string { return c.node.Node.Labels[karpv1.CapacityTypeLabelKey] }

// candidateSet is what the shared filters let through: graceful candidates pass every check
// (consolidation uses them); eventual candidates may also hold pods that a do-not-disrupt
// annotation or a PodDisruptionBudget protects, when their NodeClaim has a terminationGracePeriod
// that bounds the drain (drift and soft expiry use them, as Karpenter's eventual class).
type candidateSet struct {
	graceful, eventual []*Candidate
}

// candidates applies the filters every method shares, in Karpenter v1.14's order, to every managed
// node; nominated nodes (those the pending pods would be placed on) are blocked too. Nodes that
// fail get a DisruptionBlocked verdict (the first failure only), except those already being
// disrupted and unmanaged ones, which are skipped silently.
func (p *Planner) candidates(c *Cluster, infos map[string]*nodeInfo, nominated map[string]bool) (candidateSet, []Verdict) {
	var out candidateSet
	var verdicts []Verdict
	pdbs := newPDBIndex(c.PDBs)
	for _, n := range c.Nodes {
		if n.NodeClaim == nil || n.InCommand(c.InQueue) {
			continue
		}
		msg := p.blockedNode(c, n)
		if msg == "" && nominated[n.Name()] {
			msg = "Node is nominated for a pending pod"
		}
		podMsg := ""
		if msg == "" {
			podMsg = blockedByPods(c, n, pdbs)
		}
		if msg != "" || podMsg != "" {
			verdicts = append(verdicts, Verdict{Node: n.Name(), NodeClaim: n.NodeClaim.Name, Reason: ReasonDisruptionBlocked, Message: msg + podMsg})
		}
		cand := &Candidate{nodeInfo: infos[n.Name()]}
		if msg == "" && (podMsg == "" || n.NodeClaim.Spec.TerminationGracePeriod != nil) {
			out.eventual = append(out.eventual, cand)
		}
		if msg == "" && podMsg == "" {
			out.graceful = append(out.graceful, cand)
		}
	}
	return out, verdicts
}

// blockedNode returns why the node itself cannot be disrupted, "" when it can.
func (p *Planner) blockedNode(c *Cluster, n *Node) string {
	switch {
	case !n.Initialized():
		return "Node isn't initialized"
	case n.Deleting():
		return "Node is deleting or marked for deletion"
	case n.Node.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true":
		return fmt.Sprintf("Disruption is blocked through the %q annotation", karpv1.DoNotDisruptAnnotationKey)
	case n.NodePoolName() == "":
		return "Node doesn't have required label"
	case c.NodePools[n.NodePoolName()] == nil || len(c.instanceTypes(n.NodePoolName())) == 0:
		return fmt.Sprintf("NodePool not found (NodePool=%s)", n.NodePoolName())
	}
	return ""
}

// blockedByPods returns why the node's pods keep it (do-not-disrupt, PodDisruptionBudgets), ""
// when they do not.
func blockedByPods(c *Cluster, n *Node, pdbs *pdbIndex) string {
	for _, pod := range n.Pods {
		if isActive(pod) && podpredicates.DoNotDisruptActive(pod, c.Now) {
			return fmt.Sprintf("Pod has %q annotation", karpv1.DoNotDisruptAnnotationKey)
		}
	}
	for _, pod := range n.Pods {
		if !isEvictable(pod) {
			continue
		}
		if msg := pdbs.blocks(pod); msg != "" {
			return msg
		}
	}
	return ""
}

// pdbIndex finds the PodDisruptionBudgets that select a pod.
type pdbIndex struct {
	byNamespace map[string][]pdbSelector
}

type pdbSelector struct {
	pdb      *policyv1.PodDisruptionBudget
	selector labels.Selector
}

func newPDBIndex(pdbs []policyv1.PodDisruptionBudget) *pdbIndex {
	idx := &pdbIndex{byNamespace: map[string][]pdbSelector{}}
	for i := range pdbs {
		pdb := &pdbs[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil {
			continue
		}
		idx.byNamespace[pdb.Namespace] = append(idx.byNamespace[pdb.Namespace], pdbSelector{pdb: pdb, selector: sel})
	}
	return idx
}

// blocks returns why the pod's PodDisruptionBudgets would refuse its eviction now, "" when they
// would not.
func (idx *pdbIndex) blocks(pod *corev1.Pod) string {
	var matching []*policyv1.PodDisruptionBudget
	for _, s := range idx.byNamespace[pod.Namespace] {
		if s.selector.Matches(labels.Set(pod.Labels)) {
			matching = append(matching, s.pdb)
		}
	}
	switch {
	case len(matching) == 0:
		return ""
	case len(matching) > 1:
		return "Eviction does not support multiple PDBs"
	}
	pdb := matching[0]
	if pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow && !podReady(pod) {
		return ""
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		return "Pdb prevents pod evictions"
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// consolidatable reports whether the NodeClaim carries Consolidatable=True.
func consolidatable(n *Node) bool {
	return meta.IsStatusConditionTrue(n.NodeClaim.Status.Conditions, karpv1.ConditionTypeConsolidatable)
}

// cooling returns why the churn guard keeps the candidate where it is, "" when it does not: the
// node was launched by a disruption, or holds a pod a disruption moved, within the cooldown.
func (p *Planner) cooling(c *Cluster, cand *Candidate) string {
	if p.opts.Cooldown <= 0 {
		return ""
	}
	nc := cand.node.NodeClaim
	if nc.Annotations[ReplacementForAnnotationKey] != "" {
		if age := c.Now.Sub(nc.CreationTimestamp.Time); age < p.opts.Cooldown {
			return fmt.Sprintf("Node was launched by a disruption %s ago; it is left alone until the %s cooldown passes", age.Round(time.Second), p.opts.Cooldown)
		}
	}
	if len(c.RecentlyMoved) == 0 {
		return ""
	}
	for _, pod := range cand.reschedulable {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			continue
		}
		moved, ok := c.RecentlyMoved[ref.UID]
		if ok && c.Now.Sub(moved) < p.opts.Cooldown && !pod.CreationTimestamp.Time.Before(moved) {
			return fmt.Sprintf("Pod %s/%s was moved by a disruption %s ago; it is left alone until the %s cooldown passes", pod.Namespace, pod.Name, c.Now.Sub(moved).Round(time.Second), p.opts.Cooldown)
		}
	}
	return ""
}

// sortByIdleCost orders candidates by idle cost, highest first, then by name.
func sortByIdleCost(cands []*Candidate) {
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].idle != cands[j].idle {
			return cands[i].idle > cands[j].idle
		}
		return cands[i].Name() < cands[j].Name()
	})
}

// sortBySavingsRatio orders candidates by savings ratio, highest first, then by name so passes
// are deterministic.
func sortBySavingsRatio(cands []*Candidate) {
	sort.SliceStable(cands, func(i, j int) bool {
		ri, rj := cands[i].SavingsRatio(), cands[j].SavingsRatio()
		if ri != rj {
			return ri > rj
		}
		return cands[i].Name() < cands[j].Name()
	})
}
