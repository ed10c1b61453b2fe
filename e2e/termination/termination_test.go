package termination_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/termination"
	tt "github.com/joiner-dev/joiner/controllers/termination/terminationtest"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// pool creates a NodePool of on-demand 4-vCPU nodes that never consolidates, so that only the
// NodeClaims the tests delete go away, then applies mutate.
func pool(t *testing.T, name string, mutate func(*karpv1.NodePool)) {
	t.Helper()
	cluster.NodePool(t, name, framework.OnDemandC("4"), func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.NeverDuration()
		if mutate != nil {
			mutate(np)
		}
	})
}

// nodeClaimOf returns the NodeClaim of the pool whose Node is node.
func nodeClaimOf(t *testing.T, pool, node string) *karpv1.NodeClaim {
	t.Helper()
	for _, nc := range cluster.NodeClaims(t, pool) {
		if nc.Status.NodeName == node {
			return &nc
		}
	}
	t.Fatalf("no NodeClaim of %s has Node %s", pool, node)
	return nil
}

// gone waits until the object no longer exists.
func gone(t *testing.T, timeout time.Duration, obj client.Object) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("%T %s gone", obj, obj.GetName()), func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
}

// statefulSet creates a claim bound to a CSI volume and a one-replica StatefulSet (label app=name,
// one CPU) of the pool whose pod mounts it, and returns the volume.
func statefulSet(t *testing.T, name, pool string) *corev1.PersistentVolume {
	t.Helper()
	pv, pvc := tt.Volume("default", name+"-data")
	tt.Create(t, cluster.Client, pv, pvc)
	framework.Eventually(t, 30*time.Second, "claim bound", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: pool},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
					Volumes: []corev1.Volume{tt.ClaimVolume(pvc.Name)},
				},
			},
		},
	}
	tt.Create(t, cluster.Client, sts)
	return pv
}

func TestDrainEvictsInKarpenterOrder(t *testing.T) {
	t.Parallel()
	const name = "order"
	pool(t, name, nil)
	cluster.Deployment(t, "order-app", name, 1, "1", nil)
	node := cluster.WaitRunning(t, "order-app", 1, 2*time.Minute)[0].Spec.NodeName
	cluster.Deployment(t, "order-dns", name, 1, "100m", func(s *corev1.PodSpec) {
		s.PriorityClassName = "system-cluster-critical"
		s.NodeSelector[corev1.LabelHostname] = node
	})
	onPool := map[string]string{karpv1.NodePoolLabelKey: name}
	tt.Create(t, cluster.Client, tt.DaemonSet("default", "order-agent", onPool, ""), tt.DaemonSet("default", "order-proxy", onPool, "system-node-critical"))
	want := []string{"order-app", "order-agent", "order-dns", "order-proxy"}
	framework.Eventually(t, 2*time.Minute, "a pod of each group running on "+node, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := cluster.Client.List(ctx, &pods, client.InNamespace("default")); err != nil {
			return false, nil
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && slices.Contains(want, p.Labels["app"]) {
				n++
			}
		}
		return n == len(want), nil
	})
	pods := tt.RecordForTest(t, cluster.Env.Config, cluster.Client.Scheme(), &corev1.PodList{}, client.InNamespace("default"))
	nc := nodeClaimOf(t, name, node)
	if err := cluster.Client.Delete(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	gone(t, 2*time.Minute, nc)
	got := pods.Departures(func(o client.Object) string {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName == node {
			return tt.App(p)
		}
		return ""
	})
	got = slices.DeleteFunc(got, func(s string) bool { return s == "" })
	if !slices.Equal(got, want) {
		t.Errorf("the pods of %s left in the order %v, want %v", node, got, want)
	}
}

func TestVolumeAttachmentHoldsTermination(t *testing.T) {
	t.Parallel()
	const name = "volume"
	pool(t, name, nil)
	pv := statefulSet(t, name, name)
	node := cluster.WaitRunning(t, name, 1, 2*time.Minute)[0].Spec.NodeName
	va := tt.Attachment(pv.Name, node)
	tt.Create(t, cluster.Client, va)
	nc := nodeClaimOf(t, name, node)
	claims := tt.RecordForTest(t, cluster.Env.Config, cluster.Client.Scheme(), &karpv1.NodeClaimList{})
	if err := cluster.Client.Delete(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "drained, awaiting the volume", func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			return false, nil
		}
		drained := nc.StatusCondition(karpv1.ConditionTypeDrained)
		volumes := nc.StatusCondition(karpv1.ConditionTypeVolumesDetached)
		return drained != nil && drained.Status == metav1.ConditionTrue &&
			volumes != nil && volumes.Status == metav1.ConditionUnknown && volumes.Reason == termination.ReasonAwaitingVolumeDetachment, nil
	})
	if !cluster.HasEvent(t, node, termination.ReasonAwaitingVolumeDetachment, va.Name) {
		t.Errorf("no %s event on Node %s naming %s", termination.ReasonAwaitingVolumeDetachment, node, va.Name)
	}
	framework.Hold(t, 3*time.Second, "the NodeClaim and its Node stay while the volume is attached", func(ctx context.Context) string {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
		for _, o := range []client.Object{nc.DeepCopy(), n, va.DeepCopy()} {
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(o), o); apierrors.IsNotFound(err) {
				return fmt.Sprintf("%T %s is gone", o, o.GetName())
			} else if err != nil {
				return "" // not a violation: the next sample looks again
			}
		}
		if n.DeletionTimestamp != nil {
			return "the instance was terminated (its Node is being deleted)"
		}
		return ""
	})
	if err := cluster.Client.Delete(context.Background(), va); err != nil {
		t.Fatal(err)
	}
	gone(t, 30*time.Second, nc)
	if !claims.SawCondition(nc.Name, karpv1.ConditionTypeVolumesDetached, metav1.ConditionTrue, termination.ReasonVolumesDetached) {
		t.Error("the NodeClaim never had VolumesDetached=True")
	}
	moved := cluster.WaitRunning(t, name, 1, 2*time.Minute)[0]
	if moved.Spec.NodeName == node {
		t.Errorf("the StatefulSet pod runs on %s again", node)
	}
}
