// Package controllertest is test support for the NodeClaim lifecycle, garbage collection,
// termination and NodePool status controllers: it shares one real control plane (from package
// testbed) among a package's tests, runs a controller manager per test and wipes what the test
// left behind, builds the objects those tests need, and polls for conditions with a deadline.
//
// It is imported by tests only and must never be wired into a binary.
package controllertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/testbed"
)

// Env is a control plane shared by the tests of one package.
type Env struct {
	// Testbed is the running control plane.
	Testbed *testbed.Env
	// Scheme knows the Kubernetes kinds and all of Joiner's kinds.
	Scheme *runtime.Scheme
	// Client is an uncached admin client.
	Client client.Client
}

// Main starts a control plane with Joiner's CRDs and the given components, runs the package's
// tests and stops it. Use it from TestMain: `os.Exit(controllertest.Main(m, &env, opts))`.
func Main(m *testing.M, env **Env, opts testbed.Options) int {
	root, err := RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts.CRDDirs = []string{filepath.Join(root, "config", "crd", "bases")}
	tb, err := testbed.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start test bed:", err)
		return 1
	}
	defer func() {
		if err := tb.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop test bed:", err)
		}
	}()
	scheme, err := apischeme.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := client.New(tb.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "create client:", err)
		return 1
	}
	*env = &Env{Testbed: tb, Scheme: scheme, Client: c}
	return m.Run()
}

// RepoRoot returns the directory of the nearest go.mod above the working directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("find repository root: no go.mod above " + wd)
		}
	}
}

// StartManager creates a controller manager (no metrics or probe servers, no leader election),
// lets setup add controllers to it, starts it and waits for its caches. When the test ends the
// manager stops and everything the controllers manage is wiped: NodeClaims, Nodes, NodePools and
// node classes lose their finalizers and are deleted, and test namespaces go.
func (e *Env) StartManager(t *testing.T, setup func(mgr ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	logger := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	mgr, err := ctrl.NewManager(e.Testbed.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	if err := setup(mgr); err != nil {
		t.Fatalf("set up controllers: %v", err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		e.Wipe(t)
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("manager caches did not sync")
	}
	return mgr
}

// Wipe removes every NodeClaim, Node, NodePool and node class (finalizers first) and every
// namespace made by Namespace, and waits until NodeClaims and Nodes are gone.
func (e *Env) Wipe(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	lists := []client.ObjectList{&karpv1.NodeClaimList{}, &corev1.NodeList{}, &karpv1.NodePoolList{}, &joinerv1alpha1.LocalNodeClassList{}}
	for _, l := range lists {
		if err := e.Client.List(ctx, l); err != nil {
			t.Errorf("wipe: list: %v", err)
			continue
		}
		objs, err := objectsOf(l)
		if err != nil {
			t.Errorf("wipe: %v", err)
			continue
		}
		for _, o := range objs {
			if len(o.GetFinalizers()) > 0 {
				patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
				if err := e.Client.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
					t.Errorf("wipe: remove finalizers of %s: %v", o.GetName(), err)
				}
			}
			if err := e.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Errorf("wipe: delete %s: %v", o.GetName(), err)
			}
		}
	}
	var nss corev1.NamespaceList
	if err := e.Client.List(ctx, &nss, client.HasLabels{namespaceLabel}); err != nil {
		t.Errorf("wipe: list namespaces: %v", err)
	}
	for i := range nss.Items {
		var pods corev1.PodList
		if err := e.Client.List(ctx, &pods, client.InNamespace(nss.Items[i].Name)); err == nil {
			for j := range pods.Items {
				_ = e.Client.Delete(ctx, &pods.Items[j], client.GracePeriodSeconds(0))
			}
		}
		if err := e.Client.Delete(ctx, &nss.Items[i]); client.IgnoreNotFound(err) != nil {
			t.Errorf("wipe: delete namespace %s: %v", nss.Items[i].Name, err)
		}
	}
	Eventually(t, 30*time.Second, "NodeClaims and Nodes are gone after the test", func(ctx context.Context) error {
		var ncs karpv1.NodeClaimList
		var nodes corev1.NodeList
		if err := errors.Join(e.Client.List(ctx, &ncs), e.Client.List(ctx, &nodes)); err != nil {
			return err
		}
		if n := len(ncs.Items) + len(nodes.Items); n > 0 {
			return fmt.Errorf("%d NodeClaims and %d Nodes remain", len(ncs.Items), len(nodes.Items))
		}
		return nil
	})
}

// objectsOf returns the items of l, pointing into l.
func objectsOf(l client.ObjectList) ([]client.Object, error) {
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, fmt.Errorf("items of %T: %w", l, err)
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		o, ok := it.(client.Object)
		if !ok {
			return nil, fmt.Errorf("item %T of %T is not an object", it, l)
		}
		out = append(out, o)
	}
	return out, nil
}

// Eventually calls check every 100ms until it returns nil, and fails the test with check's last
// error when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Consistently calls check every 100ms for the duration and fails the test as soon as it returns
// an error.
func Consistently(t testing.TB, duration time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: stopped being true: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Name returns prefix followed by a random suffix, a valid object name.
func Name(prefix string) string {
	return prefix + "-" + rand.String(6)
}

// namespaceLabel marks namespaces made by Namespace, so that Wipe removes them.
const namespaceLabel = "controllertest.joiner.dev/namespace"

// Namespace creates a fresh namespace for the test's pods.
func (e *Env) Namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Name("test"), Labels: map[string]string{namespaceLabel: "true"}}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// NodeClaim returns a NodeClaim of the NodePool (label karpenter.sh/nodepool) that the fake
// provider's default instance types satisfy: linux on amd64, referring to LocalNodeClass
// "default".
func NodeClaim(name, nodePool string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: nodePool}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}},
				{Key: karpv1.LabelOS, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.OSLinux}},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
			},
			NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"},
		},
	}
}

// KwokNode returns a Node that kwok in the test bed manages (it becomes Ready), with the
// provider ID, a hostname label and the karpenter.sh/unregistered taint a new node carries.
func KwokNode(name, providerID string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{testbed.KwokNodeAnnotation: testbed.KwokNodeAnnotationValue},
			Labels:      map[string]string{corev1.LabelHostname: name},
		},
		Spec: corev1.NodeSpec{ProviderID: providerID, Taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint()}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
}

// Pod returns a pod bound to the node (no scheduler involved), with one container and a
// termination grace period of zero so that kwok removes it at once when it is deleted.
func Pod(namespace, name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Tolerations:                   []corev1.Toleration{{Key: karpv1.UnregisteredTaintKey, Operator: corev1.TolerationOpExists}},
		},
	}
}

// Get reads obj afresh from the API server.
func (e *Env) Get(ctx context.Context, obj client.Object) error {
	return e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}

// Gone returns nil once obj no longer exists.
func (e *Env) Gone(ctx context.Context, obj client.Object) error {
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still exists", obj.GetName())
}

// Condition returns an error unless the NodeClaim's condition has the status (and, when reason is
// not empty, the reason).
func Condition(nc *karpv1.NodeClaim, conditionType string, status metav1.ConditionStatus, reason string) error {
	c := nc.StatusCondition(conditionType)
	if c == nil {
		return fmt.Errorf("nodeclaim %s has no %s condition (conditions %v)", nc.Name, conditionType, nc.Status.Conditions)
	}
	if c.Status != status || (reason != "" && c.Reason != reason) {
		return fmt.Errorf("nodeclaim %s condition %s is %s/%s (%s), want %s/%s", nc.Name, conditionType, c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}

// Events returns the events.k8s.io Events about the object named regarding (in any namespace)
// with the reason.
func (e *Env) Events(ctx context.Context, regarding, reason string) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := e.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Name == regarding && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out, nil
}

// HasEvent returns nil once an event about regarding with the reason exists whose note contains
// text.
func (e *Env) HasEvent(ctx context.Context, regarding, reason, text string) error {
	evs, err := e.Events(ctx, regarding, reason)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if strings.Contains(ev.Note, text) {
			return nil
		}
	}
	return fmt.Errorf("no %s event about %s containing %q (found %d with that reason)", reason, regarding, text, len(evs))
}
