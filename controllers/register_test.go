package controllers_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/testbed"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

var env *nct.Env

func TestMain(m *testing.M) { os.Exit(nct.Main(m, &env, testbed.Options{})) }

// TestRegisterOptionalControllers: the options that turn controllers off (Karpenter's
// StaticCapacity gate and disableClusterStateObservability setting) leave exactly those
// controllers out: a static NodePool gets its NodeClaim only with static capacity on, and a pod
// gets its karpenter_pods_state series only with cluster-state observability on.
func TestRegisterOptionalControllers(t *testing.T) {
	tests := []struct {
		name                      string
		opts                      controllers.Options
		wantStatic, wantPodSeries bool
	}{
		{name: "defaults: both on", wantStatic: true, wantPodSeries: true},
		{name: "static capacity off", opts: controllers.Options{DisableStaticCapacity: true}, wantPodSeries: true},
		{name: "cluster-state observability off", opts: controllers.Options{DisableClusterStateObservability: true}, wantStatic: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			env.StartManager(t, func(mgr ctrl.Manager) error {
				return controllers.Register(mgr, controllers.Dependencies{
					CloudProvider: fake.New(), Engine: policy.New(policy.Options{}), Registerer: reg, Options: tt.opts,
				})
			})
			ctx := t.Context()
			np := &karpv1.NodePool{}
			np.Name = nct.Name("static")
			np.Spec.Replicas = ptr.To[int64](1)
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"}
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}},
			}
			if err := env.Client.Create(ctx, np); err != nil {
				t.Fatal(err)
			}
			pod := nct.Pod(env.Namespace(t), "web", "", nil)
			if err := env.Client.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			staticClaims := func(want int) func(context.Context) error {
				return func(ctx context.Context) error {
					var list karpv1.NodeClaimList
					if err := env.Client.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
						return err
					}
					if len(list.Items) != want {
						return fmt.Errorf("static NodePool %s has %d NodeClaims, want %d", np.Name, len(list.Items), want)
					}
					return nil
				}
			}
			podSeries := func(want float64) func(context.Context) error {
				return func(context.Context) error {
					if got := metricstest.Sum(t, reg, "karpenter_pods_state", map[string]string{"name": pod.Name, "namespace": pod.Namespace}); got != want {
						return fmt.Errorf("karpenter_pods_state of pod %s is %v, want %v", pod.Name, got, want)
					}
					return nil
				}
			}
			// What is on is seen first, so that what is off has had the same time to show.
			if tt.wantStatic {
				// The NodePool must turn Ready (its node class resolved) before the static
				// controller scales it up; on a loaded machine that took over 10 s. A minute
				// also covers the controller's resync period.
				nct.Eventually(t, time.Minute, "static NodeClaim", staticClaims(1))
			}
			if tt.wantPodSeries {
				nct.Eventually(t, 10*time.Second, "pod series", podSeries(1))
			}
			if !tt.wantStatic {
				nct.Consistently(t, 3*time.Second, "no static NodeClaim", staticClaims(0))
			}
			if !tt.wantPodSeries {
				nct.Consistently(t, 3*time.Second, "no pod series", podSeries(0))
			}
		})
	}
}
