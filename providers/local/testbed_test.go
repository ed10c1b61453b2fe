package local

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/testbed"
)

// One control plane (etcd, kube-apiserver and kwok) serves every test of the package that needs
// one; it starts with the first such test and stops after the last.
var shared struct {
	once sync.Once
	env  *testbed.Env
	kube client.Client
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop test bed:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testClient starts the shared control plane if needed and returns a client to it that reads
// straight from the API server.
func testClient(t *testing.T) client.Client {
	t.Helper()
	shared.once.Do(func() {
		shared.env, shared.err = testbed.Start(context.Background(), testbed.Options{
			CRDDirs: []string{"../../config/crd/bases"},
			Kwok:    true,
		})
		if shared.err != nil {
			return
		}
		scheme, err := apischeme.New()
		if err != nil {
			shared.err = err
			return
		}
		cfg := rest.CopyConfig(shared.env.Config)
		cfg.QPS, cfg.Burst = 1000, 2000 // client-go's default of 5 per second would pace the tests
		shared.kube, shared.err = client.New(cfg, client.Options{Scheme: scheme})
	})
	if shared.err != nil {
		t.Fatalf("start the test bed: %v", shared.err)
	}
	return shared.kube
}

var nameSeq atomic.Int64

// uniqueName returns a DNS-1123 name derived from the test's name.
func uniqueName(t *testing.T) string {
	base := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = base[:40]
	}
	return fmt.Sprintf("%s-%d", strings.Trim(base, "-"), nameSeq.Add(1))
}

// fixture is a provider with its own LocalNodeClass, stopped (and its Nodes deleted) when the
// test ends.
type fixture struct {
	kube   client.Client
	p      *Provider
	class  string
	cancel context.CancelFunc
}

func newFixture(t *testing.T, spec joinerv1alpha1.LocalNodeClassSpec, clk clock.Clock) *fixture {
	t.Helper()
	kube := testClient(t)
	nc := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t)}, Spec: spec}
	if err := kube.Create(context.Background(), nc); err != nil {
		t.Fatalf("create LocalNodeClass: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(ctx, kube, Options{Clock: clk, Log: testr.New(t)})
	if err != nil {
		cancel()
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		p.Wait()
		bg := context.Background()
		if err := kube.DeleteAllOf(bg, &corev1.Node{}); err != nil {
			t.Errorf("delete nodes: %v", err)
		}
		if err := kube.Delete(bg, nc); err != nil {
			t.Errorf("delete LocalNodeClass: %v", err)
		}
	})
	return &fixture{kube: kube, p: p, class: nc.Name, cancel: cancel}
}

// nodeClaim returns a NodeClaim of the fixture's class in NodePool "default" with the
// requirements (key, operator, values...) and requests.
func (f *fixture) nodeClaim(name string, requests corev1.ResourceList, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: reqs,
			Resources:    karpv1.ResourceRequirements{Requests: requests},
			NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: NodeClassKind, Name: f.class},
		},
	}
}

func (f *fixture) nodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: NodeClassKind, Name: f.class}
	return np
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// eventually polls cond every 50ms until it holds, failing the test with its last message after
// timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true after %s: %s", timeout, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// registrationGoroutines counts the goroutines waiting to register a Node, of every provider.
func registrationGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "local.(*Provider).register(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
