package webhooks_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"

	"github.com/joiner-dev/joiner/admissioncheck"
	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/e2e/crd"
	"github.com/joiner-dev/joiner/policy/offline"
)

// replayExceptions are the cases whose verdicts may differ between the cluster and joiner check, with
// the reason. The test fails when a listed case agrees after all, so the list never goes stale.
var replayExceptions = map[string]string{}

// verdict is what one side said about a case: admitted or not, the apiserver's message, the warnings,
// and the object as stored.
type verdict struct {
	allowed  bool
	message  string
	warnings []string
	object   map[string]any
}

// A platform team checking manifests in CI with `joiner check` gets the verdict the cluster would give,
// word for word: every case of e2e/crd (CRD schema, CEL, defaults, update rules) and every webhook case
// of this package (semantic checks, catalog, policies) is sent to the apiserver, with Joiner's webhooks
// running, and to joiner check, and both must admit the same objects, refuse the same objects with the
// same message, and warn the same way.
func TestCheckReplaysAdmission(t *testing.T) {
	r := newReplayer(t)
	var matched, total, refused int
	compare := func(t *testing.T, name string, cluster, check verdict, expects []crd.Expect) {
		t.Helper()
		total++
		if !cluster.allowed {
			refused++
		}
		diffs := verdictDiffs(cluster, check, expects)
		reason, excepted := replayExceptions[name]
		switch {
		case len(diffs) == 0 && excepted:
			t.Errorf("%s is listed as an exception (%s) but now agrees; remove it from replayExceptions", name, reason)
		case len(diffs) == 0:
			matched++
		case excepted:
			t.Logf("%s differs, as listed (%s):\n%s", name, reason, strings.Join(diffs, "\n"))
		default:
			t.Errorf("the cluster and joiner check disagree on %s:\n%s", name, strings.Join(diffs, "\n"))
		}
	}
	t.Cleanup(func() {
		t.Logf("replayed %d cases (the cluster refused %d): %d matched, %d listed exceptions", total, refused, matched, len(replayExceptions))
	})

	t.Run("crd cases without policies", func(t *testing.T) {
		r.removePolicies(t)
		checker := r.checker(t, nil)
		cases, err := crd.LoadCases(filepath.Join("..", "crd", "testdata"))
		if err != nil {
			t.Fatal(err)
		}
		if len(cases) == 0 {
			t.Fatal("no cases under ../crd/testdata")
		}
		for _, c := range cases {
			name := strings.TrimSuffix(strings.TrimPrefix(c.Path, filepath.Join("..", "crd", "testdata")+"/"), ".yaml")
			cluster, check := r.replayCase(t, checker, c.Objects, nil)
			compare(t, "crd/"+name, cluster, check, c.Expects)
			if c.CRD == "provisioningpolicy" {
				// An admitted policy is enforced until its deletion reaches the engine.
				r.removePolicies(t)
			}
		}
	})

	t.Run("webhook cases with the test policies", func(t *testing.T) {
		installPolicies(t)
		checker := r.checker(t, loadPolicies(t, "testdata/policies"))
		objects, err := offline.LoadObjects([]string{"testdata/manifests", "testdata/replay"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// What the cluster holds that the manifests refer to: the LocalNodeClass installPolicies created.
		held := []admissioncheck.Item{{Source: "held", Object: map[string]any{
			"apiVersion": "joiner.dev/v1alpha1", "kind": "LocalNodeClass", "metadata": map[string]any{"name": "default"}}}}
		for _, o := range objects {
			u := &unstructured.Unstructured{Object: o.Content}
			cluster, check := r.replayCase(t, checker, []*unstructured.Unstructured{u}, held)
			compare(t, "webhooks/"+o.Source, cluster, check, nil)
		}
	})
}

// replayer sends cases to the cluster, recording the warnings of each request.
type replayer struct {
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	warnings *warningRecorder
}

func newReplayer(t *testing.T) *replayer {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	w := &warningRecorder{}
	cfg.WarningHandler = w
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &replayer{
		dyn:      dynamic.NewForConfigOrDie(cfg),
		mapper:   restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		warnings: w,
	}
}

// checker returns a joiner check with the given policies and kubectl's strict field validation, the
// field validation the replayed requests use.
func (r *replayer) checker(t *testing.T, policies []offline.LoadedPolicy) *admissioncheck.Checker {
	t.Helper()
	c, err := admissioncheck.New(context.Background(), admissioncheck.Options{Policies: offline.Policies(policies)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func loadPolicies(t *testing.T, dir string) []offline.LoadedPolicy {
	t.Helper()
	p, err := offline.LoadPolicies(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// removePolicies deletes every ProvisioningPolicy and waits until Joiner's engine has none.
func (r *replayer) removePolicies(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := c.DeleteAllOf(ctx, &joinerv1alpha1.ProvisioningPolicy{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete the ProvisioningPolicies: %v", err)
	}
	waitFor(t, 30*time.Second, "Joiner's engine to drop every policy", func(context.Context) (bool, error) {
		return len(cluster.Joiner.Operator.Engine.PolicyNames()) == 0, nil
	})
}

// replayCase creates objects[0] (and, for an update case, updates it to objects[1]) in the cluster and
// with joiner check, and returns both verdicts on the last request. held are the objects of the cluster
// the case refers to, which joiner check is given alongside. The object is deleted afterwards.
func (r *replayer) replayCase(t *testing.T, checker *admissioncheck.Checker, objects []*unstructured.Unstructured, held []admissioncheck.Item) (cluster, check verdict) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	orig := objects[0]
	cluster = r.create(ctx, t, orig)
	if cluster.allowed {
		defer r.delete(t, orig)
	}
	check = r.check(ctx, t, checker, admissioncheck.Item{Source: "case", Object: orig.Object}, held)
	if len(objects) == 1 || !cluster.allowed || !check.allowed {
		return cluster, check
	}
	upd := objects[1]
	cluster = r.update(ctx, t, upd)
	check = r.check(ctx, t, checker, admissioncheck.Item{Source: "case", Object: upd.Object, Old: orig.Object}, held)
	return cluster, check
}

func (r *replayer) resource(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("no resource for %s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	return r.dyn.Resource(m.Resource)
}

// create sends obj as `kubectl create` does (strict field validation).
func (r *replayer) create(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) verdict {
	t.Helper()
	ri := r.resource(t, obj)
	r.warnings.reset()
	got, err := ri.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	v := verdict{allowed: err == nil, warnings: r.warnings.take()}
	if err != nil {
		v.message = err.Error()
		return v
	}
	v.object = got.Object
	return v
}

// delete removes a case's object, so the next case meets the cluster as it was.
func (r *replayer) delete(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if err := r.resource(t, obj).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s: %v", obj.GetName(), err)
	}
}

// update replaces the object with upd, as `kubectl replace` does with the live resourceVersion. Joiner's
// controllers may write the object in between (a finalizer, its status): a conflict is retried on the
// new resourceVersion, as kubectl apply would.
func (r *replayer) update(ctx context.Context, t *testing.T, upd *unstructured.Unstructured) verdict {
	t.Helper()
	ri := r.resource(t, upd)
	var v verdict
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := ri.Get(ctx, upd.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("read %s back: %v", upd.GetName(), err)
		}
		u := upd.DeepCopy()
		u.SetResourceVersion(live.GetResourceVersion())
		r.warnings.reset()
		got, err := ri.Update(ctx, u, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
		v = verdict{allowed: err == nil, warnings: r.warnings.take()}
		if err == nil {
			v.object = got.Object
		}
		return err
	})
	if err != nil {
		v.message = err.Error()
	}
	return v
}

// check runs joiner check on one item, with the held objects beside it.
func (r *replayer) check(ctx context.Context, t *testing.T, checker *admissioncheck.Checker, it admissioncheck.Item, held []admissioncheck.Item) verdict {
	t.Helper()
	rep, err := checker.Check(ctx, append([]admissioncheck.Item{it}, held...))
	if err != nil {
		t.Fatalf("joiner check: %v", err)
	}
	res := rep.Objects[0]
	v := verdict{allowed: res.Allowed, message: res.Error, object: res.Object}
	for _, p := range res.Problems {
		if p.Action == admissioncheck.ActionWarn {
			v.warnings = append(v.warnings, p.Message)
		}
	}
	return v
}

// verdictDiffs lists how two verdicts differ: admission, message, warnings (as sets: the apiserver
// drops repeated warnings) and, for defaulting cases, the expected fields of the stored object.
func verdictDiffs(cluster, check verdict, expects []crd.Expect) []string {
	var diffs []string
	if cluster.allowed != check.allowed {
		diffs = append(diffs, "  cluster allowed="+boolWord(cluster.allowed)+", joiner check allowed="+boolWord(check.allowed))
	}
	if cluster.message != check.message {
		diffs = append(diffs, "  cluster says:      "+cluster.message, "  joiner check says: "+check.message)
	}
	if cw, jw := warningSet(cluster.warnings), warningSet(check.warnings); !slices.Equal(cw, jw) {
		diffs = append(diffs, "  cluster warns:      "+strings.Join(cw, " | "), "  joiner check warns: "+strings.Join(jw, " | "))
	}
	if cluster.allowed && check.allowed {
		for _, e := range expects {
			cv, cerr := crd.Lookup(cluster.object, e.Path)
			jv, jerr := crd.Lookup(check.object, e.Path)
			cj, _ := json.Marshal(cv)
			jj, _ := json.Marshal(jv)
			if (cerr == nil) != (jerr == nil) || string(cj) != string(jj) {
				diffs = append(diffs, "  "+e.Path+": cluster stores "+string(cj)+", joiner check "+string(jj))
			}
		}
	}
	return diffs
}

func warningSet(ws []string) []string {
	out := slices.Clone(ws)
	sort.Strings(out)
	return slices.Compact(out)
}

func boolWord(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// warningRecorder collects the warnings of the replayer's requests, which run one at a time.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningRecorder) reset() { w.take() }

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}
