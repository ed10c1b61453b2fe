// Package repair_test checks node repair on a full local cluster with the NodeRepair gate on: a
// Node the local provider fails on purpose is replaced once its (shortened) toleration ends,
// through a drain and regardless of budgets, and nothing is repaired while more than 20% of a
// NodePool's nodes are unhealthy.
package repair_test

import (
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/noderepair"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
)

// toleration replaces the providers' 30 minutes, so that a repair takes seconds.
const toleration = 20 * time.Second

var (
	cluster *framework.Cluster
	// metrics is the registry Joiner's metrics go to.
	metrics = prometheus.NewRegistry()
)

func TestMain(m *testing.M) {
	os.Exit(framework.MainLocal(m, &cluster, operator.Options{
		Registerer: metrics,
		Controllers: controllers.Options{
			NodeRepair:   true,
			Repair:       noderepair.Options{Toleration: toleration},
			Provisioning: framework.QuickProvisioning(),
			Disruption:   framework.QuickDisruption(),
		},
	}))
}
