package bufferpods

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// Strategy is the provisioning strategy in effect for the buffer: its status's, else its spec's,
// else the default buffer.x-k8s.io/active-capacity.
func Strategy(cb *autoscalingv1beta1.CapacityBuffer) string {
	switch {
	case cb.Status.ProvisioningStrategy != nil:
		return *cb.Status.ProvisioningStrategy
	case cb.Spec.ProvisioningStrategy != nil:
		return *cb.Spec.ProvisioningStrategy
	}
	return autoscalingv1beta1.ActiveCapacityStrategy
}

// Set is the buffers a round keeps room for, and their virtual pods.
type Set struct {
	// Buffers are the buffers with at least one unit, by namespace/name.
	Buffers map[string]*autoscalingv1beta1.CapacityBuffer
	// Pods are their virtual pods, status.replicas per buffer, in buffer order.
	Pods []*corev1.Pod
}

// Read lists the CapacityBuffers and returns the virtual pods of those the controller resolved:
// active-capacity strategy, ReadyForProvisioning True and status.replicas above zero, each unit a
// copy of the buffer's pod template read afresh (Resolve). A buffer whose unit no longer resolves
// is left out (logged at V(1)); the controller reports it on its next reconcile.
func Read(ctx context.Context, c client.Reader, log logr.Logger) (*Set, error) {
	var list autoscalingv1beta1.CapacityBufferList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list capacitybuffers: %w", err)
	}
	s := &Set{Buffers: map[string]*autoscalingv1beta1.CapacityBuffer{}}
	for i := range list.Items {
		cb := &list.Items[i]
		if cb.DeletionTimestamp != nil || Strategy(cb) != autoscalingv1beta1.ActiveCapacityStrategy ||
			!meta.IsStatusConditionTrue(cb.Status.Conditions, autoscalingv1beta1.ConditionTypeReadyForProvisioning) ||
			cb.Status.Replicas == nil || *cb.Status.Replicas <= 0 {
			continue
		}
		unit, err := Resolve(ctx, c, cb)
		if err != nil {
			log.V(1).Info("leaving out a CapacityBuffer whose unit does not resolve", "capacitybuffer", key(cb), "error", err.Error())
			continue
		}
		s.Buffers[key(cb)] = cb
		for n := range *cb.Status.Replicas {
			s.Pods = append(s.Pods, VirtualPod(cb, &unit.Template, int(n)))
		}
	}
	return s, nil
}

// VirtualPod is unit n of the buffer: a pending pod made from template, in the buffer's namespace,
// with a name and UID of its own and Karpenter's capacity-buffer annotations. It is only ever
// simulated.
func VirtualPod(cb *autoscalingv1beta1.CapacityBuffer, template *corev1.PodTemplateSpec, n int) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: *template.ObjectMeta.DeepCopy(), Spec: *template.Spec.DeepCopy()}
	pod.Name = fmt.Sprintf("%s-buffer-%d", cb.Name, n)
	pod.GenerateName = ""
	pod.Namespace = cb.Namespace
	pod.UID = types.UID(fmt.Sprintf("capacitybuffer-%s-%d", cb.UID, n))
	pod.OwnerReferences = nil
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[autoscalingv1beta1.FakePodAnnotationKey] = "true"
	pod.Annotations[autoscalingv1beta1.BufferNameAnnotationKey] = cb.Name
	pod.Annotations[autoscalingv1beta1.BufferNamespaceAnnotationKey] = cb.Namespace
	pod.Spec.NodeName = ""
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return pod
}

// Outcome is where a round placed one buffer's units.
type Outcome struct {
	// Existing units went on existing nodes or NodeClaims in flight; New on NodeClaims the round
	// plans; Failed nowhere (Err says why, for the first).
	Existing, New, Failed int
	Err                   string
}

// Settle returns results without the virtual pods (podpredicates.IsVirtualPod: the buffers' units
// and the expected pods), so that no NodeClaim, nomination, Event or metric of the round names
// one, and where each buffer's units went (by namespace/name) and each workload's expected pods
// (by the value of podpredicates.ExpectedPodAnnotationKey, "Kind namespace/name"). A planned
// NodeClaim that holds only virtual pods stays, with no pods: it is their room.
func Settle(results *scheduling.Results) (*scheduling.Results, map[string]*Outcome) {
	outcomes := map[string]*Outcome{}
	of := func(pod *corev1.Pod) *Outcome {
		k := pod.Annotations[podpredicates.ExpectedPodAnnotationKey]
		if k == "" {
			k = pod.Annotations[autoscalingv1beta1.BufferNamespaceAnnotationKey] + "/" + pod.Annotations[autoscalingv1beta1.BufferNameAnnotationKey]
		}
		if outcomes[k] == nil {
			outcomes[k] = &Outcome{}
		}
		return outcomes[k]
	}
	out := &scheduling.Results{}
	for _, pl := range results.ExistingNodes {
		real := realPods(pl.Pods, func(p *corev1.Pod) { of(p).Existing++ })
		if len(real) > 0 {
			out.ExistingNodes = append(out.ExistingNodes, scheduling.ExistingNodePlacement{Node: pl.Node, Pods: real})
		}
	}
	for _, plan := range results.NewNodeClaims {
		cp := *plan
		cp.Pods = realPods(plan.Pods, func(p *corev1.Pod) { of(p).New++ })
		out.NewNodeClaims = append(out.NewNodeClaims, &cp)
	}
	for _, pe := range results.PodErrors {
		if !podpredicates.IsVirtualPod(pe.Pod) {
			out.PodErrors = append(out.PodErrors, pe)
			continue
		}
		o := of(pe.Pod)
		if o.Failed++; o.Err == "" && pe.Err != nil {
			o.Err = pe.Err.Error()
		}
	}
	return out, outcomes
}

// realPods returns the pods that are not virtual, calling virtual for each one that is.
func realPods(pods []*corev1.Pod, virtual func(*corev1.Pod)) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if podpredicates.IsVirtualPod(p) {
			virtual(p)
			continue
		}
		out = append(out, p)
	}
	return out
}

// Report sets the Provisioning condition of every buffer of s from the outcomes of a round: True
// FitsExistingCapacity when each unit fits existing nodes or NodeClaims in flight, else False
// RequiresNewCapacity saying how many units need new capacity or cannot be placed. The status is
// patched only when the condition changes; a failed patch is returned after the others are tried.
func (s *Set) Report(ctx context.Context, c client.Client, now time.Time, outcomes map[string]*Outcome) error {
	var errs []string
	for k, cb := range s.Buffers {
		o := outcomes[k]
		if o == nil {
			o = &Outcome{}
		}
		cond := metav1.Condition{Type: autoscalingv1beta1.ConditionTypeProvisioning, Status: metav1.ConditionTrue,
			Reason:             autoscalingv1beta1.ReasonFitsExistingCapacity,
			Message:            fmt.Sprintf("all %d units fit existing nodes or NodeClaims in flight", o.Existing+o.New+o.Failed),
			ObservedGeneration: cb.Generation, LastTransitionTime: metav1.NewTime(now)}
		if o.New > 0 || o.Failed > 0 {
			cond.Status, cond.Reason = metav1.ConditionFalse, autoscalingv1beta1.ReasonRequiresNewCapacity
			cond.Message = fmt.Sprintf("%d of %d units need new capacity", o.New+o.Failed, o.Existing+o.New+o.Failed)
			if o.Failed > 0 {
				cond.Message += fmt.Sprintf("; %d cannot be placed: %s", o.Failed, o.Err)
			}
		}
		if old := meta.FindStatusCondition(cb.Status.Conditions, cond.Type); old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
			continue
		}
		stored := cb.DeepCopy()
		meta.SetStatusCondition(&cb.Status.Conditions, cond)
		if _, _, err := statusreconcile.PatchStatus(ctx, c, "capacitybuffer", stored, cb); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("report the Provisioning condition of CapacityBuffers: %s", strings.Join(errs, "; "))
	}
	return nil
}

func key(cb *autoscalingv1beta1.CapacityBuffer) string { return cb.Namespace + "/" + cb.Name }
