package nodeclaim_test

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// env is the control plane (apiserver, controller-manager, kwok) the package's tests share.
var env *controllertest.Env

func TestMain(m *testing.M) {
	os.Exit(controllertest.Main(m, &env, testbed.Options{Kwok: true, ControllerManager: true}))
}
