package termination_test

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// env is the control plane the package's tests share: apiserver, controller-manager (PDB status,
// DaemonSets), scheduler (DaemonSet pods) and kwok (Ready nodes, Running pods, pod deletion).
var env *controllertest.Env

func TestMain(m *testing.M) {
	os.Exit(controllertest.Main(m, &env, testbed.Options{Kwok: true, ControllerManager: true, Scheduler: true}))
}
