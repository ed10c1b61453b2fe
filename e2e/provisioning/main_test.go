// Package provisioning_test checks the provisioning loop on a full local cluster: kube-scheduler
// marks pods Unschedulable, Joiner launches NodeClaims on the local provider, kwok makes the Nodes
// Ready, kube-scheduler binds the pods, and kwok runs them.
package provisioning_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/nodeclaim"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
)

var (
	cluster  *framework.Cluster
	run      *localrun.Run
	c        client.Client
	failures = &local.Failures{}
)

// registrationTTL is short so that the never-registers case is cleaned up within the test.
const registrationTTL = 20 * time.Second

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	var err error
	cluster, err = framework.Start(context.Background(),
		testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true},
		operator.Options{
			CloudProvider: local.Factory(local.Options{Failures: failures}),
			Controllers: controllers.Options{
				Lifecycle:         nodeclaim.Options{RegistrationTTL: registrationTTL},
				GarbageCollection: garbagecollection.Options{Interval: 5 * time.Second, GracePeriod: 10 * time.Second},
				Provisioning:      provisioning.Options{BatchIdle: 500 * time.Millisecond, BatchMaxDuration: 3 * time.Second},
			},
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	run, c = cluster.Joiner, cluster.Client
	return framework.Main(m.Run, cluster)
}
