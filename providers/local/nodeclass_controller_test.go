package local

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/providers/catalog"
)

// TestLocalNodeClassStatus runs the controller in a manager against a real API server and checks
// the status it writes for valid and invalid classes, and after fixes and unrelated changes.
func TestLocalNodeClassStatus(t *testing.T) {
	kube := testClient(t)
	scheme, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(shared.env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 testr.New(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	c, err := NewNodeClassController(mgr.GetClient(), cat, clk)
	if err != nil {
		t.Fatalf("NewNodeClassController: %v", err)
	}
	if err := c.SetupWithManager(mgr); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	var zonesUSEast1 []string
	for _, z := range cat.Zones("us-east-1") {
		zonesUSEast1 = append(zonesUSEast1, z.Name)
	}

	for i, tc := range []struct {
		name string
		spec joinerv1alpha1.LocalNodeClassSpec
		want readyWant
		// fix, when set, replaces the spec afterwards, and fixed is what must follow.
		fix   *joinerv1alpha1.LocalNodeClassSpec
		fixed readyWant
	}{
		{
			name: "defaults resolve to every zone of us-east-1",
			want: readyWant{status: metav1.ConditionTrue, reason: ReasonResolved, zones: zonesUSEast1},
		},
		{
			name: "chosen zones, in catalog order",
			spec: joinerv1alpha1.LocalNodeClassSpec{Region: "us-west-2", Zones: []string{"us-west-2d", "us-west-2b"}},
			want: readyWant{status: metav1.ConditionTrue, reason: ReasonResolved, zones: []string{"us-west-2b", "us-west-2d"}},
		},
		{
			name:  "unknown region, then fixed",
			spec:  joinerv1alpha1.LocalNodeClassSpec{Region: "xx-north-1"},
			want:  readyWant{status: metav1.ConditionFalse, reason: ReasonRegionNotFound, message: "spec.region: xx-north-1 is not a region of the catalog; valid regions: " + strings.Join(cat.Regions(), ", ")},
			fix:   &joinerv1alpha1.LocalNodeClassSpec{Region: "eu-west-1", Zones: []string{"eu-west-1a"}},
			fixed: readyWant{status: metav1.ConditionTrue, reason: ReasonResolved, zones: []string{"eu-west-1a"}},
		},
		{
			name:  "unknown zone, then broken differently",
			spec:  joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"us-east-1a", "us-east-1z"}},
			want:  readyWant{status: metav1.ConditionFalse, reason: ReasonZoneNotFound, message: "spec.zones[1]: us-east-1z is not a zone of us-east-1; valid zones: " + strings.Join(zonesUSEast1, ", ")},
			fix:   &joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"eu-west-1a"}},
			fixed: readyWant{status: metav1.ConditionFalse, reason: ReasonZoneNotFound, message: "spec.zones[0]: eu-west-1a is not a zone of us-east-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", uniqueName(t), i)}, Spec: tc.spec}
			if err := kube.Create(ctx, nc); err != nil {
				t.Fatalf("create: %v", err)
			}
			first := waitForStatus(t, kube, nc.Name, tc.want)
			if tc.fix == nil {
				return
			}
			clk.SetTime(clk.Now().Add(time.Minute))
			if err := kube.Get(ctx, types.NamespacedName{Name: nc.Name}, nc); err != nil {
				t.Fatalf("get: %v", err)
			}
			nc.Spec = *tc.fix
			if err := kube.Update(ctx, nc); err != nil {
				t.Fatalf("update: %v", err)
			}
			second := waitForStatus(t, kube, nc.Name, tc.fixed)
			changed := tc.want.status != tc.fixed.status
			if moved := !second.LastTransitionTime.Equal(&first.LastTransitionTime); moved != changed {
				t.Errorf("lastTransitionTime went from %s to %s; status changed: %t", first.LastTransitionTime, second.LastTransitionTime, changed)
			}
			if changed && !second.LastTransitionTime.Time.Equal(clk.Now()) {
				t.Errorf("lastTransitionTime %s, want the clock's %s", second.LastTransitionTime, clk.Now())
			}
		})
	}

	t.Run("a deleted class reconciles without error", func(t *testing.T) {
		if _, err := c.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "never-existed"}}); err != nil {
			t.Errorf("Reconcile of a missing class: %v", err)
		}
	})
}

// readyWant is the expected Ready condition (message as a substring) and status.zones.
type readyWant struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	zones   []string
}

// waitForStatus waits until the class's Ready condition has observed its generation and returns
// it, checking it and status.zones against want.
func waitForStatus(t *testing.T, kube client.Client, name string, w readyWant) metav1.Condition {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	nc := &joinerv1alpha1.LocalNodeClass{}
	for {
		if err := kube.Get(context.Background(), types.NamespacedName{Name: name}, nc); err != nil {
			t.Fatalf("get: %v", err)
		}
		cond := meta.FindStatusCondition(nc.Status.Conditions, joinerv1alpha1.ConditionReady)
		if cond != nil && cond.ObservedGeneration == nc.Generation {
			if cond.Status != w.status || cond.Reason != w.reason || !strings.Contains(cond.Message, w.message) {
				t.Errorf("Ready = %s/%s %q, want %s/%s containing %q", cond.Status, cond.Reason, cond.Message, w.status, w.reason, w.message)
			}
			if strings.Join(nc.Status.Zones, ",") != strings.Join(w.zones, ",") {
				t.Errorf("status.zones = %v, want %v", nc.Status.Zones, w.zones)
			}
			return *cond
		}
		if time.Now().After(deadline) {
			t.Fatalf("class %s: no Ready condition for generation %d after 20s: %+v", name, nc.Generation, nc.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNewNodeClassControllerRequiresClientAndCatalog(t *testing.T) {
	if _, err := NewNodeClassController(nil, &catalog.Catalog{}, nil); err == nil || !strings.Contains(err.Error(), "client is required") {
		t.Errorf("NewNodeClassController(nil client) = %v, want an error asking for a client", err)
	}
	if _, err := NewNodeClassController(fake.NewClientBuilder().Build(), nil, nil); err == nil || !strings.Contains(err.Error(), "catalog is required") {
		t.Errorf("NewNodeClassController(nil catalog) = %v, want an error asking for a catalog", err)
	}
}
