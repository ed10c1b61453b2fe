package provisioning_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/providers/local"
)

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	framework.Eventually(t, timeout, what, cond)
}

func nodePool(t *testing.T, name string, reqs []karpv1.NodeSelectorRequirementWithMinValues, mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	t.Helper()
	return cluster.NodePool(t, name, reqs, mutate)
}

var req = framework.Req

func deployment(t *testing.T, name, pool string, replicas int32, cpu string, mutate func(*corev1.PodSpec)) {
	t.Helper()
	cluster.Deployment(t, name, pool, replicas, cpu, mutate)
}

func pods(t *testing.T, app string) []corev1.Pod { t.Helper(); return cluster.Pods(t, app) }

func waitRunning(t *testing.T, app string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	return cluster.WaitRunning(t, app, n, timeout)
}

func nodeClaims(t *testing.T, pool string) []karpv1.NodeClaim {
	t.Helper()
	return cluster.NodeClaims(t, pool)
}

func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
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
