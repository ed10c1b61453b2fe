//go:build idlemeasure

// Package idle_test measures how quiet Joiner is when nothing changes: a Deployment of many pods
// on many kwok Nodes, once Running and settled, is left alone for a window during which every
// Node sends one status heartbeat (kwok and the kubelet update status.conditions[].lastHeartbeatTime
// every few minutes; the window compresses that). It reports the reconciles of every controller
// (controller_runtime_reconcile_total), the disruption passes by result and the CPU time of the
// process over the window, and fails when a heartbeat wakes the NodeClaim lifecycle controller.
//
// It is a measurement, not part of `make test` (build tag idlemeasure):
//
//	JOINER_TESTBED_ASSETS=$PWD/.cache/testbed/current go test -tags idlemeasure -count=1 -v -timeout 30m ./e2e/idle/
//
// JOINER_IDLE_PODS (default 1000) and JOINER_IDLE_WINDOW (default 2m) size it.
package idle_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	var err error
	cluster, err = framework.Start(context.Background(),
		testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true, ClientQPS: 200, ClientBurst: 400},
		operator.Options{
			CloudProvider: local.Factory(local.Options{}),
			Controllers: controllers.Options{
				Provisioning: provisioning.Options{BatchIdle: time.Second, BatchMaxDuration: 10 * time.Second},
			},
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(framework.Main(m.Run, cluster))
}

// envInt returns the integer environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func TestIdle(t *testing.T) {
	pods := envInt(t, "JOINER_IDLE_PODS", 1000)
	window := 2 * time.Minute
	if v := os.Getenv("JOINER_IDLE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("JOINER_IDLE_WINDOW=%q: want a positive duration", v)
		}
		window = d
	}
	// 2-vCPU nodes and 150m pods: about a dozen pods a node, so 1,000 pods make ~90 Nodes.
	cluster.NodePool(t, "idle", framework.OnDemandC("2"), nil)
	start := time.Now()
	cluster.Deployment(t, "idle", "idle", int32(pods), "150m", nil)
	cluster.WaitRunning(t, "idle", pods, 15*time.Minute)
	t.Logf("%d pods Running after %s", pods, time.Since(start).Round(time.Second))
	nodes := settle(t)
	t.Logf("settled on %d Nodes after %s", len(nodes), time.Since(start).Round(time.Second))

	before, cpuBefore := reconciles(t), cpuTime()
	heartbeats := heartbeat(t, nodes, window)
	after, cpuAfter := reconciles(t), cpuTime()

	names := make([]string, 0, len(after))
	for name := range after {
		names = append(names, name)
	}
	sort.Strings(names)
	t.Logf("over %s idle with %d pods on %d Nodes (%d Node heartbeats):", window, pods, len(nodes), heartbeats)
	for _, name := range names {
		if d := after[name] - before[name]; d > 0 {
			t.Logf("  %-40s %6.0f reconciles", name, d)
		}
	}
	used := cpuAfter - cpuBefore
	t.Logf("  process CPU %s = %.2f %% of a core", used.Round(time.Millisecond), 100*used.Seconds()/window.Seconds())
	if d := after["nodeclaim.lifecycle"] - before["nodeclaim.lifecycle"]; d >= float64(heartbeats) {
		t.Errorf("nodeclaim.lifecycle reconciled %v times for %d heartbeats: heartbeats wake it", d, heartbeats)
	}
}

// settle waits until every NodeClaim of the NodePool is Initialized, none is being deleted or
// disrupted, and their count held for 30 s; it returns the Nodes' names.
func settle(t *testing.T) []string {
	var names []string
	stableSince, last := time.Time{}, -1
	framework.Eventually(t, 10*time.Minute, "NodeClaims settled", func(ctx context.Context) (bool, error) {
		claims := cluster.NodeClaims(t, "idle")
		names = names[:0]
		for _, nc := range claims {
			if nc.DeletionTimestamp != nil || nc.Annotations[karpv1.DisruptionCommandAnnotationKey] != "" ||
				!meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
				last = -1
				return false, nil
			}
			names = append(names, nc.Status.NodeName)
		}
		if len(claims) != last {
			last, stableSince = len(claims), time.Now()
			return false, nil
		}
		return time.Since(stableSince) >= 30*time.Second, nil
	})
	return names
}

// heartbeat spreads one status heartbeat of every Node over the window, as kwok's heartbeat stage
// writes it (every condition's lastHeartbeatTime set to now), and returns how many it sent.
func heartbeat(t *testing.T, nodes []string, window time.Duration) int {
	ctx := context.Background()
	tick := time.NewTicker(window / time.Duration(len(nodes)+1))
	defer tick.Stop()
	end := time.After(window)
	sent := 0
	for _, name := range nodes {
		<-tick.C
		node := &corev1.Node{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			t.Fatalf("get Node %s: %v", name, err)
		}
		orig := node.DeepCopy()
		now := metav1.Now()
		for i := range node.Status.Conditions {
			node.Status.Conditions[i].LastHeartbeatTime = now
		}
		if err := cluster.Client.Status().Patch(ctx, node, client.MergeFrom(orig)); err != nil {
			t.Fatalf("heartbeat Node %s: %v", name, err)
		}
		sent++
	}
	<-end
	return sent
}

// reconciles returns controller_runtime_reconcile_total by controller, summed over results.
func reconciles(t *testing.T) map[string]float64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// cpuTime returns the user and system CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
