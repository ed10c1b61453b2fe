package podmetrics

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

const metricName = "karpenter_pods_state"

func pod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1",
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "not-the-controller"},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func boundTo(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = node }
}

func running(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func nodeALabels() map[string]string {
	return map[string]string{
		karpv1.NodePoolLabelKey: "general", corev1.LabelTopologyZone: "zone-a", corev1.LabelArchStable: "amd64",
		karpv1.CapacityTypeLabelKey: "spot", corev1.LabelInstanceTypeStable: "m5.large",
	}
}

// step changes the cluster (objects to create or update, pods to delete) and checks the series a
// scrape then gathers.
type step struct {
	apply   []client.Object
	deleted []string
	// want are the series afterwards, each as its sorted labels.
	want []string
}

func TestPodState(t *testing.T) {
	const (
		pendingUnbound       = "arch=,capacity_type=,instance_type=,name=web-1,namespace=default,node=,nodepool=,owner=ReplicaSet/web,phase=Pending,ready=false,zone="
		pendingOnA           = "arch=amd64,capacity_type=spot,instance_type=m5.large,name=web-1,namespace=default,node=a,nodepool=general,owner=ReplicaSet/web,phase=Pending,ready=false,zone=zone-a"
		runningOnA           = "arch=amd64,capacity_type=spot,instance_type=m5.large,name=web-1,namespace=default,node=a,nodepool=general,owner=ReplicaSet/web,phase=Running,ready=true,zone=zone-a"
		runningOnUnknownNode = "arch=,capacity_type=,instance_type=,name=web-1,namespace=default,node=b,nodepool=,owner=ReplicaSet/web,phase=Running,ready=true,zone="
		runningOnB           = "arch=arm64,capacity_type=,instance_type=,name=web-1,namespace=default,node=b,nodepool=,owner=ReplicaSet/web,phase=Running,ready=true,zone="
	)
	cases := []struct {
		name  string
		steps []step
	}{
		{name: "a pending pod has a series without node labels", steps: []step{
			{apply: []client.Object{pod()}, want: []string{pendingUnbound}},
		}},
		{name: "binding and running replace the series", steps: []step{
			{apply: []client.Object{node("a", nodeALabels()), pod()}, want: []string{pendingUnbound}},
			{apply: []client.Object{pod(boundTo("a"))}, want: []string{pendingOnA}},
			{apply: []client.Object{pod(boundTo("a"), running)}, want: []string{runningOnA}},
		}},
		{name: "a deleted pod loses its series", steps: []step{
			{apply: []client.Object{node("a", nodeALabels()), pod(boundTo("a"), running)}, want: []string{runningOnA}},
			{deleted: []string{"web-1"}, want: nil},
		}},
		{name: "a node that appears or changes its labels updates its pods", steps: []step{
			{apply: []client.Object{pod(boundTo("b"), running)}, want: []string{runningOnUnknownNode}},
			{apply: []client.Object{node("b", map[string]string{corev1.LabelArchStable: "arm64"})}, want: []string{runningOnB}},
			{apply: []client.Object{node("b", nodeALabels())},
				want: []string{strings.NewReplacer("node=a", "node=b").Replace(runningOnA)}},
		}},
		{name: "several pods on a node", steps: []step{
			{apply: []client.Object{node("a", nodeALabels()), pod(boundTo("a"), running), pod(boundTo("a"), running, func(p *corev1.Pod) { p.Name = "web-2" })},
				want: []string{runningOnA, strings.Replace(runningOnA, "name=web-1", "name=web-2", 1)}},
			{deleted: []string{"web-1"}, want: []string{strings.Replace(runningOnA, "name=web-1", "name=web-2", 1)}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
			reg := prometheus.NewRegistry()
			c, err := NewController(kube, reg)
			if err != nil {
				t.Fatal(err)
			}
			lead(t, c)
			ctx := t.Context()
			for i, s := range tc.steps {
				for _, obj := range s.apply {
					if err := upsert(ctx, kube, obj); err != nil {
						t.Fatal(err)
					}
				}
				for _, name := range s.deleted {
					if err := kube.Delete(ctx, pod(func(p *corev1.Pod) { p.Name = name })); err != nil {
						t.Fatal(err)
					}
				}
				if got := series(t, reg); !slices.Equal(got, s.want) {
					t.Errorf("step %d: series\n%v\nwant\n%v", i, got, s.want)
				}
			}
		})
	}
}

// TestSeriesOnlyWhileLeading checks that the series are published while the controller runs (leads)
// and not before or after.
func TestSeriesOnlyWhileLeading(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(pod()).Build()
	reg := prometheus.NewRegistry()
	c, err := NewController(kube, reg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		run  func()
		want int
	}{
		{name: "before it leads", run: func() {}, want: 0},
		{name: "while it leads", run: func() { lead(t, c) }, want: 1},
	}
	for _, tt := range tests {
		tt.run()
		if got := len(series(t, reg)); got != tt.want {
			t.Errorf("%s: %d series, want %d", tt.name, got, tt.want)
		}
	}
	// A second controller registered against the same registry (a restarted term) shares the
	// collector; once the first stops leading, the second is the source.
	second, err := NewController(kube, reg)
	if err != nil {
		t.Fatal(err)
	}
	if second.metrics.State != c.metrics.State {
		t.Error("a second controller did not reuse the registered collector")
	}
}

// lead runs the controller until the test ends, and returns once it publishes.
func lead(t *testing.T, c *Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
		c.metrics.State.mu.Lock()
		defer c.metrics.State.mu.Unlock()
		if c.metrics.State.from == c {
			t.Error("the controller is still the source after it stopped")
		}
	})
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		c.metrics.State.mu.Lock()
		defer c.metrics.State.mu.Unlock()
		return c.metrics.State.from == c, nil
	}); err != nil {
		t.Fatalf("the controller did not start publishing: %v", err)
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// upsert creates obj, or updates it (a pod's status included) when it exists.
func upsert(ctx context.Context, kube client.Client, obj client.Object) error {
	existing := obj.DeepCopyObject().(client.Object)
	if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return kube.Create(ctx, obj)
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	desired := obj.DeepCopyObject()
	if err := kube.Update(ctx, obj); err != nil {
		return fmt.Errorf("update %s: %w", obj.GetName(), err)
	}
	if p, ok := obj.(*corev1.Pod); ok {
		p.Status = desired.(*corev1.Pod).Status
		if err := kube.Status().Update(ctx, p); err != nil {
			return fmt.Errorf("update status of %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// series lists the series of karpenter_pods_state with value 1, each as its sorted labels.
func series(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != metricName {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				t.Errorf("series with value %v", m.GetGauge().GetValue())
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, strings.Join(labels, ","))
		}
	}
	slices.Sort(out)
	return out
}
