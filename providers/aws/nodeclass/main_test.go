package nodeclass

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// One moto and one control plane serve every test of the package; each test seeds its own AWS
// environment (resources tagged with its own cluster name) and runs its own manager.
var (
	env  *controllertest.Env
	moto *awstest.Moto
)

const testClusterName = "joiner-test"

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
	return controllertest.Main(m, &env, testbed.Options{})
}

// fixture is a running controller with a seeded AWS environment.
type fixture struct {
	aws   *awstest.Env
	ctrl  *Controller
	clock *testingclock.FakeClock
}

// testRetries keep the SDK's retries but make its backoff short.
var testRetries = RetryOptions{MaxAttempts: 3, MaxBackoff: 20 * time.Millisecond}

// newController returns a controller on kube and moto with a fake clock.
func newController(t *testing.T, kube client.Client, opts Options) (*Controller, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	clients := NewClients(moto.Config, testRetries)
	if opts.ClusterName == "" {
		opts.ClusterName = testClusterName
	}
	if opts.Region == "" {
		opts.Region = awstest.Region
	}
	if opts.KubernetesVersion == nil {
		opts.KubernetesVersion = VersionFromDiscovery(discovery.NewDiscoveryClientForConfigOrDie(env.Testbed.Config), nil)
	}
	c, err := NewController(kube, clients.EC2, clients.IAM, clients.SSM, clk, nil, opts)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	return c, clk
}

// start seeds AWS and runs the controller in a manager until the test ends.
func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{aws: moto.Seed(context.Background(), t)}
	env.StartManager(t, func(mgr ctrl.Manager) error {
		f.ctrl, f.clock = newController(t, mgr.GetClient(), opts)
		return f.ctrl.SetupWithManager(mgr)
	})
	return f
}

// createClass creates an EC2NodeClass named after the test and, when the test ends, deletes it
// without waiting for its finalizer.
func createClass(t *testing.T, spec awsv1.EC2NodeClassSpec) *awsv1.EC2NodeClass {
	t.Helper()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: controllertest.Name(className(t))}, Spec: spec}
	if err := env.Client.Create(context.Background(), nc); err != nil {
		t.Fatalf("create EC2NodeClass: %v", err)
	}
	t.Cleanup(func() { forceDelete(t, nc) })
	return nc
}

func className(t *testing.T) string {
	name := strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name())), "-")
	if len(name) > 40 {
		name = strings.Trim(name[len(name)-40:], "-")
	}
	return name
}

func forceDelete(t *testing.T, nc *awsv1.EC2NodeClass) {
	ctx := context.Background()
	_ = env.Client.Patch(ctx, nc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	if err := env.Client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete EC2NodeClass %s: %v", nc.Name, err)
	}
}

// condWant is an expected condition: status, reason, and substrings of the message.
type condWant struct {
	status   metav1.ConditionStatus
	reason   string
	contains []string
}

func ok() condWant { return condWant{status: metav1.ConditionTrue} }

func notOK(reason string, contains ...string) condWant {
	return condWant{status: metav1.ConditionFalse, reason: reason, contains: contains}
}

// waitConditions waits until the class's conditions for its current generation are as wanted
// and returns the class.
func waitConditions(t *testing.T, name string, want map[string]condWant) *awsv1.EC2NodeClass {
	t.Helper()
	nc := &awsv1.EC2NodeClass{}
	controllertest.Eventually(t, 30*time.Second, "EC2NodeClass "+name+" conditions", func(ctx context.Context) error {
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, nc); err != nil {
			return err
		}
		return checkConditions(nc, want)
	})
	return nc
}

func checkConditions(nc *awsv1.EC2NodeClass, want map[string]condWant) error {
	var problems []string
	for typ, w := range want {
		c := meta.FindStatusCondition(nc.Status.Conditions, typ)
		if c == nil {
			problems = append(problems, typ+" missing")
			continue
		}
		if c.ObservedGeneration != nc.Generation {
			problems = append(problems, fmt.Sprintf("%s observed generation %d of %d", typ, c.ObservedGeneration, nc.Generation))
			continue
		}
		if c.Status != w.status || (w.reason != "" && c.Reason != w.reason) {
			problems = append(problems, fmt.Sprintf("%s=%s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, w.status, w.reason))
			continue
		}
		for _, s := range w.contains {
			if !strings.Contains(c.Message, s) {
				problems = append(problems, fmt.Sprintf("%s message %q lacks %q", typ, c.Message, s))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}
