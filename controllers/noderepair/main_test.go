package noderepair_test

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// env is the control plane the package's tests share (apiserver only: no kubelet or
// kube-controller-manager changes the Node conditions the tests set, and no termination
// controller runs, so a deleted NodeClaim keeps the test's finalizer and stays to be looked at).
var env *controllertest.Env

func TestMain(m *testing.M) {
	os.Exit(controllertest.Main(m, &env, testbed.Options{}))
}
