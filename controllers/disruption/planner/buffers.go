package planner

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// CapacityBuffers and expected pods. The disruption controller adds the buffers' units (Karpenter's
// karpenter.sh/capacity-buffer-fake-pod annotation) and the pods workloads are still to create
// (package expectedpods) to Cluster.Input.Pods as virtual pods, after the real pending pods,
// exactly as the provisioner does; the planner then counts their room as used:
//   - nominated places them with the pending pods: an existing node that receives units and no
//     real pod is buffered. Emptiness leaves an empty buffered node alone (Unconsolidatable,
//     `Node "x" has buffer pods`, as Karpenter); it is not a consolidation candidate either,
//     since empty nodes are left to emptiness.
//   - every simulation places them again after the moved pods, so a command whose moves take
//     their room must launch room for them too (its replacements, priced as any), and a command
//     after which fewer units can be placed than before is refused (bufferLoss).

// hasRealPod reports whether pods hold a pod that is not virtual (a buffer's unit or an expected
// pod).
func hasRealPod(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if !podpredicates.IsVirtualPod(pod) {
			return true
		}
	}
	return false
}

// unplacedVirtual counts the buffer units and the expected pods results could not place.
func unplacedVirtual(results *scheduling.Results) (units, expected int) {
	for _, pe := range results.PodErrors {
		switch {
		case podpredicates.IsCapacityBufferPod(pe.Pod):
			units++
		case podpredicates.IsExpectedPod(pe.Pod):
			expected++
		}
	}
	return units, expected
}

// noteBuffers records, from the simulation of the pending pods alone, the existing nodes that
// receive virtual pods and no real pod (and which of them receive expected pods only), and how
// many units and expected pods cannot be placed at all.
func (ps *pass) noteBuffers(results *scheduling.Results) {
	ps.buffered, ps.expectedRoom = map[string]bool{}, map[string]bool{}
	for _, pl := range results.ExistingNodes {
		if len(pl.Pods) > 0 && !hasRealPod(pl.Pods) {
			ps.buffered[pl.Node.Name] = true
			ps.expectedRoom[pl.Node.Name] = !slices.ContainsFunc(pl.Pods, podpredicates.IsCapacityBufferPod)
		}
	}
	ps.bufferUnplaced, ps.expectedUnplaced = unplacedVirtual(results)
}

// bufferLoss explains why a simulation takes room from the buffers or the expected pods: more of
// them cannot be placed than before it (a NodePool limit keeps their room from being launched
// again); "" when it does not.
func (ps *pass) bufferLoss(results *scheduling.Results) string {
	units, expected := unplacedVirtual(results)
	var lost []string
	if units > ps.bufferUnplaced {
		lost = append(lost, fmt.Sprintf("%d CapacityBuffer unit(s) would lose their room", units-ps.bufferUnplaced))
	}
	if expected > ps.expectedUnplaced {
		lost = append(lost, fmt.Sprintf("%d pod(s) still to be created would lose their room", expected-ps.expectedUnplaced))
	}
	return strings.Join(lost, "; ")
}

// bufferMessage is the Unconsolidatable message of a node that holds virtual pods and no real one.
func (ps *pass) bufferMessage(c *Candidate) string {
	if ps.expectedRoom[c.Name()] {
		return fmt.Sprintf("Node %q has room for pods still to be created", c.Name())
	}
	return fmt.Sprintf("Node %q has buffer pods", c.Name())
}
