package podmetrics

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// step changes the cluster (objects to create or update, pods to delete), reconciles what the
// watches would enqueue (the pods changed, the pods the changed Nodes map to) and checks the
// published series.
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			kube := fake.NewClientBuilder().WithScheme(scheme).Build()
			reg := prometheus.NewRegistry()
			c, err := NewController(kube, reg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			for i, s := range tc.steps {
				var reqs []reconcile.Request
				for _, obj := range s.apply {
					if err := upsert(ctx, kube, obj); err != nil {
						t.Fatal(err)
					}
					if _, ok := obj.(*corev1.Node); ok {
						// What the Node watch enqueues.
						reqs = append(reqs, c.podsOnNode(ctx, obj)...)
					} else {
						reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
					}
				}
				for _, name := range s.deleted {
					if err := kube.Delete(ctx, pod(func(p *corev1.Pod) { p.Name = name })); err != nil {
						t.Fatal(err)
					}
					reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}})
				}
				for _, req := range reqs {
					if _, err := c.Reconcile(ctx, req); err != nil {
						t.Fatalf("step %d: reconcile %s: %v", i, req, err)
					}
				}
				if got := series(t, reg); !slices.Equal(got, s.want) {
					t.Errorf("step %d: series\n%v\nwant\n%v", i, got, s.want)
				}
			}
		})
	}
}

func TestSeveralPodsOnANode(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	second := pod(boundTo("a"), func(p *corev1.Pod) { p.Name = "web-2" })
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node("a", nodeALabels()), pod(boundTo("a")), second).Build()
	c, err := NewController(kube, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, name := range []string{"web-1", "web-2"} {
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	mapped := func() []string {
		var names []string
		for _, r := range c.podsOnNode(ctx, node("a", nil)) {
			names = append(names, r.Name)
		}
		slices.Sort(names)
		return names
	}
	if got := mapped(); !slices.Equal(got, []string{"web-1", "web-2"}) {
		t.Errorf("node a maps to %v", got)
	}
	if err := kube.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(second)}); err != nil {
		t.Fatal(err)
	}
	if got := mapped(); !slices.Equal(got, []string{"web-1"}) {
		t.Errorf("after deleting web-2, node a maps to %v", got)
	}
	if got := len(c.podsOnNode(ctx, node("b", nil))); got != 0 {
		t.Errorf("node b maps to %d pods", got)
	}
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
