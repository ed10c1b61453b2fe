// Package config_test renders Joiner's deployment manifests — the kustomize bases and overlays in
// config/ and the Helm chart in charts/joiner — and checks the properties they must keep: the
// webhook conventions and failure policies, the Deployment's availability and security settings,
// least-privilege RBAC, the cert-manager wiring, the chart's uninstall hook, CRD copies, and that the
// chart and the kustomize tree render the same objects. It holds no product code.
//
// kubectl comes from the test bed (`make testbed`) or PATH; helm is built from Go modules by
// hack/tools/helm.sh on first use.
package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The generated CRDs the manifests must install.
var wantCRDs = []string{
	"nodepools.karpenter.sh",
	"nodeclaims.karpenter.sh",
	"ec2nodeclasses.karpenter.k8s.aws",
	"localnodeclasses.joiner.dev",
	"provisioningpolicies.joiner.dev",
	"capacitybuffers.autoscaling.x-k8s.io",
}

// checkCommon runs every property check that applies to both kustomize and Helm renderings.
func checkCommon(t *testing.T, m manifest, w want) {
	t.Helper()
	t.Run("webhooks", func(t *testing.T) { checkWebhooks(t, m, w) })
	t.Run("deployment", func(t *testing.T) { checkDeployment(t, m, w) })
	t.Run("services-and-pdb", func(t *testing.T) { checkServicesAndPDB(t, m, w) })
	t.Run("rbac", func(t *testing.T) { checkRBAC(t, m, w) })
	t.Run("cert-manager", func(t *testing.T) { checkCertManager(t, m, w) })
	t.Run("namespaces", func(t *testing.T) {
		for _, o := range m {
			if o.Kind == "CustomResourceDefinition" || strings.HasPrefix(o.Kind, "Cluster") || o.Kind == "Namespace" ||
				strings.HasSuffix(o.Kind, "WebhookConfiguration") {
				if o.Namespace != "" {
					t.Errorf("%s: cluster-scoped object with a namespace", o.key())
				}
				continue
			}
			if o.Namespace != w.namespace {
				t.Errorf("%s: namespace %q, want %q", o.key(), o.Namespace, w.namespace)
			}
		}
	})
}

func TestKustomize(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		want want
	}{
		{"default", "config/default", defaults()},
		{"cert-manager overlay", "config/overlays/cert-manager", defaults().withCertManager("Issuer/joiner-ca", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parse(t, kustomize(t, tt.dir))
			checkCommon(t, m, tt.want)
			t.Run("crds", func(t *testing.T) {
				var got []string
				for _, o := range m.ofKind("CustomResourceDefinition") {
					got = append(got, o.Name)
				}
				if !sameSet(got, wantCRDs) {
					t.Errorf("CRDs %v, want %v", got, wantCRDs)
				}
			})
			t.Run("namespace", func(t *testing.T) {
				var ns corev1.Namespace
				decode(t, m.get(t, "Namespace", defaultNamespace), &ns)
				if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
					t.Errorf("namespace %s labels %v: want pod-security.kubernetes.io/enforce=restricted", ns.Name, ns.Labels)
				}
				for _, o := range m {
					if o.Kind == "Namespace" && o.Name != defaultNamespace {
						t.Errorf("unexpected Namespace %s", o.Name)
					}
				}
			})
			t.Run("common labels", func(t *testing.T) {
				for _, o := range m {
					md, _ := o.Fields["metadata"].(map[string]any)
					labels, _ := md["labels"].(map[string]any)
					if labels["app.kubernetes.io/name"] != "joiner" {
						t.Errorf("%s lacks label app.kubernetes.io/name=joiner", o.key())
					}
				}
			})
		})
	}
}

func TestHelm(t *testing.T) {
	other := want{namespace: "autoscaling", serviceAccount: "autoscaler", failurePolicy: "Ignore", webhookPort: 10443, clusterArg: "prod"}
	tests := []struct {
		name string
		ns   string
		set  []string
		want want
		// noServiceAccount: serviceAccount.create=false, the ServiceAccount is not rendered.
		noServiceAccount bool
		noCleanupHook    bool
	}{
		{name: "defaults", ns: defaultNamespace, want: defaults()},
		{name: "cert-manager with its own CA", ns: defaultNamespace, set: []string{"certManager.enabled=true"},
			want: defaults().withCertManager("Issuer/joiner-ca", true)},
		{name: "cert-manager with a ClusterIssuer", ns: defaultNamespace,
			set:  []string{"certManager.enabled=true", "certManager.issuerRef.kind=ClusterIssuer", "certManager.issuerRef.name=corp-ca"},
			want: defaults().withCertManager("ClusterIssuer/corp-ca", false)},
		{name: "other namespace, account, port and failure policy", ns: "autoscaling",
			set:  []string{"serviceAccount.name=autoscaler", "webhook.failurePolicy=Ignore", "webhook.port=10443", "settings.clusterName=prod"},
			want: other},
		{name: "existing service account, no cleanup hook", ns: defaultNamespace,
			set:  []string{"serviceAccount.create=false", "webhookCleanup.enabled=false"},
			want: defaults(), noServiceAccount: true, noCleanupHook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			m := parse(t, helmTemplate(t, tt.ns, args...))
			checkCommon(t, m, tt.want)
			t.Run("service account", func(t *testing.T) {
				if got := m.has("ServiceAccount", tt.want.serviceAccount); got == tt.noServiceAccount {
					t.Errorf("ServiceAccount %s rendered: %v, want %v", tt.want.serviceAccount, got, !tt.noServiceAccount)
				}
			})
			t.Run("pre-delete hook", func(t *testing.T) {
				if tt.noCleanupHook {
					if m.has("Job", "joiner-webhook-cleanup") {
						t.Error("webhookCleanup.enabled=false still renders the hook Job")
					}
					return
				}
				checkCleanupHook(t, m, tt.want)
			})
			t.Run("no crds without --include-crds", func(t *testing.T) {
				if n := len(m.ofKind("CustomResourceDefinition")); n != 0 {
					t.Errorf("%d CRDs rendered from templates/: CRDs belong in crds/ only", n)
				}
			})
		})
	}
}

// checkCleanupHook asserts the pre-delete Job that removes the webhook configurations on uninstall.
func checkCleanupHook(t *testing.T, m manifest, w want) {
	t.Helper()
	const name = "joiner-webhook-cleanup"
	hookWeight := func(o object) int {
		a := o.annotations()
		if a["helm.sh/hook"] != "pre-delete" {
			t.Errorf("%s: helm.sh/hook = %v, want pre-delete", o.key(), a["helm.sh/hook"])
		}
		policy, _ := a["helm.sh/hook-delete-policy"].(string)
		for _, p := range []string{"before-hook-creation", "hook-succeeded"} {
			if !slices.Contains(strings.Split(policy, ","), p) {
				t.Errorf("%s: helm.sh/hook-delete-policy %q lacks %s", o.key(), policy, p)
			}
		}
		var weight int
		if _, err := fmt.Sscan(fmt.Sprint(a["helm.sh/hook-weight"]), &weight); err != nil {
			t.Errorf("%s: helm.sh/hook-weight %v is not a number", o.key(), a["helm.sh/hook-weight"])
		}
		return weight
	}
	job := m.get(t, "Job", name)
	jobWeight := hookWeight(job)
	for _, dep := range []object{m.get(t, "ServiceAccount", name), m.get(t, "ClusterRole", name), m.get(t, "ClusterRoleBinding", name)} {
		if hookWeight(dep) >= jobWeight {
			t.Errorf("%s must be created before the Job (lower hook weight than %d)", dep.key(), jobWeight)
		}
	}

	var role rbacv1.ClusterRole
	decode(t, m.get(t, "ClusterRole", name), &role)
	allowedNames := map[string][]string{
		"mutatingwebhookconfigurations":   {mutatingDefaulting, podTenancy},
		"validatingwebhookconfigurations": {validating, podTenancy},
	}
	covered := map[string]bool{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			names, ok := allowedNames[res]
			if !ok || !slices.Equal(r.APIGroups, []string{"admissionregistration.k8s.io"}) {
				t.Errorf("hook ClusterRole grants %v on %v: only Joiner's webhook configurations", r.Verbs, r.Resources)
				continue
			}
			if !sameSet(r.ResourceNames, names) {
				t.Errorf("hook ClusterRole on %s: resourceNames %v, want %v", res, r.ResourceNames, names)
			}
			if !slices.Equal(r.Verbs, []string{"delete"}) {
				t.Errorf("hook ClusterRole on %s: verbs %v, want only delete", res, r.Verbs)
			}
			covered[res] = slices.Contains(r.Verbs, "delete")
		}
	}
	for res := range allowedNames {
		if !covered[res] {
			t.Errorf("hook ClusterRole cannot delete %s", res)
		}
	}
	var binding rbacv1.ClusterRoleBinding
	decode(t, m.get(t, "ClusterRoleBinding", name), &binding)
	if binding.RoleRef.Name != name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != name || binding.Subjects[0].Namespace != w.namespace {
		t.Errorf("hook ClusterRoleBinding %+v must bind ClusterRole %s to ServiceAccount %s/%s only", binding, name, w.namespace, name)
	}

	var j batchv1.Job
	decode(t, job, &j)
	ps := j.Spec.Template.Spec
	if ps.ServiceAccountName != name || len(ps.Containers) != 1 {
		t.Fatalf("hook Job: serviceAccountName %q, %d containers; want %s and one container", ps.ServiceAccountName, len(ps.Containers), name)
	}
	c := ps.Containers[0]
	cmd := append(slices.Clone(c.Command), c.Args...)
	if len(cmd) == 0 || filepath.Base(cmd[0]) != "kubectl" || !slices.Contains(cmd, "delete") || !slices.Contains(cmd, "--ignore-not-found") {
		t.Errorf("hook Job runs %v, want kubectl delete ... --ignore-not-found", cmd)
	}
	for _, target := range []string{
		"mutatingwebhookconfiguration/" + mutatingDefaulting, "mutatingwebhookconfiguration/" + podTenancy,
		"validatingwebhookconfiguration/" + validating, "validatingwebhookconfiguration/" + podTenancy,
	} {
		if !slices.Contains(cmd, target) {
			t.Errorf("hook Job command %v does not delete %s", cmd, target)
		}
	}
	if !strings.Contains(c.Image, "kubectl") || strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image, ":") {
		t.Errorf("hook image %q: want a pinned kubectl image", c.Image)
	}
	if sc := c.SecurityContext; sc == nil || !deref(sc.RunAsNonRoot) || !deref(sc.ReadOnlyRootFilesystem) ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("hook container securityContext %+v: want non-root, read-only root, no escalation, drop ALL", sc)
	}
	if j.Spec.BackoffLimit == nil || j.Spec.ActiveDeadlineSeconds == nil {
		t.Error("hook Job needs a backoffLimit and an activeDeadlineSeconds so a broken uninstall ends")
	}
}

// TestHelmPDBNeverBlocksDrains: a PodDisruptionBudget that no eviction can satisfy would block every
// drain of the node running Joiner, so the chart leaves it out when replicas do not exceed minAvailable.
func TestHelmPDBNeverBlocksDrains(t *testing.T) {
	tests := []struct {
		replicas string
		wantPDB  bool
	}{{"1", false}, {"2", true}, {"3", true}}
	for _, tt := range tests {
		t.Run("replicas="+tt.replicas, func(t *testing.T) {
			m := parse(t, helmTemplate(t, defaultNamespace, "--set", "replicas="+tt.replicas))
			if got := m.has("PodDisruptionBudget", deploymentName); got != tt.wantPDB {
				t.Errorf("PodDisruptionBudget rendered: %v, want %v", got, tt.wantPDB)
			}
		})
	}
}

func TestHelmRejectsBadValues(t *testing.T) {
	tests := []struct {
		name    string
		set     []string
		wantErr string
	}{
		{"unknown failure policy", []string{"webhook.failurePolicy=Sometimes"}, "webhook.failurePolicy must be Fail or Ignore"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			_, stderr, err := tryHelmTemplate(t, defaultNamespace, args...)
			if err == nil || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("helm template %v: err %v, stderr %q; want a failure saying %q", tt.set, err, stderr, tt.wantErr)
			}
		})
	}
}

// TestChartCRDsMatchBases: charts/joiner/crds holds byte-identical copies of config/crd/bases, and helm installs them.
func TestChartCRDsMatchBases(t *testing.T) {
	bases := yamlFiles(t, filepath.Join(repoRoot, "config", "crd", "bases"))
	chart := yamlFiles(t, filepath.Join(repoRoot, "charts", "joiner", "crds"))
	if len(bases) == 0 {
		t.Fatal("config/crd/bases is empty: run `make generate`")
	}
	if !sameSet(bases, chart) {
		t.Errorf("charts/joiner/crds has %v, config/crd/bases has %v: run `make generate`", chart, bases)
	}
	for _, f := range bases {
		want, err := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "bases", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(repoRoot, "charts", "joiner", "crds", f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/joiner/crds/%s differs from config/crd/bases/%s: run `make generate`", f, f)
		}
	}
	m := parse(t, helmTemplate(t, defaultNamespace, "--include-crds"))
	var got []string
	for _, o := range m.ofKind("CustomResourceDefinition") {
		got = append(got, o.Name)
	}
	if !sameSet(got, wantCRDs) {
		t.Errorf("helm template --include-crds renders CRDs %v, want %v", got, wantCRDs)
	}
}

// TestCRDKustomizationListsEveryBase: a CRD added to config/crd/bases is also added to config/crd/kustomization.yaml.
func TestCRDKustomizationListsEveryBase(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range k.Resources {
		listed = append(listed, strings.TrimPrefix(r, "bases/"))
	}
	if bases := yamlFiles(t, filepath.Join(repoRoot, "config", "crd", "bases")); !sameSet(listed, bases) {
		t.Errorf("config/crd/kustomization.yaml lists %v, config/crd/bases has %v", listed, bases)
	}
}

// TestHelmMatchesKustomize: with matching settings the chart renders the same objects as the
// kustomize tree, field for field (labels, the image tag, the Namespace and the chart's hooks aside).
func TestHelmMatchesKustomize(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		set  []string
	}{
		{"self-managed", "config/default", nil},
		{"cert-manager", "config/overlays/cert-manager", []string{"--set", "certManager.enabled=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := normalized(parse(t, kustomize(t, tt.dir)))
			h := normalized(parse(t, helmTemplate(t, defaultNamespace, tt.set...)))
			var keys []string
			for key := range k {
				keys = append(keys, key)
			}
			for key := range h {
				if _, ok := k[key]; !ok {
					keys = append(keys, key)
				}
			}
			sort.Strings(keys)
			for _, key := range keys {
				kf, inK := k[key]
				hf, inH := h[key]
				switch {
				case !inK:
					t.Errorf("%s: rendered by the chart but not by %s", key, tt.dir)
				case !inH:
					t.Errorf("%s: rendered by %s but not by the chart", key, tt.dir)
				default:
					for _, d := range diff("", kf, hf) {
						t.Errorf("%s: %s", key, d)
					}
				}
			}
		})
	}
}

// normalized drops what legitimately differs between the kustomize and Helm renderings.
func normalized(m manifest) map[string]any {
	out := map[string]any{}
	for _, o := range m {
		if o.Kind == "CustomResourceDefinition" || o.Kind == "Namespace" {
			continue
		}
		if _, hook := o.annotations()["helm.sh/hook"]; hook {
			continue
		}
		var f map[string]any
		_ = json.Unmarshal(o.JSON, &f) // a deep copy; o.JSON came from json.Marshal-compatible YAML
		md := f["metadata"].(map[string]any)
		delete(md, "labels")
		if a, ok := md["annotations"].(map[string]any); ok {
			for k := range a {
				if k != injectCAAnnotation {
					delete(a, k)
				}
			}
			if len(a) == 0 {
				delete(md, "annotations")
			}
		}
		if o.Kind == "Deployment" {
			spec := f["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			for _, c := range spec["containers"].([]any) {
				delete(c.(map[string]any), "image")
			}
		}
		out[o.key()] = f
	}
	return out
}

// diff lists the paths where a and b differ (at most 20).
func diff(path string, a, b any) []string {
	var out []string
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v vs %v", path, a, b)}
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			out = append(out, diff(path+"."+k, av[k], bv[k])...)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return []string{fmt.Sprintf("%s: kustomize %s vs helm %s", path, js(a), js(b))}
		}
		for i := range av {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
	default:
		if !reflect.DeepEqual(a, b) {
			out = append(out, fmt.Sprintf("%s: kustomize %s vs helm %s", path, js(a), js(b)))
		}
	}
	if len(out) > 20 {
		out = out[:20]
	}
	return out
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRBACRulesAreCommented: every RBAC rule in the sources carries a comment saying why it is needed.
func TestRBACRulesAreCommented(t *testing.T) {
	files := []string{
		"config/rbac/cluster_role.yaml",
		"config/rbac/role.yaml",
		"config/overlays/cert-manager/rbac.yaml",
		"charts/joiner/templates/clusterrole.yaml",
		"charts/joiner/templates/role.yaml",
		"charts/joiner/templates/cert-manager.yaml",
		"charts/joiner/templates/webhook-cleanup-hook.yaml",
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(repoRoot, f))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(raw), "\n")
			rules := 0
			for i, l := range lines {
				if !strings.HasPrefix(strings.TrimSpace(l), "- apiGroups:") {
					continue
				}
				rules++
				if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
					t.Errorf("%s:%d: the rule has no comment above it saying why it is needed", f, i+1)
				}
			}
			if rules == 0 {
				t.Errorf("%s has no rules", f)
			}
		})
	}
}

func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			out = append(out, e.Name())
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
