// Package expected_test checks the PlanForExpectedPods gate on a full local cluster (one control
// plane with kube-controller-manager at its default client rate, so a ReplicaSet's pods are created
// at about 20 a second): a Deployment scaled to N with its pods arriving slowly lands on about the
// nodes and $/h of the same N pods all pending at once, consolidation keeps the nodes launched for
// the pods still coming, and scaling back down before the pods exist launches nothing more. The
// same scale-up with the gate off is measured and reported beside them.
package expected_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

var (
	cluster *framework.Cluster
	// gateOn is whether the running Joiner has the PlanForExpectedPods gate on.
	gateOn bool
	// logs are the log files of Joiner's restarts, closed when the package's tests end.
	logs []*os.File
)

// options are Joiner's options with the gate on or off: the provisioner's default batching (1 s
// idle, 10 s at most), as in production; consolidation passes every second and removes empty
// nodes at once, so it would remove the nodes launched for the pods still coming if it did not
// count them.
func options(gate bool) operator.Options {
	return operator.Options{
		CloudProvider: local.Factory(local.Options{}),
		Controllers: controllers.Options{
			PlanForExpectedPods: gate,
			Disruption: disruption.Options{PollingPeriod: time.Second, ValidationDelay: 2 * time.Second, CommandTimeout: 2 * time.Minute,
				Planner: planner.Options{Cooldown: -1}},
		},
	}
}

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	var err error
	gateOn = true
	cluster, err = framework.Start(context.Background(), testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true}, options(gateOn))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := framework.Main(m.Run, cluster)
	for _, f := range logs {
		_ = f.Close()
	}
	return code
}

// useGate restarts Joiner with the gate on or off unless it runs so already, logging to a file of
// its own beside the control plane's logs.
func useGate(t *testing.T, on bool) {
	t.Helper()
	if gateOn == on {
		return
	}
	ctx := context.Background()
	if err := cluster.StopJoiner(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(cluster.Env.LogDir, fmt.Sprintf("joiner-%d-gate-%t.log", len(logs)+1, on)))
	if err != nil {
		t.Fatalf("create Joiner's log: %v", err)
	}
	logs = append(logs, f)
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args) }, funcr.Options{Verbosity: 1})
	opts := options(on)
	opts.Registerer, opts.SkipControllerNameValidation = prometheus.NewRegistry(), true
	run, err := localrun.Start(ctx, cluster.Env.Config, localrun.Options{Operator: opts, Log: log})
	if err != nil {
		t.Fatalf("start Joiner with PlanForExpectedPods=%t (logs in %s): %v", on, cluster.Env.LogDir, err)
	}
	cluster.Joiner, gateOn = run, on
}
