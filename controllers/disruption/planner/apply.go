package planner

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// Apply returns the cluster as it will be once cmd has completed: the candidates gone, their pods
// (and any pending pod the simulation placed) on the nodes the simulation chose, and each
// replacement an initialized node of its cheapest option. A moved pod is a new pod of its workload,
// created at c.Now (its controller makes it again after the eviction), so the churn guard's
// cooldown covers it. c is not changed. The dry-run view uses it to show the passes after the
// next one, and benchmarks to run passes until nothing is left to do.
func Apply(c *Cluster, cmd *Command) *Cluster {
	out := *c
	out.Input.ExistingNodes = nil
	out.Nodes = nil
	out.RecentlyMoved = maps.Clone(c.RecentlyMoved)
	if out.RecentlyMoved == nil {
		out.RecentlyMoved = map[types.UID]time.Time{}
	}
	removed := map[string]bool{}
	moved := map[types.UID]bool{}
	for _, cand := range cmd.Candidates {
		removed[cand.Name()] = true
		if len(cmd.Replacements) > 0 || cmd.Results != nil {
			for _, pod := range cand.reschedulable {
				moved[pod.UID] = true
				if ref := metav1.GetControllerOf(pod); ref != nil {
					out.RecentlyMoved[ref.UID] = c.Now
				}
			}
		}
	}
	// recreated returns the pods as they run on node: a moved pod as a new pod created now.
	recreated := func(pods []*corev1.Pod, node string) []*corev1.Pod {
		out := slices.Clone(pods)
		for i, pod := range out {
			if moved[pod.UID] {
				cp := pod.DeepCopy()
				cp.CreationTimestamp = metav1.NewTime(c.Now)
				cp.Spec.NodeName = node
				out[i] = cp
			}
		}
		return out
	}
	added := map[string][]*corev1.Pod{}
	placed := map[types.UID]bool{}
	if cmd.Results != nil {
		for _, pl := range cmd.Results.ExistingNodes {
			added[pl.Node.Name] = append(added[pl.Node.Name], recreated(pl.Pods, pl.Node.Name)...)
			for _, pod := range pl.Pods {
				placed[pod.UID] = true
			}
		}
	}
	for _, n := range c.Nodes {
		if removed[n.Name()] {
			continue
		}
		if pods := added[n.Name()]; len(pods) > 0 {
			n = &Node{Node: n.Node, NodeClaim: n.NodeClaim, Pods: append(slices.Clone(n.Pods), pods...)}
		}
		out.Nodes = append(out.Nodes, n)
	}
	for _, en := range c.Input.ExistingNodes {
		if removed[en.Name] {
			continue
		}
		if pods := added[en.Name]; len(pods) > 0 {
			cp := *en
			cp.Pods = append(slices.Clone(en.Pods), pods...)
			en = &cp
		}
		out.Input.ExistingNodes = append(out.Input.ExistingNodes, en)
	}
	for i, plan := range cmd.Replacements {
		n := LaunchNode(plan, fmt.Sprintf("%s-replacement-%d", commandName(cmd), i), c.Now)
		n.NodeClaim.Annotations = map[string]string{ReplacementForAnnotationKey: commandName(cmd)}
		n.Pods = recreated(n.Pods, n.Name())
		out.Nodes = append(out.Nodes, n)
		out.Input.ExistingNodes = append(out.Input.ExistingNodes, scheduling.NewExistingNode(n.Node, n.Pods, plan.NodePool.Name, true, nil))
		for _, pod := range plan.Pods {
			placed[pod.UID] = true
		}
	}
	out.Input.Pods = nil
	for _, pod := range c.Input.Pods {
		if !placed[pod.UID] {
			out.Input.Pods = append(out.Input.Pods, pod)
		}
	}
	return &out
}

func commandName(cmd *Command) string {
	if cmd.ID != "" {
		return cmd.ID
	}
	return "planned-" + cmd.Candidates[0].Name()
}

// LaunchNode returns the initialized, consolidatable Node and NodeClaim that launching plan would
// give: its cheapest option in its cheapest compatible available offering, holding the plan's pods.
func LaunchNode(plan *scheduling.NodeClaimPlan, name string, now time.Time) *Node {
	var it *cloudprovider.InstanceType
	var offering *cloudprovider.Offering
	best := math.Inf(1)
	for _, option := range plan.InstanceTypeOptions {
		if o, ok := option.Offerings.Available().CheapestCompatible(plan.Requirements); ok && o.Price < best {
			it, offering, best = option, o, o.Price
		}
	}
	nc := plan.NodeClaim()
	nc.Name = name
	nc.CreationTimestamp = metav1.NewTime(now)
	labels := maps.Clone(nc.Labels)
	if it != nil {
		maps.Copy(labels, it.Requirements.Labels())
		labels[karpv1.LabelInstanceType] = it.Name
		labels[karpv1.LabelTopologyZone] = offering.Zone()
		labels[karpv1.CapacityTypeLabelKey] = offering.CapacityType()
		nc.Status.Capacity = it.Capacity
		nc.Status.Allocatable = it.Allocatable()
	}
	labels[karpv1.LabelHostname] = name
	nc.Labels = labels
	nc.Status.ProviderID = "planned://" + name
	nc.Status.NodeName = name
	for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeConsolidatable} {
		nc.SetCondition(now, t, metav1.ConditionTrue, t, "")
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(now)},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: karpv1.TaintsToCore(nc.Spec.Taints)},
		Status: corev1.NodeStatus{
			Capacity: nc.Status.Capacity, Allocatable: nc.Status.Allocatable,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	return &Node{Node: node, NodeClaim: nc, Pods: slices.Clone(plan.Pods)}
}

// DryRun runs up to passes passes from c, applying each command to the cluster before the next
// (as if each completed at once), and returns the plans; it stops after the first pass with no
// command. It changes nothing in c.
func (p *Planner) DryRun(ctx context.Context, c *Cluster, passes int) ([]*Plan, error) {
	var out []*Plan
	for i := 0; i < passes; i++ {
		plan, err := p.Plan(ctx, c)
		if err != nil {
			return out, err
		}
		out = append(out, plan)
		if plan.Command == nil {
			break
		}
		plan.Command.ID = fmt.Sprintf("pass-%d", i+1)
		c = Apply(c, plan.Command)
	}
	return out, nil
}
