package provisioning_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/local"
)

const nodeClassName = "e2e"

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func ensureNodeClass(t *testing.T) {
	t.Helper()
	nc := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: nodeClassName},
		Spec: joinerv1alpha1.LocalNodeClassSpec{Region: "us-east-1", NodeRegistrationDelay: &metav1.Duration{Duration: time.Second}}}
	if err := c.Create(context.Background(), nc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create LocalNodeClass: %v", err)
	}
}

// nodePool creates a NodePool on the e2e node class and, when the test ends, deletes its
// NodeClaims (which drains and terminates their nodes), waits for them to go, and deletes it.
func nodePool(t *testing.T, name string, reqs []karpv1.NodeSelectorRequirementWithMinValues, mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	t.Helper()
	ensureNodeClass(t)
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: nodeClassName},
				Requirements: reqs,
			}},
		},
	}
	if mutate != nil {
		mutate(np)
	}
	if err := c.Create(context.Background(), np); err != nil {
		t.Fatalf("create NodePool %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.DeleteAllOf(ctx, &karpv1.NodeClaim{}, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
			t.Errorf("delete NodeClaims of %s: %v", name, err)
		}
		eventually(t, 90*time.Second, "NodeClaims of "+name+" to be gone", func(ctx context.Context) (bool, error) {
			list := &karpv1.NodeClaimList{}
			if err := c.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
				return false, nil
			}
			return len(list.Items) == 0, nil
		})
		if err := c.Delete(ctx, np); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete NodePool %s: %v", name, err)
		}
	})
	return np
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// deployment creates a Deployment whose pods select the NodePool pool, and deletes it (waiting for
// its pods to go) when the test ends.
func deployment(t *testing.T, name, pool string, replicas int32, cpu string, mutate func(*corev1.PodSpec)) {
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
	if err := c.Create(context.Background(), d); err != nil {
		t.Fatalf("create Deployment %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Deployment %s: %v", name, err)
		}
		eventually(t, 60*time.Second, "pods of "+name+" to be gone", func(ctx context.Context) (bool, error) {
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
				return false, nil
			}
			return len(pods.Items) == 0, nil
		})
	})
}

func pods(t *testing.T, app string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := c.List(context.Background(), list, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	return list.Items
}

func waitRunning(t *testing.T, app string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var got []corev1.Pod
	eventually(t, timeout, fmt.Sprintf("%d pods of %s Running", n, app), func(ctx context.Context) (bool, error) {
		got = nil
		for _, p := range pods(t, app) {
			if p.Status.Phase == corev1.PodRunning {
				got = append(got, p)
			}
		}
		return len(got) == n, nil
	})
	return got
}

func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func nodeClaims(t *testing.T, pool string) []karpv1.NodeClaim {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := c.List(context.Background(), list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		t.Fatalf("list NodeClaims: %v", err)
	}
	return list.Items
}

func TestTenReplicasGetNodesAndRun(t *testing.T) {
	nodePool(t, "e2e-scale", []karpv1.NodeSelectorRequirementWithMinValues{
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"),
	}, nil)
	deployment(t, "inflate", "e2e-scale", 10, "1", nil)
	running := waitRunning(t, "inflate", 10, 120*time.Second)
	var claims []karpv1.NodeClaim
	eventually(t, 60*time.Second, "every NodeClaim of e2e-scale Ready", func(ctx context.Context) (bool, error) {
		claims = nodeClaims(t, "e2e-scale")
		for _, nc := range claims {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeReady) {
				return false, nil
			}
		}
		return len(claims) > 0, nil
	})
	capacity := resource.Quantity{}
	for _, nc := range claims {
		q := nc.Status.Capacity[corev1.ResourceCPU]
		capacity.Add(q)
	}
	if capacity.Cmp(resource.MustParse("10")) < 0 {
		t.Errorf("10 pods of 1 CPU run on NodeClaims with %s CPUs in all", capacity.String())
	}
	for _, p := range running {
		if n := node(t, p.Spec.NodeName); n.Labels[karpv1.NodePoolLabelKey] != "e2e-scale" {
			t.Errorf("pod %s runs on %s, which is not a node of e2e-scale", p.Name, n.Name)
		}
	}
	t.Logf("10 pods of 1 CPU run on %d NodeClaims with %s CPUs", len(claims), capacity.String())
}

func TestNodePoolLimitsAreNeverExceeded(t *testing.T) {
	nodePool(t, "e2e-limits", []karpv1.NodeSelectorRequirementWithMinValues{
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m"),
	}, func(np *karpv1.NodePool) {
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	})
	deployment(t, "limited", "e2e-limits", 10, "1", nil)
	limit := resource.MustParse("4")
	var running int
	// Watch for a while: capacity must stay within the limit, some pods run, the rest stay Pending.
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		total := resource.Quantity{}
		for _, nc := range nodeClaims(t, "e2e-limits") {
			if q, ok := nc.Status.Capacity[corev1.ResourceCPU]; ok {
				total.Add(q)
			}
		}
		if total.Cmp(limit) > 0 {
			t.Fatalf("NodeClaims of e2e-limits have %s CPUs, above the limit of 4", total.String())
		}
		running = 0
		for _, p := range pods(t, "limited") {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if running == 0 || running >= 10 {
		t.Fatalf("%d of 10 pods run; want some running within the 4-CPU limit and the rest pending", running)
	}
	// The pending pods are told why: an Event names the NodePool and its limit.
	var seen []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FailedProvisioning events on pending pods: %q", seen)
		}
	})
	eventually(t, 30*time.Second, "a FailedProvisioning event naming the limit on a pending pod", func(ctx context.Context) (bool, error) {
		pending := map[string]bool{}
		for _, p := range pods(t, "limited") {
			if p.Status.Phase == corev1.PodPending {
				pending[p.Name] = true
			}
		}
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace("default")); err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range evs.Items {
			if !pending[e.Regarding.Name] || e.Reason != "FailedProvisioning" {
				continue
			}
			seen = append(seen, e.Note)
			if strings.Contains(e.Note, "e2e-limits") && strings.Contains(e.Note, "limit") {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestZonalTopologySpreadIsHonoured(t *testing.T) {
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	nodePool(t, "e2e-spread", []karpv1.NodeSelectorRequirementWithMinValues{
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m"),
	}, nil)
	deployment(t, "spread", "e2e-spread", 6, "500m", func(s *corev1.PodSpec) {
		s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
		}}
	})
	running := waitRunning(t, "spread", 6, 120*time.Second)
	perZone := map[string]int{}
	for _, p := range running {
		perZone[node(t, p.Spec.NodeName).Labels[corev1.LabelTopologyZone]]++
	}
	for _, z := range zones {
		if perZone[z] != 2 {
			t.Errorf("pods per zone = %v; want 2 in each of %v", perZone, zones)
			break
		}
	}
}

func TestArm64PodGetsArm64Node(t *testing.T) {
	nodePool(t, "e2e-arch", []karpv1.NodeSelectorRequirementWithMinValues{
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
	}, nil)
	deployment(t, "arm", "e2e-arch", 1, "1", func(s *corev1.PodSpec) { s.NodeSelector[corev1.LabelArchStable] = "arm64" })
	p := waitRunning(t, "arm", 1, 90*time.Second)[0]
	if arch := node(t, p.Spec.NodeName).Labels[corev1.LabelArchStable]; arch != "arm64" {
		t.Errorf("the arm64 pod runs on a %q node", arch)
	}
}

func TestSpotIsChosenWhenAllowedAndCheaper(t *testing.T) {
	nodePool(t, "e2e-spot", []karpv1.NodeSelectorRequirementWithMinValues{
		req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"),
		req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "m"),
	}, nil)
	deployment(t, "spotty", "e2e-spot", 1, "1", nil)
	p := waitRunning(t, "spotty", 1, 90*time.Second)[0]
	n := node(t, p.Spec.NodeName)
	if ct := n.Labels[karpv1.CapacityTypeLabelKey]; ct != "spot" {
		t.Fatalf("capacity type %q, want spot", ct)
	}
	// And spot really was the cheaper choice for what was launched.
	np := &karpv1.NodePool{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "e2e-spot"}, np); err != nil {
		t.Fatal(err)
	}
	its, err := run.Operator.CloudProvider.GetInstanceTypes(context.Background(), np)
	if err != nil {
		t.Fatal(err)
	}
	var spot, onDemand float64
	for _, it := range its {
		if it.Name != n.Labels[corev1.LabelInstanceTypeStable] {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone() != n.Labels[corev1.LabelTopologyZone] {
				continue
			}
			switch o.CapacityType() {
			case "spot":
				spot = o.Price
			case "on-demand":
				onDemand = o.Price
			}
		}
	}
	if spot <= 0 || spot >= onDemand {
		t.Errorf("launched %s spot at $%.4f/h vs on-demand $%.4f/h: spot was not cheaper", n.Labels[corev1.LabelInstanceTypeStable], spot, onDemand)
	}
}

func TestInsufficientCapacityIsSkipped(t *testing.T) {
	nodePool(t, "e2e-ice", []karpv1.NodeSelectorRequirementWithMinValues{
		req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "c5.large", "c5.xlarge"),
	}, nil)
	// The cheapest type has no capacity anywhere, and the provider only finds out at launch.
	shortage := local.Shortage{InstanceType: "c5.large", Unannounced: true}
	failures.AddInsufficientCapacity(shortage)
	t.Cleanup(func() { failures.RemoveInsufficientCapacity(shortage) })
	deployment(t, "ice", "e2e-ice", 1, "1", nil)
	p := waitRunning(t, "ice", 1, 90*time.Second)[0]
	if it := node(t, p.Spec.NodeName).Labels[corev1.LabelInstanceTypeStable]; it != "c5.xlarge" {
		t.Errorf("launched %q; want c5.xlarge, since c5.large has no capacity", it)
	}
}

func TestNodeThatNeverRegistersIsCleanedUp(t *testing.T) {
	nodePool(t, "e2e-ghost", []karpv1.NodeSelectorRequirementWithMinValues{
		req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "t3.medium"),
	}, nil)
	failures.NeverRegister("t3.medium")
	t.Cleanup(func() { failures.AllowRegister("t3.medium") })
	deployment(t, "ghost", "e2e-ghost", 1, "500m", nil)
	var first karpv1.NodeClaim
	eventually(t, 60*time.Second, "a launched NodeClaim", func(ctx context.Context) (bool, error) {
		for _, nc := range nodeClaims(t, "e2e-ghost") {
			if nc.Status.ProviderID != "" {
				first = nc
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := run.Operator.CloudProvider.Get(context.Background(), first.Status.ProviderID); err != nil {
		t.Fatalf("the launched instance is unknown to the provider: %v", err)
	}
	eventually(t, registrationTTL+60*time.Second, "the unregistered NodeClaim to be deleted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, types.NamespacedName{Name: first.Name}, &karpv1.NodeClaim{})
		return apierrors.IsNotFound(err), nil
	})
	_, err := run.Operator.CloudProvider.Get(context.Background(), first.Status.ProviderID)
	if !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("the instance of the deleted NodeClaim still exists (err = %v)", err)
	}
}

// TestNoInstanceIsLeftWithoutANodeClaim runs last: every instance the provider knows has a NodeClaim.
func TestNoInstanceIsLeftWithoutANodeClaim(t *testing.T) {
	eventually(t, 60*time.Second, "every instance to have a NodeClaim", func(ctx context.Context) (bool, error) {
		instances, err := run.Operator.CloudProvider.List(ctx)
		if err != nil {
			return false, err
		}
		claims := &karpv1.NodeClaimList{}
		if err := c.List(ctx, claims); err != nil {
			return false, nil
		}
		owned := map[string]bool{}
		for _, nc := range claims.Items {
			owned[nc.Status.ProviderID] = true
		}
		for _, in := range instances {
			if !owned[in.Status.ProviderID] {
				t.Logf("instance %s has no NodeClaim yet", in.Status.ProviderID)
				return false, nil
			}
		}
		return true, nil
	})
}
