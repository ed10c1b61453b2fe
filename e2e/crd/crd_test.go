package crd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/joiner-dev/joiner/e2e/crd"
	"github.com/joiner-dev/joiner/testbed"
)

var (
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	env    *testbed.Env
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = testbed.Start(context.Background(), testbed.Options{CRDDirs: []string{"../../config/crd/bases"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	dyn = dynamic.NewForConfigOrDie(env.Config)
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return m.Run()
}

func resource(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("no resource for %s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	return dyn.Resource(m.Resource)
}

// TestCases runs every YAML case under testdata against the real apiserver.
func TestCases(t *testing.T) {
	cases, err := crd.LoadCases("testdata")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	t.Cleanup(func() {
		t.Logf("cases: %d accepted, %d rejected, %d defaulted, %d updates", counts[crd.Accept], counts[crd.Reject], counts[crd.Default], counts[crd.Update])
	})
	for _, c := range cases {
		counts[c.Kind]++
		name := strings.TrimSuffix(strings.TrimPrefix(c.Path, "testdata/"), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			switch c.Kind {
			case crd.Accept:
				testAccept(ctx, t, c)
			case crd.Reject:
				testReject(ctx, t, c)
			case crd.Default:
				testDefault(ctx, t, c)
			case crd.Update:
				testUpdate(ctx, t, c)
			}
		})
	}
	for _, k := range []string{crd.Accept, crd.Reject, crd.Default, crd.Update} {
		if counts[k] == 0 {
			t.Errorf("no %s cases found under testdata", k)
		}
	}
}

// apply writes obj with server-side apply, as GitOps tools do, and deletes it when t ends.
func apply(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	body, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	ri := resource(t, obj)
	got, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "joiner-crd-test", Force: ptrTrue()})
	if err == nil {
		deleteOnCleanup(t, ri, obj.GetName())
	}
	return got, err
}

// create creates obj, as `kubectl create` and client-side `kubectl apply` do, and deletes it when t ends.
func create(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	ri := resource(t, obj)
	got, err := ri.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{})
	if err == nil {
		deleteOnCleanup(t, ri, obj.GetName())
	}
	return got, err
}

func deleteOnCleanup(t *testing.T, ri dynamic.ResourceInterface, name string) {
	t.Cleanup(func() {
		if err := ri.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", name, err)
		}
	})
}

func ptrTrue() *bool { b := true; return &b }

func testAccept(ctx context.Context, t *testing.T, c crd.Case) {
	obj := c.Objects[0]
	got, err := apply(ctx, t, obj)
	if err != nil {
		t.Fatalf("a valid %s was rejected: %v", obj.GetKind(), err)
	}
	// Round trip: every field the user wrote reads back exactly as written.
	read, err := resource(t, obj).Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"spec"} {
		if diff := crd.Missing(obj.Object[field], read.Object[field], field); len(diff) > 0 {
			t.Errorf("read back differs from the manifest (GitOps tools would see drift):\n%s", strings.Join(diff, "\n"))
		}
	}
	// Applying the same manifest again is a no-op: no new resourceVersion, so no drift loop.
	again, err := apply(ctx, t, obj)
	if err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	if again.GetResourceVersion() != got.GetResourceVersion() {
		t.Errorf("re-applying the same manifest changed the object (resourceVersion %s -> %s)", got.GetResourceVersion(), again.GetResourceVersion())
	}
}

func testReject(ctx context.Context, t *testing.T, c crd.Case) {
	_, err := create(ctx, t, c.Objects[0])
	if err == nil {
		t.Fatalf("an invalid object was accepted; want an error containing %q", c.Wants)
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("want an Invalid error, got %v (%T)", err, err)
	}
	for _, w := range c.Wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

func testDefault(ctx context.Context, t *testing.T, c crd.Case) {
	got, err := create(ctx, t, c.Objects[0])
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, e := range c.Expects {
		v, err := crd.Lookup(got.Object, e.Path)
		if err != nil {
			t.Errorf("default %s: %v", e.Path, err)
			continue
		}
		if diff := crd.Missing(e.Value, v, e.Path); len(diff) > 0 {
			t.Errorf("default not applied: %s", strings.Join(diff, "; "))
		}
		// And the exact value, not only a superset of it.
		wj, _ := json.Marshal(e.Value)
		gj, _ := json.Marshal(v)
		if string(wj) != string(gj) {
			t.Errorf("default %s: want %s, got %s", e.Path, wj, gj)
		}
	}
}

func testUpdate(ctx context.Context, t *testing.T, c crd.Case) {
	orig, upd := c.Objects[0], c.Objects[1].DeepCopy()
	created, err := create(ctx, t, orig)
	if err != nil {
		t.Fatalf("create the original: %v", err)
	}
	// A full replacement (PUT), as `kubectl replace` and client-side apply of a changed manifest send it.
	upd.SetResourceVersion(created.GetResourceVersion())
	_, err = resource(t, upd).Update(ctx, upd, metav1.UpdateOptions{})
	if len(c.Wants) == 0 {
		if err != nil {
			t.Fatalf("a valid update was rejected: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("an invalid update was accepted; want an error containing %q", c.Wants)
	}
	for _, w := range c.Wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// TestKubectlApply checks what a user sees with the real kubectl: Karpenter's docs NodePool is
// accepted, and a requirement with operator In and no values is refused with upstream's message.
func TestKubectlApply(t *testing.T) {
	kubectl := kubectlBinary(t)
	good := filepath.Join("testdata", "nodepool", "accept", "default.yaml")
	out, err := runKubectl(kubectl, "apply", "-f", good)
	if err != nil {
		t.Fatalf("kubectl apply of the docs NodePool failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "created") && !strings.Contains(out, "configured") {
		t.Errorf("kubectl apply said %q, want created", out)
	}
	t.Cleanup(func() { _, _ = runKubectl(kubectl, "delete", "-f", good) })

	bad := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: kubectl-in-without-values
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
`
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runKubectl(kubectl, "apply", "-f", f)
	if err == nil {
		t.Fatalf("kubectl apply of a requirement with In and no values succeeded:\n%s", out)
	}
	if !strings.Contains(out, "requirements with operator 'In' must have a value defined") {
		t.Errorf("kubectl output lacks upstream's message:\n%s", out)
	}
}
