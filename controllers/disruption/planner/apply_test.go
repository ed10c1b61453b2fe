package planner

import (
	"slices"
	"strings"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// TestApplyRecreatesMovedPods checks that Apply models an eviction as the workload's controller
// does: the moved pod is a new pod, created at the pass's time on its new node, so the node that
// received it cools down; the pods that stayed keep their age.
func TestApplyRecreatesMovedPods(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default"), itype("a", "4", "8Gi", 1.0))
	f.odNode("n1", "default", "a", pod("n1-pinned", "3", "1Gi", withNodeSelector(karpv1.LabelHostname, "n1")))
	f.odNode("n2", "default", "a", pod("n2-small", "500m", "1Gi"))
	c := f.cluster()
	p := newPlanner(Options{})
	pl := plan(t, p, c)
	if pl.Command == nil || !slices.Equal(candidateNames(pl.Command), []string{"n2"}) || pl.Command.Decision() != "delete" {
		t.Fatalf("command %v, want a delete of n2", pl.Command)
	}
	next := Apply(c, pl.Command)
	if len(next.Nodes) != 1 || next.Nodes[0].Name() != "n1" {
		t.Fatalf("nodes after the delete: %d", len(next.Nodes))
	}
	ages := map[string]time.Time{}
	for _, p := range next.Nodes[0].Pods {
		ages[p.Name] = p.CreationTimestamp.Time
		if p.Spec.NodeName != "n1" {
			t.Errorf("pod %s on %q, want n1", p.Name, p.Spec.NodeName)
		}
	}
	if !ages["n2-small"].Equal(c.Now) || !ages["n1-pinned"].Equal(t0.Add(-time.Hour)) {
		t.Errorf("creation times %v, want n2-small at %v and n1-pinned unchanged", ages, c.Now)
	}
	if orig := c.Nodes[1].Pods[0]; !orig.CreationTimestamp.Time.Equal(t0.Add(-time.Hour)) || orig.Spec.NodeName != "n2" {
		t.Errorf("Apply changed the original pod: %v on %s", orig.CreationTimestamp, orig.Spec.NodeName)
	}
	// n1 now holds a new pod of a moved workload: it is left alone within the cooldown.
	if v := verdictOf(t, plan(t, p, next), "n1"); !strings.Contains(v.Message, "was moved by a disruption") {
		t.Errorf("n1 verdict %+v, want the cooldown", v)
	}
}
