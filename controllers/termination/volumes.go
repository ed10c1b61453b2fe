package termination

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Reasons of the VolumesDetached condition, and the event of the wait.
const (
	// ReasonAwaitingVolumeDetachment is the reason of VolumesDetached=Unknown while VolumeAttachments
	// of drained pods remain, and the event reason on the Node that names them.
	ReasonAwaitingVolumeDetachment = "AwaitingVolumeDetachment"
	// ReasonVolumesDetached is the reason of VolumesDetached=True.
	ReasonVolumesDetached = "VolumesDetached"
	// ReasonTerminationGracePeriodElapsed is the reason of VolumesDetached=False: the NodeClaim's
	// terminationGracePeriod ended before the volumes detached, and termination went on anyway.
	ReasonTerminationGracePeriodElapsed = "TerminationGracePeriodElapsed"
)

// DefaultVolumePollInterval is how often termination looks again at VolumeAttachments it waits on.
const DefaultVolumePollInterval = time.Second

// pendingAttachments returns the names of the Node's VolumeAttachments that termination waits on
// before it terminates the instance: those of a PersistentVolume, except the volumes of pods that
// stay on the Node (they tolerate the disrupted taint, are mirror pods, or are stuck terminating),
// which would never be detached. kube reads VolumeAttachments and PersistentVolumeClaims (from
// the cache); pods are listed from the API server.
func pendingAttachments(ctx context.Context, kube client.Client, pods client.Reader, node *corev1.Node, now time.Time) ([]string, error) {
	var vas storagev1.VolumeAttachmentList
	if err := kube.List(ctx, &vas); err != nil {
		return nil, fmt.Errorf("node %s: list volumeattachments: %w", node.Name, err)
	}
	var attached []*storagev1.VolumeAttachment
	for i := range vas.Items {
		va := &vas.Items[i]
		if va.Spec.NodeName == node.Name && va.Spec.Source.PersistentVolumeName != nil {
			attached = append(attached, va)
		}
	}
	if len(attached) == 0 {
		return nil, nil
	}
	staying, err := volumesOfStayingPods(ctx, kube, pods, node, now)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, va := range attached {
		if !slices.Contains(staying, *va.Spec.Source.PersistentVolumeName) {
			names = append(names, va.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// volumesOfStayingPods returns the names of the PersistentVolumes bound to the claims of the
// Node's pods that the drain leaves in place.
func volumesOfStayingPods(ctx context.Context, kube client.Client, pods client.Reader, node *corev1.Node, now time.Time) ([]string, error) {
	var list corev1.PodList
	if err := pods.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node.Name)}); err != nil {
		return nil, fmt.Errorf("node %s: list pods: %w", node.Name, err)
	}
	var pvs []string
	claims := map[string]map[string]string{} // namespace → claim → volume
	for i := range list.Items {
		pod := &list.Items[i]
		if classify(pod, now) != classStays {
			continue
		}
		for _, claim := range claimNames(pod) {
			if _, ok := claims[pod.Namespace]; !ok {
				bound, err := boundClaims(ctx, kube, pod.Namespace)
				if err != nil {
					return nil, fmt.Errorf("node %s: claims of pod %s/%s: %w", node.Name, pod.Namespace, pod.Name, err)
				}
				claims[pod.Namespace] = bound
			}
			if pv := claims[pod.Namespace][claim]; pv != "" {
				pvs = append(pvs, pv)
			}
		}
	}
	return pvs, nil
}

// boundClaims maps the names of the namespace's PersistentVolumeClaims to their volumes (listed
// from the cache, as the scheduling simulation lists them).
func boundClaims(ctx context.Context, kube client.Client, namespace string) (map[string]string, error) {
	var list corev1.PersistentVolumeClaimList
	if err := kube.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list persistentvolumeclaims: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for _, pvc := range list.Items {
		out[pvc.Name] = pvc.Spec.VolumeName
	}
	return out, nil
}

// claimNames returns the PersistentVolumeClaims the pod uses: named ones, and those of its generic
// ephemeral volumes ("<pod>-<volume>").
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// awaitVolumes sets the NodeClaim's VolumesDetached condition and reports whether termination must
// wait before it terminates the instance. Past the deadline (the end of the terminationGracePeriod,
// nil without one) it waits no more. Nodes in skip (nothing ran on them) are not looked at.
func (c *Controller) awaitVolumes(ctx context.Context, nc *karpv1.NodeClaim, nodes []corev1.Node, skip []string, deadline *time.Time) (bool, error) {
	now := c.clock.Now()
	if cond := nc.StatusCondition(karpv1.ConditionTypeVolumesDetached); cond != nil && cond.Status != metav1.ConditionUnknown {
		return false, nil
	}
	if deadline != nil && !now.Before(*deadline) {
		nc.SetCondition(now, karpv1.ConditionTypeVolumesDetached, metav1.ConditionFalse, ReasonTerminationGracePeriodElapsed,
			"the terminationGracePeriod ended before the volumes detached")
		log.FromContext(ctx).Info("terminationGracePeriod elapsed, not waiting for volumes to detach")
		return false, nil
	}
	var waiting []string
	for i := range nodes {
		if slices.Contains(skip, nodes[i].Name) {
			continue
		}
		names, err := c.awaitNodeVolumes(ctx, &nodes[i], now)
		if err != nil {
			return false, err
		}
		waiting = append(waiting, names...)
	}
	if len(waiting) > 0 {
		nc.SetCondition(now, karpv1.ConditionTypeVolumesDetached, metav1.ConditionUnknown, ReasonAwaitingVolumeDetachment,
			fmt.Sprintf("waiting for %d volumeattachments to be deleted: %s", len(waiting), summarize(waiting, 5)))
		return true, nil
	}
	nc.SetCondition(now, karpv1.ConditionTypeVolumesDetached, metav1.ConditionTrue, ReasonVolumesDetached, "")
	return false, nil
}

// awaitNodeVolumes returns the VolumeAttachments termination waits on for the Node, and says so
// in an event on it.
func (c *Controller) awaitNodeVolumes(ctx context.Context, node *corev1.Node, now time.Time) ([]string, error) {
	names, err := pendingAttachments(ctx, c.kube, c.drainer.pods, node, now)
	if err != nil || len(names) == 0 {
		return names, err
	}
	c.recorder.Eventf(node, nil, corev1.EventTypeNormal, ReasonAwaitingVolumeDetachment, "Terminate",
		"Awaiting deletion of bound volumeattachments (%s)", summarize(names, 5))
	log.FromContext(ctx).V(1).Info("awaiting volume detachment", "node", node.Name, "volumeattachments", summarize(names, 5))
	return names, nil
}
