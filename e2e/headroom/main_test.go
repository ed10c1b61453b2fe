// Package headroom_test checks CapacityBuffers (the CapacityBuffer feature gate) on a full local
// cluster: a buffer keeps a node's worth of room free, consolidation leaves that room alone, a new
// pod of the buffer's shape starts on it without waiting for a launch, and the buffer refills.
package headroom_test

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	// Consolidation runs often and at once, so that it would have removed the buffer's empty node
	// within the test if it did not count its room as used.
	dis := framework.QuickDisruption()
	dis.Planner = planner.Options{Cooldown: -1}
	os.Exit(framework.MainLocal(m, &cluster, operator.Options{
		Controllers: controllers.Options{CapacityBuffer: true, Provisioning: framework.QuickProvisioning(), Disruption: dis},
	}))
}
