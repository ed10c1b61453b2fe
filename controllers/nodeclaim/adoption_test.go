package nodeclaim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/nodeclaim"
	"github.com/joiner-dev/joiner/controllers/termination"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

// TestNodeClaimsLaunchedBeforeJoinerAreAdopted writes NodeClaims as Karpenter leaves them when
// its controller is scaled to 0 (finalizer, provider ID, lifecycle conditions), then starts the
// lifecycle controllers, as Joiner starts after Karpenter. Each is adopted once (annotation,
// Event, log, joiner_nodeclaims_adopted_total), none is launched again, and the lifecycle goes on
// from where Karpenter left it; the NodeClaim Joiner launches itself is marked launched, not
// adopted.
func TestNodeClaimsLaunchedBeforeJoinerAreAdopted(t *testing.T) {
	type karpenterClaim struct {
		name string
		// conditions Karpenter had set to True; registered also creates the Node.
		conditions []string
		registered bool
	}
	pool := nct.Name("karpenter-pool")
	claims := []karpenterClaim{
		{name: "initialized", registered: true,
			conditions: []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady}},
		{name: "launched", conditions: []string{karpv1.ConditionTypeLaunched}},
		// A provider ID without a Launched condition must not get a second instance.
		{name: "provider-id-only"},
	}
	cloud := fake.New()
	created := map[string]*karpv1.NodeClaim{}
	for _, c := range claims {
		created[c.name] = writeKarpenterNodeClaim(t, cloud, nct.Name(c.name), pool, c.conditions, c.registered)
	}
	before := len(cloud.CreateCalls())

	reg := prometheus.NewRegistry()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return controllers.RegisterNodeLifecycle(mgr, controllers.Dependencies{
			CloudProvider: cloud, Registerer: reg,
			Options: controllers.Options{
				Termination:       termination.Options{PollInterval: 200 * time.Millisecond},
				GarbageCollection: garbagecollection.Options{Interval: time.Hour},
			},
		})
	})
	own := nct.NodeClaim(nct.Name("own"), pool)
	if err := env.Client.Create(t.Context(), own); err != nil {
		t.Fatal(err)
	}

	for _, c := range claims {
		nc := created[c.name]
		nct.Eventually(t, 20*time.Second, nc.Name+" adopted", func(ctx context.Context) error {
			if err := env.Get(ctx, nc); err != nil {
				return err
			}
			if got := nc.Annotations[nodeclaim.OriginAnnotationKey]; got != nodeclaim.OriginAdopted {
				return fmt.Errorf("%s=%q, want %q", nodeclaim.OriginAnnotationKey, got, nodeclaim.OriginAdopted)
			}
			return errors.Join(nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, ""),
				env.HasEvent(ctx, nc.Name, nodeclaim.ReasonAdopted, nc.Status.ProviderID))
		})
	}
	// The lifecycle goes on: the Node of a NodeClaim adopted before it registered is taken over.
	launched := created["launched"]
	node := nct.KwokNode(nct.Name("node"), launched.Status.ProviderID)
	if err := env.Client.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 20*time.Second, "the adopted NodeClaim registers its Node", func(ctx context.Context) error {
		if err := env.Get(ctx, launched); err != nil {
			return err
		}
		return nct.Condition(launched, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, nodeclaim.ReasonRegistered)
	})
	nct.Eventually(t, 20*time.Second, "Joiner's own NodeClaim is launched", func(ctx context.Context) error {
		if err := env.Get(ctx, own); err != nil {
			return err
		}
		if got := own.Annotations[nodeclaim.OriginAnnotationKey]; got != nodeclaim.OriginLaunched {
			return fmt.Errorf("%s=%q, want %q", nodeclaim.OriginAnnotationKey, got, nodeclaim.OriginLaunched)
		}
		return nil
	})

	if calls := cloud.CreateCalls()[before:]; len(calls) != 1 || calls[0].Name != own.Name {
		t.Errorf("%d Create calls, want 1 for %s only", len(calls), own.Name)
	}
	checkAdoptionReported(t, reg, pool, created["initialized"], own, len(claims))
}

// checkAdoptionReported checks that the adopted NodeClaim has one Adopted Event and is still
// Ready, that Joiner's own has none, and that the metric counts adopted NodeClaims of the pool.
func checkAdoptionReported(t *testing.T, reg prometheus.Gatherer, pool string, adopted, own *karpv1.NodeClaim, adoptedInPool int) {
	t.Helper()
	for name, nc := range map[string]string{"adopted": adopted.Name, "own": own.Name} {
		evs, err := env.Events(t.Context(), nc, nodeclaim.ReasonAdopted)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"adopted": 1, "own": 0}[name]; len(evs) != want {
			t.Errorf("%d %s Events on the %s NodeClaim %s, want %d", len(evs), nodeclaim.ReasonAdopted, name, nc, want)
		}
	}
	if got := metricstest.Sum(t, reg, "joiner_nodeclaims_adopted_total", map[string]string{"nodepool": pool}); got != float64(adoptedInPool) {
		t.Errorf("joiner_nodeclaims_adopted_total{nodepool=%s} = %v, want %d", pool, got, adoptedInPool)
	}
	if err := env.Get(t.Context(), adopted); err != nil {
		t.Fatal(err)
	}
	if err := nct.Condition(adopted, karpv1.ConditionTypeReady, metav1.ConditionTrue, ""); err != nil {
		t.Error(err)
	}
}

// writeKarpenterNodeClaim launches an instance with the provider and writes its NodeClaim as
// Karpenter leaves it: its termination finalizer, the provider's labels and status, the
// conditions given True and, when registered, the Node (with Karpenter's finalizer and labels).
func writeKarpenterNodeClaim(t *testing.T, cloud *fake.CloudProvider, name, pool string, conditions []string, registered bool) *karpv1.NodeClaim {
	t.Helper()
	ctx := t.Context()
	launched, err := cloud.Create(ctx, nct.NodeClaim(name, pool))
	if err != nil {
		t.Fatal(err)
	}
	nc := launched.DeepCopy()
	nc.Finalizers = []string{karpv1.TerminationFinalizer}
	status := nc.Status
	if err := env.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status = status
	if registered {
		node := nct.KwokNode(nct.Name("karpenter-node"), nc.Status.ProviderID)
		node.Spec.Taints = nil
		node.Finalizers = []string{karpv1.TerminationFinalizer}
		node.Labels[karpv1.NodePoolLabelKey] = pool
		node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
		node.Labels[karpv1.NodeInitializedLabelKey] = "true"
		if err := env.Client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		nc.Status.NodeName = node.Name
	}
	for _, c := range conditions {
		nc.SetCondition(time.Now().Add(-time.Minute), c, metav1.ConditionTrue, c, "")
	}
	if err := env.Client.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}
