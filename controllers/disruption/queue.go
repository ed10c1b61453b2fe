package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/state"
)

// start carries out cmd's first steps: mark every candidate (annotations first, so that a crash
// from here on is resumed or rolled back, then the taint and the DisruptionReason condition),
// launch the replacements, and, for a delete, delete the candidates at once.
func (c *Controller) start(ctx context.Context, cmd *planner.Command) error {
	cmd.ID = strings.ToLower(string(cmd.Reason)) + "-" + rand.String(8)
	now := c.clock.Now()
	var marked []*karpv1.NodeClaim
	for _, cand := range cmd.Candidates {
		nc, err := c.mark(ctx, cand.Node(), cmd, now)
		if err != nil {
			c.log.Error(err, "mark a disruption candidate", "nodeclaim", cand.Node().NodeClaim.Name)
			if len(cmd.Replacements) > 0 {
				return errors.Join(err, c.rollback(ctx, cmd.ID, marked, nil, cmd, "marking failed"))
			}
			continue
		}
		marked = append(marked, nc)
	}
	if len(marked) == 0 {
		return errors.New("no candidate could be marked")
	}
	q := &queued{}
	for _, nc := range marked {
		q.candidates = append(q.candidates, nc.Name)
	}
	c.mu.Lock()
	c.queue[cmd.ID] = q
	c.mu.Unlock()
	c.log.Info("disrupting node(s)", "command", cmd.String(), "decision", cmd.Decision(), "nodes", len(marked),
		"pods", podCount(cmd), "replacementTypes", replacementTypes(cmd))
	var created []*karpv1.NodeClaim
	for _, plan := range cmd.Replacements {
		nc := plan.NodeClaim()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[planner.ReplacementForAnnotationKey] = cmd.ID
		if err := c.gate.Create(ctx, nc, plan.Pods); err != nil {
			return errors.Join(fmt.Errorf("create a replacement NodeClaim: %w", err), c.rollback(ctx, cmd.ID, marked, created, cmd, "launching a replacement failed"))
		}
		created = append(created, nc)
		c.mu.Lock()
		q.replacements = append(q.replacements, nc.Name)
		c.mu.Unlock()
		c.metrics.NodeClaimsCreated.WithLabelValues(lowerReason(cmd.Reason), plan.NodePool.Name, strconv.FormatBool(plan.MinValuesRelaxed)).Inc()
		c.event(nc, corev1.EventTypeNormal, "DisruptionLaunching", time.Minute, "Launching NodeClaim: %s", cmd.Reason)
	}
	c.metrics.Decisions.WithLabelValues(cmd.Decision(), lowerReason(cmd.Reason), consolidationType(cmd.Type)).Inc()
	for _, pool := range cmd.NodePoolNames() {
		c.metrics.DecisionsByNodePool.WithLabelValues(pool, cmd.Decision(), lowerReason(cmd.Reason), consolidationType(cmd.Type)).Inc()
	}
	if len(cmd.Replacements) == 0 {
		return c.terminate(ctx, marked, cmd.Reason, now, nil)
	}
	return nil
}

// mark annotates the candidate's NodeClaim with the command, taints its Node and sets its
// DisruptionReason condition. It returns the NodeClaim as written.
func (c *Controller) mark(ctx context.Context, n *planner.Node, cmd *planner.Command, now time.Time) (*karpv1.NodeClaim, error) {
	nc := n.NodeClaim.DeepCopy()
	orig := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[planner.CommandAnnotationKey] = cmd.ID
	nc.Annotations[planner.CommandStartedAnnotationKey] = now.UTC().Format(time.RFC3339)
	nc.Annotations[planner.ReplacementsAnnotationKey] = strconv.Itoa(len(cmd.Replacements))
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("annotate NodeClaim %s: %w", nc.Name, err)
	}
	if err := c.taint(ctx, n.Node.Name, true); err != nil {
		return nc, err
	}
	orig = nc.DeepCopy()
	nc.SetCondition(now, karpv1.ConditionTypeDisruptionReason, metav1.ConditionTrue, string(cmd.Reason), string(cmd.Reason))
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(orig)); err != nil {
		return nc, fmt.Errorf("set the DisruptionReason of NodeClaim %s: %w", nc.Name, err)
	}
	return nc, nil
}

// taint adds (or removes) karpenter.sh/disrupted:NoSchedule on the Node, with optimistic locking.
func (c *Controller) taint(ctx context.Context, nodeName string, add bool) error {
	var node corev1.Node
	if err := c.kube.Get(ctx, types.NamespacedName{Name: nodeName}, &node); err != nil {
		if apierrors.IsNotFound(err) && !add {
			return nil
		}
		return fmt.Errorf("get Node %s: %w", nodeName, err)
	}
	orig := node.DeepCopy()
	taint := karpv1.DisruptedNoScheduleTaint()
	has := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
	switch {
	case add && has, !add && !has:
		return nil
	case add:
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taint.Key })
		node.Spec.Taints = append(node.Spec.Taints, taint)
	default:
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
	}
	if err := c.kube.Patch(ctx, &node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update the taints of Node %s: %w", nodeName, err)
	}
	return nil
}

// commandState is a command as the NodeClaims record it.
type commandState struct {
	id           string
	reason       karpv1.DisruptionReason
	candidates   []*karpv1.NodeClaim
	replacements []*karpv1.NodeClaim
	expected     int
	started      time.Time
}

// progress moves every command in flight along: candidates are deleted once every replacement is
// Initialized; a command whose replacement is gone or that timed out is rolled back.
func (c *Controller) progress(ctx context.Context, snapshot *state.ClusterState, now time.Time) error {
	cmds := map[string]*commandState{}
	get := func(id string) *commandState {
		if cmds[id] == nil {
			cmds[id] = &commandState{id: id}
		}
		return cmds[id]
	}
	for i := range snapshot.NodeClaims {
		nc := &snapshot.NodeClaims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if id := nc.Annotations[planner.CommandAnnotationKey]; id != "" {
			cs := get(id)
			cs.candidates = append(cs.candidates, nc)
			cs.expected, _ = strconv.Atoi(nc.Annotations[planner.ReplacementsAnnotationKey])
			if t, err := time.Parse(time.RFC3339, nc.Annotations[planner.CommandStartedAnnotationKey]); err == nil {
				cs.started = t
			}
			if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason); cond != nil {
				cs.reason = karpv1.DisruptionReason(cond.Reason)
			}
		}
		if id := nc.Annotations[planner.ReplacementForAnnotationKey]; id != "" {
			get(id).replacements = append(get(id).replacements, nc)
		}
	}
	var errs []error
	for id, cs := range cmds {
		if len(cs.candidates) == 0 {
			continue
		}
		if cs.reason == "" {
			cs.reason = karpv1.DisruptionReason(strings.SplitN(id, "-", 2)[0])
		}
		if now.Sub(cs.started) > c.opts.CommandTimeout {
			errs = append(errs, c.rollback(ctx, id, cs.candidates, cs.replacements, nil, fmt.Sprintf("replacements not initialized within %s", c.opts.CommandTimeout)))
			continue
		}
		if len(cs.replacements) < cs.expected {
			if c.replacementsPending(ctx, id, cs) {
				continue
			}
			errs = append(errs, c.rollback(ctx, id, cs.candidates, cs.replacements, nil, "a replacement was deleted before it initialized"))
			continue
		}
		ready := true
		for _, r := range cs.replacements {
			if !meta.IsStatusConditionTrue(r.Status.Conditions, karpv1.ConditionTypeInitialized) {
				ready = false
				c.event(r, corev1.EventTypeNormal, "DisruptionWaitingReadiness", time.Minute, "Waiting on readiness to continue disruption")
			}
		}
		if ready {
			errs = append(errs, c.terminate(ctx, cs.candidates, cs.reason, now, snapshot))
		}
	}
	c.mu.Lock()
	for id := range c.queue {
		if cs := cmds[id]; cs == nil || len(cs.candidates) == 0 {
			delete(c.queue, id)
		}
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}

// replacementsPending reports whether the replacements the cache does not show yet exist: this
// process created them and the API server still has them.
func (c *Controller) replacementsPending(ctx context.Context, id string, cs *commandState) bool {
	c.mu.Lock()
	q := c.queue[id]
	var names []string
	if q != nil {
		names = slices.Clone(q.replacements)
	}
	c.mu.Unlock()
	if q == nil {
		return false
	}
	if len(names) < cs.expected {
		return true // still being created by start
	}
	for _, name := range names {
		if slices.ContainsFunc(cs.replacements, func(nc *karpv1.NodeClaim) bool { return nc.Name == name }) {
			continue
		}
		var nc karpv1.NodeClaim
		if err := c.reader.Get(ctx, types.NamespacedName{Name: name}, &nc); err != nil || nc.DeletionTimestamp != nil {
			return false
		}
	}
	return true
}

// terminate deletes the candidates' NodeClaims; the termination controller drains and removes
// them. The workloads of their pods (in state; nil for empty nodes) are remembered for the churn
// guard.
func (c *Controller) terminate(ctx context.Context, candidates []*karpv1.NodeClaim, reason karpv1.DisruptionReason, now time.Time, snapshot *state.ClusterState) error {
	var errs []error
	for _, nc := range candidates {
		c.rememberMoved(nc, now, snapshot)
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete NodeClaim %s: %w", nc.Name, err))
			continue
		}
		c.metrics.NodeClaimsDisrupted.WithLabelValues(lowerReason(reason), nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
		c.event(nc, corev1.EventTypeNormal, "DisruptionTerminating", time.Minute, "Disrupting NodeClaim: %s", reason)
		if nc.Status.NodeName != "" {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName}}
			if err := c.kube.Get(ctx, client.ObjectKeyFromObject(node), node); err == nil {
				c.event(node, corev1.EventTypeNormal, "DisruptionTerminating", time.Minute, "Disrupting Node: %s", reason)
			}
		}
	}
	return errors.Join(errs...)
}

// rememberMoved records the workloads of the pods on the NodeClaim's Node as moved now.
func (c *Controller) rememberMoved(nc *karpv1.NodeClaim, now time.Time, snapshot *state.ClusterState) {
	if nc.Status.NodeName == "" || snapshot == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range snapshot.Pods {
		pod := &snapshot.Pods[i]
		if pod.Spec.NodeName != nc.Status.NodeName || !planner.IsReschedulable(pod) {
			continue
		}
		if ref := metav1.GetControllerOf(pod); ref != nil {
			c.moved[ref.UID] = now
		}
	}
}

// rollback undoes a command: its candidates lose the annotations, the taint and the
// DisruptionReason condition, and its replacements that have not initialized are deleted (an
// initialized one stays, as any node: emptiness removes it if nothing lands on it).
func (c *Controller) rollback(ctx context.Context, id string, candidates, replacements []*karpv1.NodeClaim, cmd *planner.Command, why string) error {
	var errs []error
	for _, nc := range candidates {
		errs = append(errs, c.unmark(ctx, nc))
	}
	failed := 0
	for _, r := range replacements {
		if meta.IsStatusConditionTrue(r.Status.Conditions, karpv1.ConditionTypeInitialized) {
			continue
		}
		failed++
		if err := c.kube.Delete(ctx, r); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete replacement NodeClaim %s: %w", r.Name, err))
		}
	}
	decision, reason, typ := "replace", strings.SplitN(id, "-", 2)[0], ""
	if cmd != nil {
		decision, typ = cmd.Decision(), consolidationType(cmd.Type)
	}
	c.metrics.QueueFailures.WithLabelValues(decision, reason, typ).Add(float64(max(failed, 1)))
	c.log.Info("rolled back a disruption command", "command", id, "reason", why, "candidates", len(candidates), "replacementsDeleted", failed)
	c.mu.Lock()
	delete(c.queue, id)
	c.mu.Unlock()
	return errors.Join(errs...)
}

// unmark removes what mark added.
func (c *Controller) unmark(ctx context.Context, stored *karpv1.NodeClaim) error {
	var nc karpv1.NodeClaim
	if err := c.kube.Get(ctx, client.ObjectKeyFromObject(stored), &nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		return nil
	}
	if nc.Status.NodeName != "" {
		if err := c.taint(ctx, nc.Status.NodeName, false); err != nil {
			return err
		}
	}
	orig := nc.DeepCopy()
	if meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) {
		if err := c.kube.Status().Patch(ctx, &nc, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("clear the DisruptionReason of NodeClaim %s: %w", nc.Name, err)
		}
	}
	orig = nc.DeepCopy()
	changed := false
	for _, key := range []string{planner.CommandAnnotationKey, planner.CommandStartedAnnotationKey, planner.ReplacementsAnnotationKey} {
		if _, ok := nc.Annotations[key]; ok {
			delete(nc.Annotations, key)
			changed = true
		}
	}
	if changed {
		if err := c.kube.Patch(ctx, &nc, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("clear the disruption annotations of NodeClaim %s: %w", nc.Name, err)
		}
	}
	return nil
}

// cleanupStale removes the disrupted taint and DisruptionReason from nodes that no command holds
// and that are not being deleted: what a crash between steps, or another actor, left behind.
func (c *Controller) cleanupStale(ctx context.Context, snapshot *state.ClusterState) error {
	claims := map[string]*karpv1.NodeClaim{}
	for i := range snapshot.NodeClaims {
		if id := snapshot.NodeClaims[i].Status.ProviderID; id != "" {
			claims[id] = &snapshot.NodeClaims[i]
		}
	}
	c.mu.Lock()
	inQueue := map[string]bool{}
	for _, q := range c.queue {
		for _, name := range q.candidates {
			inQueue[name] = true
		}
	}
	c.mu.Unlock()
	taint := karpv1.DisruptedNoScheduleTaint()
	var errs []error
	for i := range snapshot.Nodes {
		node := &snapshot.Nodes[i]
		nc := claims[node.Spec.ProviderID]
		if nc == nil || node.DeletionTimestamp != nil || nc.DeletionTimestamp != nil || nc.Annotations[planner.CommandAnnotationKey] != "" || inQueue[nc.Name] {
			continue
		}
		tainted := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) })
		if !tainted && meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) == nil {
			continue
		}
		c.log.Info("removing a stale disruption mark", "node", node.Name, "nodeclaim", nc.Name)
		errs = append(errs, c.unmark(ctx, nc))
		if tainted && nc.Status.NodeName != node.Name {
			errs = append(errs, c.taint(ctx, node.Name, false))
		}
	}
	return errors.Join(errs...)
}

func lowerReason(r karpv1.DisruptionReason) string { return strings.ToLower(string(r)) }

// consolidationType is the consolidation_type label of a command of the type: empty, multi or
// single, and "" for drift and soft expiry, as Karpenter labels drift.
func consolidationType(typ string) string {
	switch typ {
	case planner.TypeEmpty, planner.TypeMulti, planner.TypeSingle:
		return typ
	}
	return ""
}

func podCount(cmd *planner.Command) int {
	n := 0
	for _, cand := range cmd.Candidates {
		n += len(cand.Reschedulable())
	}
	return n
}

func replacementTypes(cmd *planner.Command) []string {
	var out []string
	for _, r := range cmd.Replacements {
		names := r.InstanceTypeNames()
		if len(names) > 3 {
			names = append(names[:3:3], fmt.Sprintf("and %d more", len(names)-3))
		}
		out = append(out, strings.Join(names, ","))
	}
	return out
}
