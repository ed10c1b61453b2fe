package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// NodeClassName is the LocalNodeClass the e2e NodePools use.
const NodeClassName = "e2e"

// Eventually polls cond every 250ms until it holds, and fails the test after timeout.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// EnsureNodeClass creates the e2e LocalNodeClass (us-east-1, nodes register after 1s) unless it
// exists.
func (c *Cluster) EnsureNodeClass(t *testing.T) {
	t.Helper()
	nc := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: NodeClassName},
		Spec: joinerv1alpha1.LocalNodeClassSpec{Region: "us-east-1", NodeRegistrationDelay: &metav1.Duration{Duration: time.Second}}}
	if err := c.Client.Create(context.Background(), nc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create LocalNodeClass: %v", err)
	}
}

// NodePool creates a NodePool on the e2e node class and, when the test ends, deletes it and waits
// until its NodeClaims (owned by it) are gone too.
func (c *Cluster) NodePool(t *testing.T, name string, reqs []karpv1.NodeSelectorRequirementWithMinValues, mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	t.Helper()
	c.EnsureNodeClass(t)
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: NodeClassName},
				Requirements: reqs,
			}},
		},
	}
	if mutate != nil {
		mutate(np)
	}
	if err := c.Client.Create(context.Background(), np); err != nil {
		t.Fatalf("create NodePool %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Deleting the NodePool is all it takes: its NodeClaims are owned by it, so the garbage
		// collector deletes them and termination drains their nodes.
		if err := c.Client.Delete(context.Background(), np); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete NodePool %s: %v", name, err)
		}
		Eventually(t, 90*time.Second, "NodeClaims of "+name+" to be gone", func(ctx context.Context) (bool, error) {
			list := &karpv1.NodeClaimList{}
			if err := c.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
				return false, nil
			}
			return len(list.Items) == 0, nil
		})
	})
	return np
}

// Req is a NodePool requirement.
func Req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// Deployment creates a Deployment in "default" whose pods (label app=name) select the NodePool
// pool and request cpu, and deletes it (waiting for its pods to go) when the test ends. It
// returns the Deployment as created.
func (c *Cluster) Deployment(t *testing.T, name, pool string, replicas int32, cpu string, mutate func(*corev1.PodSpec)) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{
		NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: pool},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
	}
	if mutate != nil {
		mutate(&spec)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if err := c.Client.Create(context.Background(), d); err != nil {
		t.Fatalf("create Deployment %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Deployment %s: %v", name, err)
		}
		Eventually(t, 60*time.Second, "pods of "+name+" to be gone", func(ctx context.Context) (bool, error) {
			pods := &corev1.PodList{}
			if err := c.Client.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
				return false, nil
			}
			return len(pods.Items) == 0, nil
		})
	})
	return d
}

// Pods lists the pods of app in "default".
func (c *Cluster) Pods(t *testing.T, app string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := c.Client.List(context.Background(), list, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	return list.Items
}

// WaitRunning waits until exactly n pods of app are Running and returns them.
func (c *Cluster) WaitRunning(t *testing.T, app string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var got []corev1.Pod
	Eventually(t, timeout, fmt.Sprintf("%d pods of %s Running", n, app), func(ctx context.Context) (bool, error) {
		got = nil
		for _, p := range c.Pods(t, app) {
			if p.Status.Phase == corev1.PodRunning {
				got = append(got, p)
			}
		}
		return len(got) == n, nil
	})
	return got
}

// NodeClaims lists the NodeClaims of the NodePool.
func (c *Cluster) NodeClaims(t *testing.T, pool string) []karpv1.NodeClaim {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := c.Client.List(context.Background(), list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		t.Fatalf("list NodeClaims: %v", err)
	}
	return list.Items
}

// Scale sets the replicas of the Deployment name in "default".
func (c *Cluster) Scale(t *testing.T, name string, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	ctx := context.Background()
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, d); err != nil {
		t.Fatalf("get Deployment %s: %v", name, err)
	}
	orig := d.DeepCopy()
	d.Spec.Replicas = &replicas
	if err := c.Client.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
		t.Fatalf("scale Deployment %s: %v", name, err)
	}
}

// Live returns the NodeClaims that are not being deleted.
func Live(claims []karpv1.NodeClaim) []karpv1.NodeClaim {
	var out []karpv1.NodeClaim
	for _, nc := range claims {
		if nc.DeletionTimestamp == nil {
			out = append(out, nc)
		}
	}
	return out
}

// Disrupting counts the NodeClaims a disruption holds or that are being deleted.
func Disrupting(claims []karpv1.NodeClaim) int {
	n := 0
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil || nc.Annotations[karpv1.DisruptionCommandAnnotationKey] != "" {
			n++
		}
	}
	return n
}

// HasEvent waits up to 30 s for an Event on the object named regarding with the reason and a
// message containing text, and reports whether one came.
func (c *Cluster) HasEvent(t *testing.T, regarding, reason, text string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := c.Client.List(ctx, events); err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == regarding && e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
	return err == nil
}

// OnDemandC returns requirements for on-demand, amd64, c-family nodes of the given vCPU counts
// (for example "4", so that a 1.5-CPU pod takes about half a node).
func OnDemandC(cpus ...string) []karpv1.NodeSelectorRequirementWithMinValues {
	return []karpv1.NodeSelectorRequirementWithMinValues{
		Req(awsv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c"),
		Req(awsv1.LabelInstanceCPU, corev1.NodeSelectorOpIn, cpus...),
		Req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
		Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
	}
}
