package disruption

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// env is the control plane the package's tests share (apiserver only: nothing but the test moves
// a pod, a Node or a NodeClaim, so each pass sees exactly what the test made).
var env *controllertest.Env

func TestMain(m *testing.M) {
	os.Exit(controllertest.Main(m, &env, testbed.Options{}))
}
