package podevents_test

import (
	"os"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// env is the control plane the package's tests share. It runs the apiserver only: no kubelet
// (kwok) or scheduler moves the tests' pods, so each test sets their state itself, and no garbage
// collector removes pods whose DaemonSet owner does not exist.
var env *controllertest.Env

func TestMain(m *testing.M) {
	os.Exit(controllertest.Main(m, &env, testbed.Options{}))
}
