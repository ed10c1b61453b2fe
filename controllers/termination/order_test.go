package termination_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/termination/terminationtest"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// runningApps waits until pods of each app run on the node.
func runningApps(t *testing.T, ns, node string, apps ...string) {
	t.Helper()
	nct.Eventually(t, 30*time.Second, "pods running", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		var running []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node {
				running = append(running, p.Labels["app"])
			}
		}
		for _, app := range apps {
			if !slices.Contains(running, app) {
				return fmt.Errorf("running %v, want %v", running, apps)
			}
		}
		return nil
	})
}

func TestDrainEvictsInKarpenterOrder(t *testing.T) {
	cloud := fake.New()
	startControllers(t, cloud)
	nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
	node := readyNodeClaim(t, nc)
	ns := env.Namespace(t)
	critical := nct.Pod(ns, "dns", node.Name, map[string]string{"app": "dns"})
	critical.Spec.PriorityClassName = "system-cluster-critical"
	tolerant := nct.Pod(ns, "tolerant", node.Name, map[string]string{"app": "tolerant"})
	tolerant.Spec.Tolerations = append(tolerant.Spec.Tolerations, corev1.Toleration{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists})
	for _, o := range []client.Object{
		// Created in the reverse of the order they must leave in.
		terminationtest.DaemonSet(ns, "proxy", map[string]string{corev1.LabelHostname: node.Name}, "system-node-critical"),
		critical,
		terminationtest.DaemonSet(ns, "agent", map[string]string{corev1.LabelHostname: node.Name}, ""),
		nct.Pod(ns, "app", node.Name, map[string]string{"app": "app"}),
		tolerant,
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	runningApps(t, ns, node.Name, "app", "agent", "dns", "proxy", "tolerant")
	pods := terminationtest.RecordForTest(t, env.Testbed.Config, env.Scheme, &corev1.PodList{}, client.InNamespace(ns))
	if err := env.Client.Delete(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 30*time.Second, "nodeclaim, node and instance gone", func(ctx context.Context) error {
		return terminated(ctx, cloud, nc, node)
	})
	// The Node is gone; only the evictions count, not the pods the garbage collection removes.
	got := pods.Departures(terminationtest.App)
	want := []string{"app", "agent", "dns", "proxy"}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("pods left in the order %v, want %v first", got, want)
	}
	if evs, err := env.Events(t.Context(), "tolerant", "Evicted"); err != nil || len(evs) > 0 {
		t.Errorf("the pod tolerating the disrupted taint was evicted (%v)", err)
	}
}
