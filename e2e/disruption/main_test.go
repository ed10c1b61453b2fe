// Package disruption_test checks voluntary disruption on a full local cluster: nodes left empty
// are removed, underutilized nodes are repacked, budgets and do-not-disrupt hold, and a restart in
// the middle of a replace leaves nothing behind.
package disruption_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

var cluster *framework.Cluster

// Short delays keep the tests quick; the logic they exercise is the same as with the defaults.
const (
	validationDelay = 2 * time.Second
	pollingPeriod   = time.Second
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	var err error
	cluster, err = framework.Start(context.Background(),
		testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true},
		operator.Options{
			CloudProvider: local.Factory(local.Options{}),
			Controllers: controllers.Options{
				Provisioning: provisioning.Options{BatchIdle: 500 * time.Millisecond, BatchMaxDuration: 3 * time.Second},
				Disruption: disruption.Options{
					PollingPeriod: pollingPeriod, ValidationDelay: validationDelay, CommandTimeout: 2 * time.Minute,
					Planner: planner.Options{Cooldown: -1},
				},
			},
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return framework.Main(m.Run, cluster)
}
