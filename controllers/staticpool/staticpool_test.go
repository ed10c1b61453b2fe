package staticpool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/metricstest"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/staticpool"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// harness is a running static NodePool controller with its own metrics registry.
type harness struct {
	reg *prometheus.Registry
	// cache is the manager's cached client: what the controller reads.
	cache client.Client
}

func startController(t *testing.T) *harness {
	t.Helper()
	h := &harness{reg: prometheus.NewRegistry()}
	mgr := env.StartManager(t, func(mgr ctrl.Manager) error {
		c, err := staticpool.NewController(mgr.GetClient(), nil, mgr.GetEventRecorder(staticpool.ControllerName), h.reg, staticpool.Options{})
		if err != nil {
			return err
		}
		return c.SetupWithManager(mgr)
	})
	h.cache = mgr.GetClient()
	return h
}

func (h *harness) waitCounter(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	nct.Eventually(t, 10*time.Second, name, func(context.Context) error {
		if got := metricstest.Sum(t, h.reg, name, labels); got != want {
			return fmt.Errorf("%s%v is %v, want %v", name, labels, got, want)
		}
		return nil
	})
}

// nodePool returns a NodePool whose template sets every field a static NodeClaim copies; nil
// replicas makes it dynamic.
func nodePool(replicas *int64) *karpv1.NodePool {
	expireAfter, err := karpv1.ParseNillableDuration("336h")
	if err != nil {
		panic(err)
	}
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{
			Name: nct.Name("pool"),
			Annotations: map[string]string{
				karpv1.NodePoolHashAnnotationKey:        "1234567890",
				karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
				"example.com/not-copied":                "true",
			},
		},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				TemplateObjectMeta: karpv1.TemplateObjectMeta{
					Labels:      map[string]string{"example.com/team": "payments"},
					Annotations: map[string]string{"example.com/owner": "payments"},
				},
				Spec: karpv1.NodeClaimTemplateSpec{
					Taints:        []karpv1.Taint{{Key: "example.com/dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}},
					StartupTaints: []karpv1.Taint{{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}},
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}},
						{Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}, MinValues: ptr.To(2)},
					},
					NodeClassRef:           &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"},
					TerminationGracePeriod: &metav1.Duration{Duration: time.Hour},
					ExpireAfter:            expireAfter,
				},
			},
			Replicas: replicas,
		},
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

// nodeClaimsOf lists the NodePool's NodeClaims that are not being deleted, by name, from the API
// server.
func nodeClaimsOf(ctx context.Context, pool string) ([]karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	if err := env.Client.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(list.Items, func(nc karpv1.NodeClaim) bool { return !nc.DeletionTimestamp.IsZero() })
	slices.SortFunc(out, func(a, b karpv1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func hasNodeClaims(pool string, n int) func(context.Context) error {
	return func(ctx context.Context) error {
		ncs, err := nodeClaimsOf(ctx, pool)
		if err != nil {
			return err
		}
		if len(ncs) != n {
			return fmt.Errorf("nodepool %s has %d nodeclaims, want %d", pool, len(ncs), n)
		}
		return nil
	}
}

// waitNodeClaims waits until the NodePool has n NodeClaims and checks that it keeps n for a
// second (no second batch from a stale cache), then returns them.
func waitNodeClaims(t *testing.T, pool string, n int) []karpv1.NodeClaim {
	t.Helper()
	nct.Eventually(t, 10*time.Second, "nodeclaims created", hasNodeClaims(pool, n))
	nct.Consistently(t, time.Second, "nodeclaim count steady", hasNodeClaims(pool, n))
	ncs, err := nodeClaimsOf(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return ncs
}

// hasEvent returns nil once the object named regarding has an event of the type and reason whose
// note contains text.
func hasEvent(regarding, eventType, reason, text string) func(context.Context) error {
	return func(ctx context.Context) error {
		evs, err := env.Events(ctx, regarding, reason)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Type == eventType && strings.Contains(ev.Note, text) {
				return nil
			}
		}
		return fmt.Errorf("no %s %s event about %s containing %q among %d with that reason", eventType, reason, regarding, text, len(evs))
	}
}

// checkTemplateNodeClaim fails the test unless nc is a plain template NodeClaim of np.
func checkTemplateNodeClaim(t *testing.T, np *karpv1.NodePool, nc *karpv1.NodeClaim) {
	t.Helper()
	if !strings.HasPrefix(nc.Name, np.Name+"-") || nc.GenerateName != np.Name+"-" {
		t.Errorf("nodeclaim %s (generateName %q) is not named after nodepool %s", nc.Name, nc.GenerateName, np.Name)
	}
	wantLabels := map[string]string{"example.com/team": "payments", karpv1.NodePoolLabelKey: np.Name}
	if !equality.Semantic.DeepEqual(nc.Labels, wantLabels) {
		t.Errorf("nodeclaim %s labels %v, want %v", nc.Name, nc.Labels, wantLabels)
	}
	wantAnnotations := map[string]string{
		"example.com/owner":                     "payments",
		karpv1.NodePoolHashAnnotationKey:        np.Hash(),
		karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
	}
	if !equality.Semantic.DeepEqual(nc.Annotations, wantAnnotations) {
		t.Errorf("nodeclaim %s annotations %v, want %v", nc.Name, nc.Annotations, wantAnnotations)
	}
	tmpl := np.Spec.Template.Spec
	switch {
	case !equality.Semantic.DeepEqual(nc.Spec.Taints, tmpl.Taints):
		t.Errorf("nodeclaim %s taints %v, want %v", nc.Name, nc.Spec.Taints, tmpl.Taints)
	case !equality.Semantic.DeepEqual(nc.Spec.StartupTaints, tmpl.StartupTaints):
		t.Errorf("nodeclaim %s startup taints %v, want %v", nc.Name, nc.Spec.StartupTaints, tmpl.StartupTaints)
	case !equality.Semantic.DeepEqual(nc.Spec.Requirements, tmpl.Requirements):
		t.Errorf("nodeclaim %s requirements %v, want %v", nc.Name, nc.Spec.Requirements, tmpl.Requirements)
	case !equality.Semantic.DeepEqual(nc.Spec.NodeClassRef, tmpl.NodeClassRef):
		t.Errorf("nodeclaim %s nodeClassRef %v, want %v", nc.Name, nc.Spec.NodeClassRef, tmpl.NodeClassRef)
	case !equality.Semantic.DeepEqual(nc.Spec.TerminationGracePeriod, tmpl.TerminationGracePeriod):
		t.Errorf("nodeclaim %s terminationGracePeriod %v, want %v", nc.Name, nc.Spec.TerminationGracePeriod, tmpl.TerminationGracePeriod)
	case nc.Spec.ExpireAfter.String() != tmpl.ExpireAfter.String():
		t.Errorf("nodeclaim %s expireAfter %s, want %s", nc.Name, nc.Spec.ExpireAfter.String(), tmpl.ExpireAfter.String())
	case len(nc.Spec.Resources.Requests) != 0:
		t.Errorf("nodeclaim %s requests %v, want none", nc.Name, nc.Spec.Resources.Requests)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: np.Name, UID: np.UID, BlockOwnerDeletion: ptr.To(true)}}
	if !equality.Semantic.DeepEqual(nc.OwnerReferences, wantOwner) {
		t.Errorf("nodeclaim %s owner references %+v, want %+v", nc.Name, nc.OwnerReferences, wantOwner)
	}
}

func TestStaticNodePool(t *testing.T) {
	cases := []struct {
		name string
		// replicas nil makes the NodePool dynamic.
		replicas *int64
		// limitNodes sets spec.limits.nodes.
		limitNodes string
		// deleting deletes the NodePool (held by a finalizer) before the controller starts.
		deleting bool
		want     int
		// eventType, eventReason and eventText describe an event the NodePool must get.
		eventType, eventReason, eventText string
	}{
		{
			name: "creates the replicas from the template", replicas: ptr.To[int64](3), want: 3,
			eventType: corev1.EventTypeNormal, eventReason: staticpool.ReasonScaledUp, eventText: "Scaled static NodePool from 0 to 3",
		},
		{
			name: "limits.nodes caps the scale-up", replicas: ptr.To[int64](3), limitNodes: "2", want: 2,
			eventType: corev1.EventTypeWarning, eventReason: staticpool.ReasonNodeLimitReached, eventText: "limits.nodes is 2",
		},
		{name: "a dynamic NodePool is left alone", want: 0},
		{name: "a NodePool being deleted is left alone", replicas: ptr.To[int64](3), deleting: true, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := nodePool(tc.replicas)
			if tc.limitNodes != "" {
				np.Spec.Limits = corev1.ResourceList{"nodes": resource.MustParse(tc.limitNodes)}
			}
			if tc.deleting {
				np.Finalizers = []string{"example.com/hold"}
			}
			create(t, np)
			if tc.deleting {
				if err := env.Client.Delete(t.Context(), np); err != nil {
					t.Fatal(err)
				}
			}
			// A second static NodePool shows that the controller runs, so that the case's own
			// NodePool staying empty means something.
			canary := nodePool(ptr.To[int64](1))
			create(t, canary)

			h := startController(t)
			waitNodeClaims(t, canary.Name, 1)
			ncs := waitNodeClaims(t, np.Name, tc.want)
			for i := range ncs {
				checkTemplateNodeClaim(t, np, &ncs[i])
			}
			if tc.eventReason != "" {
				nct.Eventually(t, 10*time.Second, "nodepool event", hasEvent(np.Name, tc.eventType, tc.eventReason, tc.eventText))
			}
			h.waitCounter(t, "karpenter_nodeclaims_created_total",
				map[string]string{"reason": staticpool.CreatedStatic, "nodepool": np.Name, "min_values_relaxed": "false"}, float64(tc.want))
		})
	}
}

func TestReplacesDeletedNodeClaims(t *testing.T) {
	np := nodePool(ptr.To[int64](2))
	create(t, np)
	startController(t)
	ncs := waitNodeClaims(t, np.Name, 2)
	// As expiration or repair would.
	if err := env.Client.Delete(t.Context(), &ncs[0]); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 10*time.Second, "replacement created", func(ctx context.Context) error {
		now, err := nodeClaimsOf(ctx, np.Name)
		if err != nil {
			return err
		}
		if len(now) != 2 || slices.ContainsFunc(now, func(nc karpv1.NodeClaim) bool { return nc.Name == ncs[0].Name }) {
			return fmt.Errorf("nodeclaims %v, want two without %s", names(now), ncs[0].Name)
		}
		return nil
	})
}

func names(ncs []karpv1.NodeClaim) []string {
	out := make([]string, 0, len(ncs))
	for i := range ncs {
		out = append(out, ncs[i].Name)
	}
	return out
}

// role is how a scale-down test prepares one NodeClaim, as the lifecycle controller, pods and
// disruption would have left it.
type role int

const (
	// notInitialized leaves the NodeClaim as created.
	notInitialized role = iota
	// initialized gives it a Node and Initialized=True.
	initialized
	// withPod is initialized, with one regular pod on its Node.
	withPod
	// withDaemonSetPod is initialized, with only a DaemonSet pod on its Node.
	withDaemonSetPod
	// marked is a candidate of a disruption command (not initialized).
	marked
)

// prepare puts the NodeClaim into the role and waits until the controller's cache shows it.
func prepare(t *testing.T, h *harness, ns string, nc *karpv1.NodeClaim, r role) {
	t.Helper()
	ctx := t.Context()
	switch r {
	case notInitialized:
		return
	case marked:
		stored := nc.DeepCopy()
		nc.Annotations[karpv1.DisruptionCommandAnnotationKey] = "staticdrift-test"
		if err := env.Client.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
			t.Fatal(err)
		}
	default:
		stored := nc.DeepCopy()
		nc.Status.NodeName = nct.Name("node")
		nc.SetCondition(time.Now(), karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
		if err := env.Client.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
			t.Fatal(err)
		}
	}
	wantPods := 0
	switch r {
	case withPod:
		create(t, nct.Pod(ns, nct.Name("app"), nc.Status.NodeName, nil))
		wantPods = 1
	case withDaemonSetPod:
		pod := nct.Pod(ns, nct.Name("ds"), nc.Status.NodeName, nil)
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}
		create(t, pod)
		wantPods = 1
	}
	nct.Eventually(t, 10*time.Second, "cache shows the prepared nodeclaim", func(ctx context.Context) error {
		cached := &karpv1.NodeClaim{}
		if err := h.cache.Get(ctx, client.ObjectKeyFromObject(nc), cached); err != nil {
			return err
		}
		if cached.ResourceVersion != nc.ResourceVersion {
			return fmt.Errorf("cache has %s at %s, want %s", nc.Name, cached.ResourceVersion, nc.ResourceVersion)
		}
		if nc.Status.NodeName == "" {
			return nil
		}
		var pods corev1.PodList
		if err := h.cache.List(ctx, &pods, client.MatchingFields{"spec.nodeName": nc.Status.NodeName}); err != nil {
			return err
		}
		if len(pods.Items) != wantPods {
			return fmt.Errorf("cache has %d pods on %s, want %d", len(pods.Items), nc.Status.NodeName, wantPods)
		}
		return nil
	})
}

func TestScaleDown(t *testing.T) {
	cases := []struct {
		name string
		// roles prepares the NodeClaims, in name order; the NodePool starts with one per role.
		roles []role
		to    int64
		// survivors are the indexes (into roles) of the NodeClaims that must remain.
		survivors []int
	}{
		{
			name:  "not initialized first, then the fewest pods (DaemonSet pods do not count)",
			roles: []role{withPod, notInitialized, withDaemonSetPod}, to: 1, survivors: []int{0},
		},
		{name: "to zero", roles: []role{initialized, notInitialized}, to: 0},
		{
			// The marked NodeClaim is disruption's to replace: it is neither deleted nor counted,
			// so one of the other two goes (had it counted, two would have gone).
			name:  "a disruption candidate is neither deleted nor counted",
			roles: []role{marked, initialized, notInitialized}, to: 1, survivors: []int{0, 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := int64(len(tc.roles))
			np := nodePool(ptr.To(from))
			create(t, np)
			h := startController(t)
			ncs := waitNodeClaims(t, np.Name, len(tc.roles))
			ns := env.Namespace(t)
			for i, r := range tc.roles {
				prepare(t, h, ns, &ncs[i], r)
			}

			stored := np.DeepCopy()
			np.Spec.Replicas = ptr.To(tc.to)
			if err := env.Client.Patch(t.Context(), np, client.MergeFrom(stored)); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, i := range tc.survivors {
				want = append(want, ncs[i].Name)
			}
			survive := func(ctx context.Context) error {
				now, err := nodeClaimsOf(ctx, np.Name)
				if err != nil {
					return err
				}
				if got := names(now); !slices.Equal(got, want) {
					return fmt.Errorf("nodeclaims %v, want %v", got, want)
				}
				return nil
			}
			nct.Eventually(t, 10*time.Second, "surplus deleted", survive)
			nct.Consistently(t, time.Second, "no more deleted or created", survive)

			deleted := len(tc.roles) - len(tc.survivors)
			running := from
			if slices.Contains(tc.roles, marked) {
				running--
			}
			nct.Eventually(t, 10*time.Second, "scaled down event",
				hasEvent(np.Name, corev1.EventTypeNormal, staticpool.ReasonScaledDown, fmt.Sprintf("Scaled static NodePool from %d to %d", running, tc.to)))
			h.waitCounter(t, "karpenter_nodeclaims_disrupted_total",
				map[string]string{"reason": staticpool.DisruptedStaticScaleDown, "nodepool": np.Name}, float64(deleted))
		})
	}
}
