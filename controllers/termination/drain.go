package termination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// Event reasons of the drain.
const (
	// ReasonEvicted is the event reason on a pod evicted by a drain.
	ReasonEvicted = "Evicted"
	// ReasonEvictionBlocked is the event reason on a pod whose eviction a PodDisruptionBudget
	// refused; the drain retries it.
	ReasonEvictionBlocked = "EvictionBlocked"
	// ReasonDeletedAtDeadline is the event reason on a pod deleted because the NodeClaim's
	// terminationGracePeriod ran out.
	ReasonDeletedAtDeadline = "TerminationGracePeriodExpired"
	// ReasonFailedDraining is the event reason on a Node whose drain pass left pods behind.
	ReasonFailedDraining = "FailedDraining"
)

// stuckTerminatingAfter is how long past its deletion timestamp a terminating pod still holds a
// drain. Beyond that its kubelet is presumed gone, and waiting longer would wait forever.
const stuckTerminatingAfter = time.Minute

// Drainer evicts the pods of a Node through the Eviction API.
type Drainer struct {
	kube     client.Client
	pods     client.Reader
	clock    clock.Clock
	recorder events.EventRecorder
	metrics  *Metrics
}

// NewDrainer returns a Drainer. kube evicts and deletes pods; pods lists them by node (use an
// uncached reader, such as a manager's GetAPIReader(), so that no pod cache is needed).
func NewDrainer(kube client.Client, pods client.Reader, clk clock.Clock, recorder events.EventRecorder, metrics *Metrics) *Drainer {
	clk = defaults.Clock(clk)
	return &Drainer{kube: kube, pods: pods, clock: clk, recorder: recorder, metrics: metrics}
}

// DrainResult says how far a drain pass got.
type DrainResult struct {
	// Waiting names ("namespace/name") the pods that still hold the drain: being evicted,
	// refused by a PodDisruptionBudget, or protected by karpenter.sh/do-not-disrupt.
	Waiting []string
}

// Drained reports whether no pod holds the drain any more.
func (r DrainResult) Drained() bool { return len(r.Waiting) == 0 }

// Drain makes one pass over the Node's pods: it evicts those that should go (see the package
// comment for which), deletes those the deadline caught up with, and reports what is left. A nil
// deadline means no terminationGracePeriod: nothing is ever forced. Call it again until Drained.
func (d *Drainer) Drain(ctx context.Context, node *corev1.Node, deadline *time.Time) (DrainResult, error) {
	var list corev1.PodList
	if err := d.pods.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node.Name)}); err != nil {
		return DrainResult{}, fmt.Errorf("drain node %s: list pods: %w", node.Name, err)
	}
	now := d.clock.Now()
	groups := groupForDrain(list.Items, now)
	var (
		result DrainResult
		errs   []error
	)
	// The deadline catches up with pods of every group alike.
	for _, group := range groups {
		for _, pod := range group {
			result.Waiting = append(result.Waiting, pod.Namespace+"/"+pod.Name)
			if pod.DeletionTimestamp.IsZero() && pastDeadline(pod, deadline, now) {
				errs = append(errs, d.deleteAtDeadline(ctx, node, pod, *deadline, now))
			}
		}
	}
	// Evictions go to the first group that still has pods; the next waits until it is empty.
	for _, group := range groups {
		if len(group) == 0 {
			continue
		}
		for _, pod := range group {
			if pod.DeletionTimestamp.IsZero() && !pastDeadline(pod, deadline, now) && !podpredicates.DoNotDisruptActive(pod, now) {
				errs = append(errs, d.evict(ctx, node, pod))
			}
		}
		break
	}
	if !result.Drained() {
		d.recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonFailedDraining, "Drain",
			"Failed to drain node, %d pods are waiting to be evicted", len(result.Waiting))
	}
	if err := errors.Join(errs...); err != nil {
		return result, fmt.Errorf("drain node %s: %w", node.Name, err)
	}
	return result, nil
}

// pastDeadline reports whether the terminationGracePeriod deadline (nil: none) leaves the pod
// less than its own grace period at now, so that it must be deleted rather than evicted.
func pastDeadline(pod *corev1.Pod, deadline *time.Time, now time.Time) bool {
	return deadline != nil && !now.Before(deadline.Add(-podpredicates.GracePeriod(pod)))
}

// evict asks the Eviction API to evict the pod. A refusal by a PodDisruptionBudget (429, or a
// 500 for a pod covered by several budgets) is not an error: the next pass tries again.
func (d *Drainer) evict(ctx context.Context, node *corev1.Node, pod *corev1.Pod) error {
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	err := d.kube.SubResource("eviction").Create(ctx, pod, eviction)
	d.metrics.evictionRequested(err)
	switch {
	case err == nil:
		d.metrics.podDrained(ctx, false)
		d.recorder.Eventf(pod, node, corev1.EventTypeNormal, ReasonEvicted, "Evict", "Evicted pod: draining node %s", node.Name)
		log.FromContext(ctx).V(1).Info("evicted pod", "pod", client.ObjectKeyFromObject(pod), "node", node.Name)
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or replaced by a new pod of the same name (which the next pass sees).
		return nil
	case apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err) && strings.Contains(err.Error(), "more than one PodDisruptionBudget"):
		d.recorder.Eventf(pod, node, corev1.EventTypeWarning, ReasonEvictionBlocked, "Evict",
			"Cannot evict pod while draining node %s, will retry: %s", node.Name, err.Error())
		return nil
	default:
		return fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}

// deleteAtDeadline deletes a pod the terminationGracePeriod deadline caught up with, giving it
// what is left of its grace period before the deadline.
func (d *Drainer) deleteAtDeadline(ctx context.Context, node *corev1.Node, pod *corev1.Pod, deadline, now time.Time) error {
	grace := int64(deadline.Sub(now).Seconds())
	if g := int64(podpredicates.GracePeriod(pod).Seconds()); g < grace {
		grace = g
	}
	if grace < 0 {
		grace = 0
	}
	err := d.kube.Delete(ctx, pod, client.GracePeriodSeconds(grace), client.Preconditions{UID: &pod.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s at the termination deadline: %w", pod.Namespace, pod.Name, err)
	}
	if err == nil {
		d.metrics.podDrained(ctx, true)
		d.recorder.Eventf(pod, node, corev1.EventTypeWarning, ReasonDeletedAtDeadline, "Delete",
			"Deleting pod: the terminationGracePeriod of node %s ends at %s", node.Name, deadline.UTC().Format(time.RFC3339))
	}
	return nil
}

// taintForTermination adds karpenter.sh/disrupted:NoSchedule and the exclude-from-external-load-
// balancers label to the Node, so nothing new lands on it and load balancers stop sending to it.
func taintForTermination(ctx context.Context, kube client.Client, node *corev1.Node) error {
	stored := node.DeepCopy()
	taint := karpv1.DisruptedNoScheduleTaint()
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taint.Key && t.Effect == taint.Effect }) {
		node.Spec.Taints = append(node.Spec.Taints, taint)
	}
	if _, ok := node.Labels[karpv1.ExcludeFromExternalLoadBalancersLabelKey]; !ok {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[karpv1.ExcludeFromExternalLoadBalancersLabelKey] = karpv1.ExcludeFromExternalLoadBalancersLabelValue
	}
	if len(stored.Spec.Taints) == len(node.Spec.Taints) && len(stored.Labels) == len(node.Labels) {
		return nil
	}
	if err := kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("taint node %s for termination: %w", node.Name, err)
	}
	return nil
}

// releaseNode deletes the Node (if nobody did yet) and removes the termination finalizer, so the
// Node object goes. Call it only after the Node was drained and its instance terminated.
func releaseNode(ctx context.Context, kube client.Client, node *corev1.Node) error {
	if node.DeletionTimestamp.IsZero() {
		if err := kube.Delete(ctx, node); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("delete node %s: %w", node.Name, err))
		}
	}
	if err := removeFinalizer(ctx, kube, node); err != nil {
		return fmt.Errorf("release node %s: %w", node.Name, err)
	}
	return nil
}

// removeFinalizer removes karpenter.sh/termination from obj's finalizers with a JSON patch that
// first tests the entry is still where obj has it, so that it works on an object whose resource
// version moved on (deletion bumps it) yet never removes a different finalizer. A stale obj
// makes the patch fail, and the caller's retry reads a fresh one. A missing object is fine.
func removeFinalizer(ctx context.Context, kube client.Client, obj client.Object) error {
	i := slices.Index(obj.GetFinalizers(), karpv1.TerminationFinalizer)
	if i < 0 {
		return nil
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch := fmt.Sprintf(`[{"op":"test","path":%q,"value":%q},{"op":"remove","path":%q}]`, path, karpv1.TerminationFinalizer, path)
	if err := kube.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer %s: %w", karpv1.TerminationFinalizer, err)
	}
	return nil
}
