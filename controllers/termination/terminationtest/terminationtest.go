// Package terminationtest is test support for termination, shared by the termination package's
// tests against a real API server and the termination e2e tests: a watch that records every
// change of the objects of a kind in the order the API server reports them (to see in which
// order a drain evicts pods, and which conditions a NodeClaim went through), and the storage
// objects of a pod whose CSI volume is attached to a node.
//
// It is imported by tests only and must never be wired into a binary.
package terminationtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Change is one change of a watched object.
type Change struct {
	// Type is Added, Modified or Deleted.
	Type watch.EventType
	// Object is the object as the change left it.
	Object client.Object
	// At is when the watch delivered the change.
	At time.Time
}

// Recorder records the changes a watch delivers until Stop.
type Recorder struct {
	mu      sync.Mutex
	changes []Change
	w       watch.Interface
	done    chan struct{}
}

// Record starts watching the objects of list's kind (narrowed by opts) and recording their changes.
func Record(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (*Recorder, error) {
	w, err := c.Watch(ctx, list, opts...)
	if err != nil {
		return nil, fmt.Errorf("watch %T: %w", list, err)
	}
	r := &Recorder{w: w, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			r.mu.Lock()
			r.changes = append(r.changes, Change{Type: ev.Type, Object: obj, At: time.Now()})
			r.mu.Unlock()
		}
	}()
	return r, nil
}

// RecordForTest starts a Recorder with a client of cfg and scheme, and stops it when the test ends.
func RecordForTest(t testing.TB, cfg *rest.Config, scheme *runtime.Scheme, list client.ObjectList, opts ...client.ListOption) *Recorder {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("watch client: %v", err)
	}
	r, err := Record(context.Background(), c, list, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Create creates the objects and deletes them (their dependents in the background) when the test
// ends.
func Create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() {
			err := c.Delete(context.Background(), o, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %T %s: %v", o, o.GetName(), err)
			}
		})
	}
}

// Stop ends the watch and waits until the recording stopped.
func (r *Recorder) Stop() {
	r.w.Stop()
	<-r.done
}

// Changes returns what was recorded so far, in order.
func (r *Recorder) Changes() []Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes)
}

// Departures returns key of each recorded object in the order in which they started to leave
// (were seen with a deletion timestamp, or deleted), each once.
func (r *Recorder) Departures(key func(client.Object) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range r.Changes() {
		name := c.Object.GetNamespace() + "/" + c.Object.GetName()
		if seen[name] || (c.Type != watch.Deleted && c.Object.GetDeletionTimestamp() == nil) {
			continue
		}
		seen[name] = true
		out = append(out, key(c.Object))
	}
	return out
}

// FirstAt returns when a recorded change first satisfied match, and whether one did.
func (r *Recorder) FirstAt(match func(Change) bool) (time.Time, bool) {
	for _, c := range r.Changes() {
		if match(c) {
			return c.At, true
		}
	}
	return time.Time{}, false
}

// SawCondition reports whether a NodeClaim named name was recorded with the status condition of
// that type, status and reason.
func (r *Recorder) SawCondition(name, conditionType string, status metav1.ConditionStatus, reason string) bool {
	_, ok := r.FirstAt(func(c Change) bool {
		if c.Object.GetName() != name {
			return false
		}
		nc, ok := c.Object.(*karpv1.NodeClaim)
		if !ok {
			return false
		}
		cond := meta.FindStatusCondition(nc.Status.Conditions, conditionType)
		return cond != nil && cond.Status == status && cond.Reason == reason
	})
	return ok
}

// Driver is the CSI driver the volumes of Volume name. No such driver runs: the tests play its
// part (and the attach-detach controller's) by creating and deleting VolumeAttachments.
const Driver = "ebs.csi.aws.com"

// Volume returns a CSI PersistentVolume (named "<namespace>-<claim>") and the claim in namespace
// bound to it, as a StatefulSet's volume is once provisioned.
func Volume(namespace, claim string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   rwo,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: Driver, VolumeHandle: "vol-" + namespace + "-" + claim},
			},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      rwo,
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
		},
	}
	return pv, pvc
}

// Attachment returns the VolumeAttachment of the PersistentVolume pv to the node, as the
// attach-detach controller names it for Driver.
func Attachment(pv, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-" + pv + "-" + node},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: Driver,
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)},
		},
	}
}

// ClaimVolume returns a pod volume named "data" that mounts the claim.
func ClaimVolume(claim string) corev1.Volume {
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}
}

// DaemonSet returns a DaemonSet (its pods labelled app=name) whose pods run on the nodes that
// nodeSelector selects, at the priority class (none when empty), with no termination grace period.
func DaemonSet(namespace, name string, nodeSelector map[string]string, priorityClass string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  nodeSelector,
					PriorityClassName:             priorityClass,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: name, Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}

// App names an object by its app label (a DaemonSet's pods carry the DaemonSet's name).
func App(o client.Object) string { return o.GetLabels()["app"] }
