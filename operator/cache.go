package operator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheOptions are the informer cache's options: every object is stored without the fields no
// controller reads, so that the cache of a cluster with many pods stays small.
//
//   - Every object: metadata.managedFields (the apiserver's record of who set which field, often
//     the largest part of a small object). Updates and patches still carry resourceVersion, so
//     optimistic locking holds, and the apiserver keeps the managed fields of an object written
//     without them.
//   - Pods: status.containerStatuses, initContainerStatuses and ephemeralContainerStatuses, which
//     the kubelet writes and nothing in Joiner reads (the scheduling simulation, drain, the pod
//     metrics and events read the spec, metadata, phase, conditions and start time, all kept). The
//     policy audit therefore sees a pod's spec and metadata whole, as the admission webhooks do.
//   - Nodes: status.images, the kubelet's list of pulled images (hundreds of entries on a busy
//     node), which nothing reads.
//
// The admission webhooks do not read from this cache: they review the objects the apiserver sends.
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: stripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: stripPod},
			&corev1.Node{}: {Transform: stripNode},
		},
	}
}

// stripManagedFields drops metadata.managedFields from any object (tombstones and other values
// without object metadata pass through).
func stripManagedFields(obj any) (any, error) {
	if o, err := meta.Accessor(obj); err == nil && o.GetManagedFields() != nil {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// stripPod is stripManagedFields plus the pod's container statuses.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return passTombstone[*corev1.Pod](obj)
	}
	pod.ManagedFields = nil
	pod.Status.ContainerStatuses = nil
	pod.Status.InitContainerStatuses = nil
	pod.Status.EphemeralContainerStatuses = nil
	return pod, nil
}

// stripNode is stripManagedFields plus the node's image list.
func stripNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return passTombstone[*corev1.Node](obj)
	}
	node.ManagedFields = nil
	node.Status.Images = nil
	return node, nil
}

// passTombstone lets a deleted-final-state-unknown tombstone through unchanged; any other value is
// an error, since the informer only holds objects of type T.
func passTombstone[T any](obj any) (any, error) {
	if _, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return obj, nil
	}
	var want T
	return nil, fmt.Errorf("cache transform: got %T, want %T", obj, want)
}
