package drift_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/metricstest"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/drift"
	"github.com/joiner-dev/joiner/controllers/nodepoolhash"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// start is where the tests' fake clock stands. It is a whole second because the API server
// stores condition times with second precision.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// reasonProvider is the fake provider with an IsDrifted answer the test may change while the
// controller runs.
type reasonProvider struct {
	*fake.CloudProvider
	mu     sync.Mutex
	reason cloudprovider.DriftReason
}

func (p *reasonProvider) set(r cloudprovider.DriftReason) { p.mu.Lock(); p.reason = r; p.mu.Unlock() }

func (p *reasonProvider) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reason, nil
}

// startControllers runs the hash and drift controllers against cloud and returns the drift
// metrics they count into.
func startControllers(t *testing.T, cloud cloudprovider.CloudProvider, opts drift.Options) *drift.Metrics {
	t.Helper()
	reg := prometheus.NewRegistry()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		if err := nodepoolhash.NewController(mgr.GetClient(), nodepoolhash.Options{}).SetupWithManager(mgr); err != nil {
			return err
		}
		d, err := drift.NewController(mgr.GetClient(), cloud, clocktesting.NewFakeClock(start), reg, opts)
		if err != nil {
			return err
		}
		return d.SetupWithManager(mgr)
	})
	m, err := drift.NewMetrics(reg) // the collector the controller registered
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustDuration(t *testing.T, s string) karpv1.NillableDuration {
	t.Helper()
	d, err := karpv1.ParseNillableDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// newNodePool returns a NodePool with a template label and zones us-east-1a and us-east-1b.
func newNodePool(annotations map[string]string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: nct.Name("pool"), Annotations: annotations},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				TemplateObjectMeta: karpv1.TemplateObjectMeta{Labels: map[string]string{"team": "a"}},
				Spec: karpv1.NodeClaimTemplateSpec{
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}},
						{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}},
					},
					NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"},
				},
			},
		},
	}
}

// createStampedNodePool creates the NodePool and waits for the hash controller to stamp it.
func createStampedNodePool(t *testing.T) *karpv1.NodePool {
	t.Helper()
	np := newNodePool(nil)
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 10*time.Second, "nodepool stamped", func(ctx context.Context) error {
		if err := env.Get(ctx, np); err != nil {
			return err
		}
		if np.Annotations[karpv1.NodePoolHashAnnotationKey] != np.Hash() {
			return fmt.Errorf("nodepool annotations %v", np.Annotations)
		}
		return nil
	})
	return np
}

// nodeClaimState is the status a test gives a NodeClaim.
type nodeClaimState struct {
	// notLaunched leaves out the Launched condition.
	notLaunched bool
	// drifted seeds a Drifted=True condition with this reason.
	drifted string
}

// createNodeClaim creates a NodeClaim of the NodePool as the provisioner and a launch would: the
// template's labels and the NodePool's hash annotations (annotations overrides them when not
// nil), plus the labels of the launched instance (zone us-east-1a), and writes its status.
func createNodeClaim(t *testing.T, np *karpv1.NodePool, annotations map[string]string, state nodeClaimState) *karpv1.NodeClaim {
	t.Helper()
	nc := nct.NodeClaim(nct.Name("nc"), np.Name)
	maps.Copy(nc.Labels, np.Spec.Template.Labels)
	maps.Copy(nc.Labels, map[string]string{
		karpv1.LabelTopologyZone:    "us-east-1a",
		karpv1.LabelArch:            karpv1.ArchitectureAmd64,
		karpv1.LabelOS:              karpv1.OSLinux,
		karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand,
		karpv1.LabelInstanceType:    "m5.large",
	})
	if annotations == nil {
		annotations = map[string]string{
			karpv1.NodePoolHashAnnotationKey:        np.Annotations[karpv1.NodePoolHashAnnotationKey],
			karpv1.NodePoolHashVersionAnnotationKey: np.Annotations[karpv1.NodePoolHashVersionAnnotationKey],
		}
	}
	nc.Annotations = annotations
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	stored := nc.DeepCopy()
	if !state.notLaunched {
		nc.SetCondition(start, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
	}
	if state.drifted != "" {
		nc.SetCondition(start, karpv1.ConditionTypeDrifted, metav1.ConditionTrue, state.drifted, state.drifted)
	}
	if err := env.Client.Status().Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
		t.Fatalf("patch status of nodeclaim %s: %v", nc.Name, err)
	}
	return nc
}

// hasDrift returns nil when the NodeClaim's Drifted condition is True with the reason (as reason
// and message), or absent when reason is "".
func hasDrift(ctx context.Context, nc *karpv1.NodeClaim, reason cloudprovider.DriftReason) error {
	if err := env.Get(ctx, nc); err != nil {
		return err
	}
	c := nc.StatusCondition(karpv1.ConditionTypeDrifted)
	switch {
	case reason == "" && c != nil:
		return fmt.Errorf("nodeclaim %s has condition Drifted=%s (%s), want none", nc.Name, c.Status, c.Reason)
	case reason == "":
		return nil
	case c == nil:
		return fmt.Errorf("nodeclaim %s has no Drifted condition, want reason %s", nc.Name, reason)
	case c.Status != metav1.ConditionTrue || c.Reason != string(reason) || c.Message != string(reason):
		return fmt.Errorf("nodeclaim %s condition Drifted=%s reason %q message %q, want True %q", nc.Name, c.Status, c.Reason, c.Message, reason)
	}
	return nil
}

func waitDrift(t *testing.T, nc *karpv1.NodeClaim, reason cloudprovider.DriftReason, what string) {
	t.Helper()
	nct.Eventually(t, 10*time.Second, what, func(ctx context.Context) error { return hasDrift(ctx, nc, reason) })
}

// updateNodePool applies change to the stored NodePool, retrying on conflicts with the hash
// controller's writes.
func updateNodePool(t *testing.T, np *karpv1.NodePool, change func(np *karpv1.NodePool)) {
	t.Helper()
	nct.Eventually(t, 10*time.Second, "update nodepool", func(ctx context.Context) error {
		if err := env.Get(ctx, np); err != nil {
			return err
		}
		change(np)
		return env.Client.Update(ctx, np)
	})
}

func TestDriftedCondition(t *testing.T) {
	zones := func(zs ...string) func(np *karpv1.NodePool) {
		return func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = zs }
	}
	label := func(np *karpv1.NodePool) { np.Spec.Template.Labels["team"] = "b" }
	cases := []struct {
		name  string
		state nodeClaimState
		// provider is what IsDrifted answers.
		provider cloudprovider.DriftReason
		// change is applied to the NodePool once the NodeClaim is judged; nil changes nothing.
		change func(t *testing.T, np *karpv1.NodePool)
		// want is the Drifted reason in the end; "" means no condition.
		want cloudprovider.DriftReason
	}{
		{name: "up to date"},
		{name: "not launched", state: nodeClaimState{notLaunched: true}, provider: "ImageDrifted"},
		{name: "provider drift", provider: "ImageDrifted", want: "ImageDrifted"},
		{name: "template label changed", change: func(_ *testing.T, np *karpv1.NodePool) { label(np) }, want: drift.ReasonNodePoolDrifted},
		{name: "taint added", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
		}, want: drift.ReasonNodePoolDrifted},
		{name: "expireAfter changed", change: func(t *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = mustDuration(t, "24h")
		}, want: drift.ReasonNodePoolDrifted},
		{name: "limits changed", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		}},
		{name: "disruption budgets changed", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
		}},
		{name: "requirements narrowed past the node's zone", change: func(_ *testing.T, np *karpv1.NodePool) { zones("us-east-1b")(np) },
			want: drift.ReasonRequirementsDrifted},
		{name: "requirements narrowed to the node's zone", change: func(_ *testing.T, np *karpv1.NodePool) { zones("us-east-1a")(np) }},
		{name: "requirements widened", change: func(_ *testing.T, np *karpv1.NodePool) { zones("us-east-1a", "us-east-1b", "us-east-1c")(np) }},
		{name: "hash drift comes before requirements drift", change: func(_ *testing.T, np *karpv1.NodePool) {
			label(np)
			zones("us-east-1b")(np)
		}, want: drift.ReasonNodePoolDrifted},
		{name: "requirements drift comes before provider drift", provider: "ImageDrifted",
			change: func(_ *testing.T, np *karpv1.NodePool) { zones("us-east-1b")(np) }, want: drift.ReasonRequirementsDrifted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := &reasonProvider{CloudProvider: fake.New(), reason: tc.provider}
			startControllers(t, cloud, drift.Options{})
			np := createStampedNodePool(t)
			// A stale condition that the controller must replace or remove shows that it has
			// judged the NodeClaim.
			tc.state.drifted = "Stale"
			nc := createNodeClaim(t, np, nil, tc.state)
			initial := tc.provider
			if tc.state.notLaunched {
				initial = ""
			}
			waitDrift(t, nc, initial, "drift before the change")
			if tc.change == nil {
				return
			}
			updateNodePool(t, np, func(np *karpv1.NodePool) { tc.change(t, np) })
			if tc.want != "" {
				waitDrift(t, nc, tc.want, "drift after the change")
				return
			}
			// Nothing to wait for: the change must not drift the NodeClaim for as long as the
			// controllers take to react to other changes.
			nct.Consistently(t, time.Second, "not drifted after the change", func(ctx context.Context) error {
				return hasDrift(ctx, nc, initial)
			})
		})
	}
}

// TestHashVersionChangeDoesNotDrift starts from a NodePool and NodeClaims stamped by an older hash
// scheme: one NodeClaim matches the NodePool's old hash, one is drifted. The current scheme hashes
// the template differently. The hash controller re-stamps the NodeClaims: the one that was not
// drifted takes the NodePool's new hash and stays undrifted; the drifted one keeps its hash and
// stays drifted.
func TestHashVersionChangeDoesNotDrift(t *testing.T) {
	old := func(hash string) map[string]string {
		return map[string]string{karpv1.NodePoolHashAnnotationKey: hash, karpv1.NodePoolHashVersionAnnotationKey: "v2"}
	}
	np := newNodePool(old("111"))
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	// Both exist before the controllers start, so the hash controller's first look sees them.
	fresh := createNodeClaim(t, np, old("111"), nodeClaimState{})
	drifted := createNodeClaim(t, np, old("333"), nodeClaimState{drifted: string(drift.ReasonNodePoolDrifted)})
	startControllers(t, &reasonProvider{CloudProvider: fake.New()}, drift.Options{})

	nct.Eventually(t, 10*time.Second, "nodeclaims re-stamped", func(ctx context.Context) error {
		if err := env.Get(ctx, np); err != nil {
			return err
		}
		want := np.Hash()
		for nc, hash := range map[*karpv1.NodeClaim]string{fresh: want, drifted: "333"} {
			if err := env.Get(ctx, nc); err != nil {
				return err
			}
			if h, v := nc.Annotations[karpv1.NodePoolHashAnnotationKey], nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey]; h != hash || v != karpv1.NodePoolHashVersion {
				return fmt.Errorf("nodeclaim %s has hash %q version %q, want %q %q", nc.Name, h, v, hash, karpv1.NodePoolHashVersion)
			}
		}
		if np.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
			return fmt.Errorf("nodepool annotations %v", np.Annotations)
		}
		return nil
	})
	nct.Consistently(t, time.Second, "re-stamping neither drifts nor undrifts", func(ctx context.Context) error {
		if err := hasDrift(ctx, fresh, ""); err != nil {
			return err
		}
		return hasDrift(ctx, drifted, drift.ReasonNodePoolDrifted)
	})
}

// TestDriftedMetricCountsTransitions drifts a NodeClaim, undrifts it by reverting the change, and
// drifts it again: each time it becomes drifted counts once, however often it is reconciled.
func TestDriftedMetricCountsTransitions(t *testing.T) {
	m := startControllers(t, &reasonProvider{CloudProvider: fake.New()}, drift.Options{})
	np := createStampedNodePool(t)
	nc := createNodeClaim(t, np, nil, nodeClaimState{})
	counter := m.Drifted.WithLabelValues(string(drift.ReasonNodePoolDrifted), np.Name)
	steps := []struct {
		team string
		want cloudprovider.DriftReason
		// count is the counter's value after the step.
		count float64
	}{
		{team: "b", want: drift.ReasonNodePoolDrifted, count: 1},
		{team: "c", want: drift.ReasonNodePoolDrifted, count: 1}, // still drifted: not a new transition
		{team: "a", count: 1},
		{team: "b", want: drift.ReasonNodePoolDrifted, count: 2},
	}
	for i, s := range steps {
		updateNodePool(t, np, func(np *karpv1.NodePool) { np.Spec.Template.Labels["team"] = s.team })
		nct.Eventually(t, 10*time.Second, fmt.Sprintf("step %d: nodepool re-stamped", i), func(ctx context.Context) error {
			if err := env.Get(ctx, np); err != nil {
				return err
			}
			if h := np.Annotations[karpv1.NodePoolHashAnnotationKey]; h != np.Hash() {
				return fmt.Errorf("nodepool hash %s, want %s", h, np.Hash())
			}
			return nil
		})
		nct.Eventually(t, 10*time.Second, fmt.Sprintf("step %d: team %s", i, s.team), func(ctx context.Context) error {
			if err := hasDrift(ctx, nc, s.want); err != nil {
				return err
			}
			if got := metricstest.Value(t, counter); got != s.count {
				return fmt.Errorf("karpenter_nodeclaims_drifted_total{type=NodePoolDrifted} = %v, want %v", got, s.count)
			}
			return nil
		})
	}
}

// TestNodeClassChangeRechecksNodeClaims changes the provider's answer and then the node class the
// NodeClaim references: the node class event, not the periodic requeue (an hour here), brings the
// provider's drift reason.
func TestNodeClassChangeRechecksNodeClaims(t *testing.T) {
	class := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if err := env.Client.Create(t.Context(), class); err != nil {
		t.Fatal(err)
	}
	cloud := &reasonProvider{CloudProvider: fake.New()}
	startControllers(t, cloud, drift.Options{RequeueInterval: time.Hour})
	np := createStampedNodePool(t)
	nc := createNodeClaim(t, np, nil, nodeClaimState{drifted: "Stale"})
	waitDrift(t, nc, "", "not drifted at first")

	cloud.set("NodeClassDrift")
	nct.Eventually(t, 10*time.Second, "update node class", func(ctx context.Context) error {
		if err := env.Get(ctx, class); err != nil {
			return err
		}
		class.Spec.Labels = map[string]string{"example.com/flavour": "new"}
		return env.Client.Update(ctx, class)
	})
	waitDrift(t, nc, "NodeClassDrift", "drifted after the node class changed")
}
