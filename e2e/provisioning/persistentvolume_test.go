package provisioning_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// zonalClaim creates a hostPath PersistentVolume pinned to the zone by its node affinity and a
// claim in "default" bound to it (volumeName, storageClassName ""), waits until the claim is Bound,
// and deletes both when the test ends.
func zonalClaim(t *testing.T, name, zone string) {
	t.Helper()
	ctx := context.Background()
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: "default", Name: name},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
			VolumeName:       pv.Name,
			StorageClassName: ptr.To(""),
		},
	}
	for _, obj := range []client.Object{pv, pvc} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{pvc, pv} {
			if err := c.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
			}
		}
	})
	eventually(t, 60*time.Second, "claim "+name+" Bound", func(ctx context.Context) (bool, error) {
		got := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, got); err != nil {
			return false, nil
		}
		return got.Status.Phase == corev1.ClaimBound, nil
	})
}

// mountClaim mounts the claim into the pods of a Deployment.
func mountClaim(claim string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

// TestPodWithZonalVolumeGetsNodeInItsZone: a pod whose claim is bound to a volume pinned to
// us-east-1c gets a node in us-east-1c, although its NodePool would launch in us-east-1a (the
// first zone of equally priced on-demand offerings) for a pod without volumes; a pod whose volume
// is in a zone the NodePool cannot offer stays pending, and its Event names the claim.
func TestPodWithZonalVolumeGetsNodeInItsZone(t *testing.T) {
	nodePool(t, "e2e-volume", []karpv1.NodeSelectorRequirementWithMinValues{
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1c"),
		req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m"),
	}, nil)

	zonalClaim(t, "e2e-data", "us-east-1c")
	deployment(t, "zonal", "e2e-volume", 1, "500m", mountClaim("e2e-data"))
	p := waitRunning(t, "zonal", 1, 120*time.Second)[0]
	if zone := node(t, p.Spec.NodeName).Labels[corev1.LabelTopologyZone]; zone != "us-east-1c" {
		t.Fatalf("the pod of claim e2e-data runs in %q; its volume is pinned to us-east-1c", zone)
	}

	zonalClaim(t, "e2e-far", "us-east-1b")
	deployment(t, "far", "e2e-volume", 1, "500m", mountClaim("e2e-far"))
	const why = "PersistentVolumeClaim default/e2e-far: volume pinned to zone us-east-1b, which NodePool e2e-volume cannot offer"
	var seen []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FailedProvisioning events of the far pod: %q", seen)
		}
	})
	eventually(t, 60*time.Second, "a FailedProvisioning event naming claim e2e-far", func(ctx context.Context) (bool, error) {
		far := map[string]bool{}
		for _, p := range pods(t, "far") {
			far[p.Name] = true
		}
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace("default")); err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range evs.Items {
			if far[e.Regarding.Name] && e.Reason == "FailedProvisioning" {
				seen = append(seen, e.Note)
				if strings.Contains(e.Note, why) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	for _, p := range pods(t, "far") {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of claim e2e-far was bound to %s; its volume's zone is not in the NodePool", p.Name, p.Spec.NodeName)
		}
	}
}
