package interruption_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// One moto (with one seeded account) and one control plane serve the instance-status tests; each
// test launches its own instances and runs its own manager. The queue test starts its own moto.
var (
	env     *controllertest.Env
	moto    *awstest.Moto
	account *awstest.Env
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if moto, err = awstest.New(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "awstest:", err)
		return 1
	}
	defer func() {
		if err := moto.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "awstest:", err)
		}
	}()
	if account, err = moto.SeedCluster(context.Background(), "instance-health"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return controllertest.Main(m, &env, testbed.Options{})
}
