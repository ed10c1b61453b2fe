package nodeclaim_test

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/controllers/nodeclaim/nodeclaimtest"
	"github.com/joiner-dev/joiner/testbed"
)

// env is the control plane (apiserver, controller-manager, kwok) the package's tests share.
var env *nodeclaimtest.Env

func TestMain(m *testing.M) {
	os.Exit(nodeclaimtest.Main(m, &env, testbed.Options{Kwok: true, ControllerManager: true}))
}
