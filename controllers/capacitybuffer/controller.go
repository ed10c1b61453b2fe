// Package capacitybuffer is the CapacityBuffer controller (Karpenter's CapacityBuffer feature
// gate): for every autoscaling.x-k8s.io/v1beta1 CapacityBuffer it resolves the unit (the pod
// template of its PodTemplate, Deployment, StatefulSet or ReplicaSet; package bufferpods), computes
// how many units to keep free (Replicas), and writes them into the status with the
// ReadyForProvisioning condition, every 30 seconds. The provisioner keeps room for the units of
// the buffers that are ready and sets their Provisioning condition; this controller sets
// Provisioning only when there is nothing to provision (NotReadyForProvisioning, BufferEmpty).
package capacitybuffer

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-dev/joiner/controllers/bufferpods"
	"github.com/joiner-dev/joiner/controllers/defaults"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName names the controller (logs, metrics).
const ControllerName = "capacitybuffer"

// Requeue is how often a buffer is resolved again (Karpenter's 30 s), so that changes of its
// PodTemplate or workload reach the status without a watch on them.
const Requeue = 30 * time.Second

// Controller keeps CapacityBuffer statuses up to date.
type Controller struct {
	kube  client.Client
	clock clock.Clock
}

// NewController returns the controller; clk nil means the real clock.
func NewController(kube client.Client, clk clock.Clock) *Controller {
	return &Controller{kube: kube, clock: defaults.Clock(clk)}
}

// SetupWithManager registers the controller, which reconciles CapacityBuffers.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&autoscalingv1beta1.CapacityBuffer{}).
		Complete(c.Reconciler())
	if err != nil {
		return fmt.Errorf("set up %s controller: %w", ControllerName, err)
	}
	return nil
}

// Reconciler is the status skeleton (package statusreconcile) with Decide as its decision.
func (c *Controller) Reconciler() reconcile.Reconciler {
	return &statusreconcile.Reconciler[*autoscalingv1beta1.CapacityBuffer]{
		Kube: c.kube, Kind: "capacitybuffer", Decide: c.Decide,
		New:    func() *autoscalingv1beta1.CapacityBuffer { return &autoscalingv1beta1.CapacityBuffer{} },
		Status: func(cb *autoscalingv1beta1.CapacityBuffer) any { return &cb.Status },
	}
}

// Decide computes the buffer's status: the strategy, the resolved template reference and
// generation, the replicas and the ReadyForProvisioning condition, and Provisioning False when
// the buffer is not ready or empty. A read that fails for another reason than a missing or
// unsupported reference is returned, and retried.
func (c *Controller) Decide(ctx context.Context, cb *autoscalingv1beta1.CapacityBuffer) (statusreconcile.Outcome, error) {
	out := statusreconcile.Outcome{Result: reconcile.Result{RequeueAfter: Requeue}}
	st := &cb.Status
	strategy := autoscalingv1beta1.ActiveCapacityStrategy
	if cb.Spec.ProvisioningStrategy != nil {
		strategy = *cb.Spec.ProvisioningStrategy
	}
	st.ProvisioningStrategy = &strategy
	if strategy != autoscalingv1beta1.ActiveCapacityStrategy {
		c.notReady(cb, autoscalingv1beta1.ReasonResolutionFailed,
			fmt.Sprintf("spec.provisioningStrategy %q is not served: Joiner keeps room for %s buffers only", strategy, autoscalingv1beta1.ActiveCapacityStrategy))
		return out, nil
	}
	unit, err := bufferpods.Resolve(ctx, c.kube, cb)
	if re, ok := bufferpods.IsResolveError(err); ok {
		c.notReady(cb, re.Reason, re.Message)
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("resolve CapacityBuffer %s/%s: %w", cb.Namespace, cb.Name, err)
	}
	pod := bufferpods.VirtualPod(cb, &unit.Template, 0)
	requests := resources.PodRequests(pod).List()
	n, err := Replicas(&cb.Spec, unit.ScalableReplicas, requests)
	if err != nil {
		c.notReady(cb, autoscalingv1beta1.ReasonResolutionFailed, err.Error())
		return out, nil
	}
	st.PodTemplateRef, st.PodTemplateGeneration, st.Replicas = unit.TemplateRef, &unit.Generation, &n
	c.set(cb, autoscalingv1beta1.ConditionTypeReadyForProvisioning, metav1.ConditionTrue, autoscalingv1beta1.ReasonResolved,
		fmt.Sprintf("%d units of %s", n, resources.Describe(resources.Of(requests))))
	if n == 0 {
		c.set(cb, autoscalingv1beta1.ConditionTypeProvisioning, metav1.ConditionFalse, autoscalingv1beta1.ReasonBufferEmpty, "the buffer resolves to no units")
		return out, nil
	}
	// The provisioner reports FitsExistingCapacity or RequiresNewCapacity once it placed the
	// units; until then the units wait for new capacity.
	if p := meta.FindStatusCondition(st.Conditions, autoscalingv1beta1.ConditionTypeProvisioning); p == nil ||
		(p.Reason != autoscalingv1beta1.ReasonFitsExistingCapacity && p.Reason != autoscalingv1beta1.ReasonRequiresNewCapacity) {
		c.set(cb, autoscalingv1beta1.ConditionTypeProvisioning, metav1.ConditionFalse, autoscalingv1beta1.ReasonRequiresNewCapacity,
			"waiting for the provisioner to place the units")
	}
	return out, nil
}

// notReady records a buffer that cannot be provisioned: no replicas, ReadyForProvisioning False
// with reason and message, Provisioning False NotReadyForProvisioning.
func (c *Controller) notReady(cb *autoscalingv1beta1.CapacityBuffer, reason, message string) {
	cb.Status.Replicas, cb.Status.PodTemplateRef, cb.Status.PodTemplateGeneration = nil, nil, nil
	c.set(cb, autoscalingv1beta1.ConditionTypeReadyForProvisioning, metav1.ConditionFalse, reason, message)
	c.set(cb, autoscalingv1beta1.ConditionTypeProvisioning, metav1.ConditionFalse, autoscalingv1beta1.ReasonNotReadyForProvisioning,
		"the buffer is not ready for provisioning: "+message)
}

// set sets a condition, stamped with the injected clock when it transitions.
func (c *Controller) set(cb *autoscalingv1beta1.CapacityBuffer, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&cb.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: cb.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
}
