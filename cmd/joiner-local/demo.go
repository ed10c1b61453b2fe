package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// demoReplicas is how far the demo scales the inflate Deployment.
const demoReplicas = 10

// timeline records when each milestone of the demo was first seen.
type timeline struct {
	start  time.Time
	events []milestone
	seen   map[string]bool
}

type milestone struct {
	at   time.Duration
	what string
}

func (tl *timeline) mark(key, what string) {
	if tl.seen[key] {
		return
	}
	tl.seen[key] = true
	tl.events = append(tl.events, milestone{at: time.Since(tl.start), what: what})
}

func (tl *timeline) print(out io.Writer) {
	sort.SliceStable(tl.events, func(i, j int) bool { return tl.events[i].at < tl.events[j].at })
	for _, e := range tl.events {
		fmt.Fprintf(out, "  %7.2fs  %s\n", e.at.Seconds(), e.what)
	}
}

// runDemo scales the inflate Deployment up and prints the timeline: pods pending, NodeClaims
// created, Nodes Ready (with the $/h of each node launched, priced by cp), pods Running with what
// the nodes cost in all; then scales it to 0 and prints how the empty nodes go. It returns once
// every node is gone, or with an error at timeout.
func runDemo(ctx context.Context, cfg *rest.Config, cp cloudprovider.CloudProvider, out io.Writer, timeout time.Duration) error {
	scheme, err := apischeme.New()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "inflate"}, d); err != nil {
		return fmt.Errorf("the demo needs the inflate Deployment of config/samples/local: %w", err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptrInt32(demoReplicas)
	tl := &timeline{start: time.Now(), seen: map[string]bool{}}
	if err := c.Patch(ctx, d, patch); err != nil {
		return fmt.Errorf("scale inflate: %w", err)
	}
	fmt.Fprintf(out, "\nScaled deployment inflate to %d replicas of 1 CPU. Timeline:\n", demoReplicas)
	tl.mark("scaled", fmt.Sprintf("kubectl scale deployment inflate --replicas %d", demoReplicas))

	prices := map[string]float64{} // $/h of each launched NodeClaim whose price is known, by name
	return watchInflate(ctx, c, tl, out, timeout, "not every pod was Running", func(pods []corev1.Pod, claims []karpv1.NodeClaim) (bool, error) {
		running := 0
		for _, p := range pods {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
					tl.mark("pending", "pods Pending: kube-scheduler found no node (Unschedulable)")
				}
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
				tl.mark("first-running", fmt.Sprintf("first pod Running on %s", p.Spec.NodeName))
			}
		}
		for _, nc := range claims {
			tl.mark("nc-"+nc.Name, fmt.Sprintf("NodeClaim %s created (%s)", nc.Name, describeClaim(&nc)))
			if launched := "launched-" + nc.Name; meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) && !tl.seen[launched] {
				price := "price unknown"
				if p, err := launchPrice(ctx, c, cp, &nc); err != nil {
					price += " (" + err.Error() + ")"
				} else {
					prices[nc.Name] = p
					price = fmt.Sprintf("$%.4f/h", p)
				}
				tl.mark(launched, fmt.Sprintf("NodeClaim %s launched: %s %s in %s, %s", nc.Name,
					nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[karpv1.CapacityTypeLabelKey], nc.Labels[corev1.LabelTopologyZone], price))
			}
			if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeReady) {
				tl.mark("ready-"+nc.Name, fmt.Sprintf("Node %s Ready (NodeClaim %s initialized)", nc.Status.NodeName, nc.Name))
			}
		}
		if running != demoReplicas {
			return false, nil
		}
		tl.mark("all-running", fmt.Sprintf("all %d pods Running on %d nodes, %s", demoReplicas, len(claims), describeCost(prices, len(claims))))
		tl.print(out)
		return true, scaleDown(ctx, c, d, out, timeout)
	})
}

// watchInflate lists the inflate pods and the NodeClaims every 100 ms and hands them to step until
// step is done or fails. When timeout passes first it prints tl and fails with "<failure> within
// <timeout>".
func watchInflate(ctx context.Context, c client.Reader, tl *timeline, out io.Writer, timeout time.Duration, failure string,
	step func(pods []corev1.Pod, claims []karpv1.NodeClaim) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		claims := &karpv1.NodeClaimList{}
		if err := c.List(ctx, claims); err != nil {
			return fmt.Errorf("list nodeclaims: %w", err)
		}
		if done, err := step(pods.Items, claims.Items); done || err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	tl.print(out)
	return fmt.Errorf("%s within %s", failure, timeout)
}

// scaleDown scales inflate back to 0 and prints the timeline of consolidation: pods Terminating,
// empty nodes marked for disruption, their NodeClaims deleted, and the Nodes gone. It returns once
// no NodeClaim is left, or with an error at timeout.
func scaleDown(ctx context.Context, c client.Client, d *appsv1.Deployment, out io.Writer, timeout time.Duration) error {
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptrInt32(0)
	tl := &timeline{start: time.Now(), seen: map[string]bool{}}
	if err := c.Patch(ctx, d, patch); err != nil {
		return fmt.Errorf("scale inflate down: %w", err)
	}
	fmt.Fprintln(out, "\nScaled deployment inflate to 0. The NodePool consolidates empty nodes after its consolidateAfter (1m), then a 15 s validation. Timeline:")
	tl.mark("scaled", "kubectl scale deployment inflate --replicas 0")
	return watchInflate(ctx, c, tl, out, timeout, "the empty nodes were not all removed", func(pods []corev1.Pod, claims []karpv1.NodeClaim) (bool, error) {
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				tl.mark("terminating", "pods Terminating")
			}
		}
		if len(pods) == 0 {
			tl.mark("pods-gone", "every inflate pod gone")
		}
		for _, nc := range claims {
			if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeConsolidatable); cond != nil && cond.Status == "True" {
				tl.mark("consolidatable-"+nc.Name, fmt.Sprintf("NodeClaim %s Consolidatable (no pod event for consolidateAfter)", nc.Name))
			}
			if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); cond != nil && cond.Status == "True" {
				tl.mark("disrupted-"+nc.Name, fmt.Sprintf("Node %s tainted karpenter.sh/disrupted (DisruptionReason %s)", nc.Status.NodeName, cond.Reason))
			}
			if nc.DeletionTimestamp != nil {
				tl.mark("deleting-"+nc.Name, fmt.Sprintf("NodeClaim %s deleted: draining and terminating %s", nc.Name, nc.Status.NodeName))
			}
		}
		nodes := &corev1.NodeList{}
		if err := c.List(ctx, nodes, client.HasLabels{karpv1.NodePoolLabelKey}); err != nil {
			return false, fmt.Errorf("list nodes: %w", err)
		}
		if len(claims) != 0 || len(nodes.Items) != 0 {
			return false, nil
		}
		tl.mark("all-gone", "every NodeClaim and Node removed")
		tl.print(out)
		return true, nil
	})
}

// launchPrice returns the hourly price of the offering a launched NodeClaim runs on: the offering
// of its instance type in its zone with its capacity type (its labels), among the instance types
// cp offers its NodePool.
func launchPrice(ctx context.Context, c client.Reader, cp cloudprovider.CloudProvider, nc *karpv1.NodeClaim) (float64, error) {
	np := &karpv1.NodePool{}
	if err := c.Get(ctx, types.NamespacedName{Name: nc.Labels[karpv1.NodePoolLabelKey]}, np); err != nil {
		return 0, fmt.Errorf("get its NodePool: %w", err)
	}
	its, err := cp.GetInstanceTypes(ctx, np)
	if err != nil {
		return 0, fmt.Errorf("instance types of NodePool %s: %w", np.Name, err)
	}
	name, zone, capacityType := nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], nc.Labels[karpv1.CapacityTypeLabelKey]
	for _, it := range its {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone() == zone && o.CapacityType() == capacityType {
				return o.Price, nil
			}
		}
	}
	return 0, fmt.Errorf("NodePool %s offers no %s %s in %s", np.Name, capacityType, name, zone)
}

// describeCost sums the $/h of the nodes (prices by NodeClaim name, of nodes NodeClaims in all):
// "$0.2880/h in all", or "$0.1920/h for the 2 of 3 nodes with a known price".
func describeCost(prices map[string]float64, nodes int) string {
	total := 0.0
	for _, name := range slices.Sorted(maps.Keys(prices)) {
		total += prices[name]
	}
	if len(prices) >= nodes {
		return fmt.Sprintf("$%.4f/h in all", total)
	}
	return fmt.Sprintf("$%.4f/h for the %d of %d nodes with a known price", total, len(prices), nodes)
}

func describeClaim(nc *karpv1.NodeClaim) string {
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable {
			n := len(r.Values)
			if n > 3 {
				return fmt.Sprintf("%d instance-type options: %v…", n, r.Values[:3])
			}
			return fmt.Sprintf("instance types %v", r.Values)
		}
	}
	return "any instance type"
}

func ptrInt32(v int32) *int32 { return &v }
