// Package expectedpods plans for the pods that are still coming (the PlanForExpectedPods gate,
// Joiner's own; Karpenter does not do this). kube-controller-manager creates a ReplicaSet's pods at
// its client rate (20 a second by default), so a provisioning round sees only the pods created
// since the last one and would size nodes for those alone: many small nodes that consolidation
// repacks later. The workload says how many pods are coming, though: this package turns the pods a
// ReplicaSet, StatefulSet or Job is still to create into virtual copies of its newest pod, which
// the provisioner and the disruption passes place after the real pending pods, exactly as the
// CapacityBuffers' units (package bufferpods): capacity is planned for them within the NodePools'
// limits, nothing is nominated for them, and consolidation keeps the room they take.
//
// Desired counts are read afresh every round from the cache, so a scale-down drops the copies at
// once. Only workloads whose pods are arriving count (one pending, or one created within the
// window), so a workload whose pods are refused (a quota, a webhook) stops holding capacity.
package expectedpods

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// Defaults of Options.
const (
	// DefaultWindow is how recently a workload's newest pod must have been created, when none of
	// its pods is pending, for its missing pods to count.
	DefaultWindow = 2 * time.Minute
	// DefaultMaxPods bounds the virtual pods of a round, so that one huge scale-up does not make
	// a round's simulation unbounded.
	DefaultMaxPods = 20000
)

// Options tune Read; zero values mean the defaults.
type Options struct {
	// Window is DefaultWindow's setting: how recently the newest pod of a workload none of whose
	// pods is pending must have been created for its missing pods to count.
	Window time.Duration
	// MaxPods bounds the virtual pods Read returns (DefaultMaxPods).
	MaxPods int
}

// Read returns the virtual pods of a round: for every workload of pods (every pod of the cluster)
// that is still to create some (Expectations), that many copies of its newest pod (VirtualPod),
// at most MaxPods in all. The workloads are read through c (the cache); one that is not found
// is left out.
func Read(ctx context.Context, c client.Reader, pods []corev1.Pod, now time.Time, opts Options) ([]*corev1.Pod, error) {
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.MaxPods <= 0 {
		opts.MaxPods = DefaultMaxPods
	}
	groups := groupPods(pods)
	w, err := readWorkloads(ctx, c, groups, now, opts.Window)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, e := range expectations(groups, w, now, opts.Window) {
		for n := 0; n < e.Missing && len(out) < opts.MaxPods; n++ {
			out = append(out, VirtualPod(&e, n))
		}
	}
	return out, nil
}

// readWorkloads gets the workload of every arriving group, and for a Deployment's ReplicaSet the
// Deployment and its other ReplicaSets.
func readWorkloads(ctx context.Context, c client.Reader, groups map[types.UID]*group, now time.Time, window time.Duration) (*Workloads, error) {
	w := &Workloads{ReplicaSets: map[types.UID]*appsv1.ReplicaSet{}, StatefulSets: map[types.UID]*appsv1.StatefulSet{},
		Jobs: map[types.UID]*batchv1.Job{}, Deployments: map[types.UID]*appsv1.Deployment{}, DeploymentReplicaSets: map[types.UID][]*appsv1.ReplicaSet{}}
	for uid, g := range groups {
		if g.template == nil || !g.arriving(now, window) {
			continue
		}
		var obj client.Object
		switch g.owner.Kind {
		case KindReplicaSet:
			obj = &appsv1.ReplicaSet{}
		case KindStatefulSet:
			obj = &appsv1.StatefulSet{}
		default:
			obj = &batchv1.Job{}
		}
		found, err := get(ctx, c, g.owner.Namespace, g.owner.Name, uid, obj)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		switch o := obj.(type) {
		case *appsv1.ReplicaSet:
			w.ReplicaSets[uid] = o
			if err := readDeployment(ctx, c, w, o); err != nil {
				return nil, err
			}
		case *appsv1.StatefulSet:
			w.StatefulSets[uid] = o
		case *batchv1.Job:
			w.Jobs[uid] = o
		}
	}
	return w, nil
}

// get reads obj; found is false when it is gone or is another object of the same name (uid).
func get(ctx context.Context, c client.Reader, namespace, name string, uid types.UID, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get %T %s/%s: %w", obj, namespace, name, err)
	}
	return obj.GetUID() == uid, nil
}

// readDeployment reads the Deployment that controls rs, if any, and the ReplicaSets it controls.
func readDeployment(ctx context.Context, c client.Reader, w *Workloads, rs *appsv1.ReplicaSet) error {
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.Kind != kindDeployment || w.Deployments[ref.UID] != nil {
		return nil
	}
	d := &appsv1.Deployment{}
	found, err := get(ctx, c, rs.Namespace, ref.Name, ref.UID, d)
	if err != nil || !found {
		return err
	}
	var list appsv1.ReplicaSetList
	if err := c.List(ctx, &list, client.InNamespace(rs.Namespace)); err != nil {
		return fmt.Errorf("list the ReplicaSets of Deployment %s/%s: %w", rs.Namespace, d.Name, err)
	}
	w.Deployments[d.UID] = d
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], d) {
			w.DeploymentReplicaSets[d.UID] = append(w.DeploymentReplicaSets[d.UID], &list.Items[i])
		}
	}
	return nil
}

// VirtualPod is copy n of the expectation's template pod: a pending, unbound pod with the same
// labels, requests, affinities, tolerations and topology constraints, a name and UID of its own,
// no owner, and ExpectedPodAnnotationKey naming the workload. A StatefulSet's claims come from its
// volumeClaimTemplates (as generic ephemeral volumes: the claims of pods not created yet do not
// exist). It is only ever simulated.
func VirtualPod(e *Expectation, n int) *corev1.Pod {
	t := e.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-expected-%d", e.Owner.Name, n),
			Namespace:   t.Namespace,
			UID:         types.UID(fmt.Sprintf("expected-%s-%d", e.Owner.UID, n)),
			Labels:      maps.Clone(t.Labels),
			Annotations: map[string]string{},
		},
		Spec:   *t.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for k, v := range t.Annotations {
		pod.Annotations[k] = v
	}
	pod.Annotations[podpredicates.ExpectedPodAnnotationKey] = e.Owner.String()
	pod.Spec.NodeName = ""
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		for _, ct := range e.ClaimTemplates {
			if vol.PersistentVolumeClaim != nil && ct.Name == vol.Name {
				vol.VolumeSource = corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
					VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: *ct.Spec.DeepCopy()}}}
			}
		}
	}
	return pod
}
