// Package lifetime_test checks the node lifetime on a full local cluster: expiry (forceful, and
// graceful within budgets), drift replacing nodes one at a time, NodePool deletion, and static
// NodePools.
package lifetime_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	var err error
	cluster, err = framework.Start(context.Background(),
		testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true},
		operator.Options{
			CloudProvider: local.Factory(local.Options{}),
			Controllers: controllers.Options{
				Provisioning: provisioning.Options{BatchIdle: 500 * time.Millisecond, BatchMaxDuration: 3 * time.Second},
				Disruption:   disruption.Options{PollingPeriod: time.Second, ValidationDelay: 2 * time.Second, CommandTimeout: 2 * time.Minute},
			},
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return framework.Main(m.Run, cluster)
}
