package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

// LocalBed is the test bed of a full local cluster: the API server with the scheduler,
// kube-controller-manager and kwok, which runs the local provider's Nodes.
func LocalBed() testbed.Options {
	return testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true}
}

// QuickProvisioning batches pending pods for half a second, three seconds at the most, so that a
// test's pods get their nodes quickly.
func QuickProvisioning() provisioning.Options {
	return provisioning.Options{BatchIdle: 500 * time.Millisecond, BatchMaxDuration: 3 * time.Second}
}

// QuickDisruption looks for disruptions every second, validates a command after two seconds and
// gives it two minutes to finish.
func QuickDisruption() disruption.Options {
	return disruption.Options{PollingPeriod: time.Second, ValidationDelay: 2 * time.Second, CommandTimeout: 2 * time.Minute}
}

// MainLocal is the TestMain of an e2e package on a full local cluster: it starts LocalBed with
// Joiner on it, run with opts (a nil CloudProvider means the local provider with its default
// options), sets *c to it, runs the package's tests (Main) and returns the exit code.
func MainLocal(m *testing.M, c **Cluster, opts operator.Options) int {
	if opts.CloudProvider == nil {
		opts.CloudProvider = local.Factory(local.Options{})
	}
	var err error
	if *c, err = Start(context.Background(), LocalBed(), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return Main(m.Run, *c)
}
