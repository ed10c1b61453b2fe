// Package provisioning_test checks the provisioning loop on a full local cluster: kube-scheduler
// marks pods Unschedulable, Joiner launches NodeClaims on the local provider, kwok makes the Nodes
// Ready, kube-scheduler binds the pods, and kwok runs them.
package provisioning_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/cloudprovider/local"
	"github.com/joiner-dev/joiner/controllers/nodeclaim"
	"github.com/joiner-dev/joiner/controllers/nodeclaim/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/testbed"
)

var (
	env      *testbed.Env
	run      *localrun.Run
	c        client.Client
	failures = &local.Failures{}
)

// registrationTTL is short so that the never-registers case is cleaned up within the test.
const registrationTTL = 20 * time.Second

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	ctx := context.Background()
	var err error
	env, err = testbed.Start(ctx, testbed.Options{CRDDirs: []string{"../../config/crd/bases"},
		Scheduler: true, ControllerManager: true, Kwok: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	logFile, err := os.Create(filepath.Join(env.LogDir, "joiner.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logFile.Close()
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(logFile, time.Now().Format(time.RFC3339Nano), prefix, args) }, funcr.Options{Verbosity: 1})
	run, err = localrun.Start(ctx, env.Config, localrun.Options{
		Log: log,
		Operator: operator.Options{
			LocalFailures: failures,
			NodeClaims: nodeclaim.Dependencies{
				Lifecycle:         nodeclaim.Options{RegistrationTTL: registrationTTL},
				GarbageCollection: garbagecollection.Options{Interval: 5 * time.Second, GracePeriod: 10 * time.Second},
			},
			Provisioning: provisioning.Options{BatchIdle: 500 * time.Millisecond, BatchMaxDuration: 3 * time.Second},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start joiner:", err, "(logs in", env.LogDir+")")
		return 1
	}
	defer func() {
		if err := run.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "stop joiner:", err)
		}
	}()
	scheme, err := operator.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "logs of Joiner and the control plane are in", env.LogDir, "(set JOINER_TESTBED_KEEP=1 to keep them)")
	}
	return code
}
