package config_test

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The fixed names of the project's conventions.
const (
	defaultNamespace   = "joiner-system"
	deploymentName     = "joiner"
	webhookService     = "joiner-webhook"
	metricsService     = "joiner-metrics"
	servingSecret      = "joiner-webhook-cert"
	leaseName          = "joiner"
	mutatingDefaulting = "joiner-defaulting"
	validating         = "joiner-validation"
	podTenancy         = "joiner-pod-tenancy"
	injectCAAnnotation = "cert-manager.io/inject-ca-from"
)

// want describes the rendering a variant must produce.
type want struct {
	namespace      string
	serviceAccount string
	// failurePolicy of the defaulting and validation webhooks.
	failurePolicy admissionv1.FailurePolicyType
	webhookPort   int32
	// certManager: cert-manager mode; issuer is the expected --cert-manager-issuer value.
	certManager bool
	issuer      string
	// ownCA: the rendering creates joiner-selfsigned → joiner-ca (no external issuer).
	ownCA      bool
	clusterArg string
}

func defaults() want {
	return want{namespace: defaultNamespace, serviceAccount: "joiner", failurePolicy: admissionv1.Fail, webhookPort: 9443}
}

func (w want) withCertManager(issuer string, ownCA bool) want {
	w.certManager, w.issuer, w.ownCA = true, issuer, ownCA
	return w
}

func (w want) saUser() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", w.namespace, w.serviceAccount)
}

// kindWebhook is one defaulting/validation webhook the conventions fix.
type kindWebhook struct {
	name, path, group, version, resource string
}

func kindWebhooks(stage string) []kindWebhook {
	kinds := []struct{ kind, group, version, resource string }{
		{"nodepool", "karpenter.sh", "v1", "nodepools"},
		{"nodeclaim", "karpenter.sh", "v1", "nodeclaims"},
		{"ec2nodeclass", "karpenter.k8s.aws", "v1", "ec2nodeclasses"},
		{"localnodeclass", "joiner.dev", "v1alpha1", "localnodeclasses"},
	}
	if stage == "validation" {
		kinds = append(kinds, struct{ kind, group, version, resource string }{"provisioningpolicy", "joiner.dev", "v1alpha1", "provisioningpolicies"})
	}
	prefix := map[string]string{"defaulting": "/default/", "validation": "/validate/"}[stage]
	var out []kindWebhook
	for _, k := range kinds {
		out = append(out, kindWebhook{
			name: k.kind + "." + stage + ".joiner.dev", path: prefix + k.kind,
			group: k.group, version: k.version, resource: k.resource,
		})
	}
	return out
}

// commonWebhook is what every webhook shares, mutating or validating.
type commonWebhook struct {
	Name                    string
	ClientConfig            admissionv1.WebhookClientConfig
	Rules                   []admissionv1.RuleWithOperations
	FailurePolicy           *admissionv1.FailurePolicyType
	MatchPolicy             *admissionv1.MatchPolicyType
	NamespaceSelector       *metav1.LabelSelector
	ObjectSelector          *metav1.LabelSelector
	SideEffects             *admissionv1.SideEffectClass
	TimeoutSeconds          *int32
	AdmissionReviewVersions []string
	MatchConditions         []admissionv1.MatchCondition
}

func webhooksOf(t *testing.T, m manifest, kind, name string) ([]commonWebhook, object) {
	t.Helper()
	o := m.get(t, kind, name)
	var out []commonWebhook
	switch kind {
	case "MutatingWebhookConfiguration":
		var c admissionv1.MutatingWebhookConfiguration
		decode(t, o, &c)
		for _, w := range c.Webhooks {
			if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionv1.NeverReinvocationPolicy {
				t.Errorf("%s: webhook %s: reinvocationPolicy should be set explicitly to Never", name, w.Name)
			}
			if w.ClientConfig.CABundle != nil {
				t.Errorf("%s: webhook %s: caBundle must not be rendered (it is injected at runtime)", name, w.Name)
			}
			out = append(out, commonWebhook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy,
				w.NamespaceSelector, w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions})
		}
	case "ValidatingWebhookConfiguration":
		var c admissionv1.ValidatingWebhookConfiguration
		decode(t, o, &c)
		for _, w := range c.Webhooks {
			if w.ClientConfig.CABundle != nil {
				t.Errorf("%s: webhook %s: caBundle must not be rendered (it is injected at runtime)", name, w.Name)
			}
			out = append(out, commonWebhook{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy,
				w.NamespaceSelector, w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions})
		}
	}
	return out, o
}

// checkWebhooks asserts the four webhook configurations follow the conventions exactly.
func checkWebhooks(t *testing.T, m manifest, w want) {
	t.Helper()
	configs := []struct{ kind, name string }{
		{"MutatingWebhookConfiguration", mutatingDefaulting},
		{"ValidatingWebhookConfiguration", validating},
		{"MutatingWebhookConfiguration", podTenancy},
		{"ValidatingWebhookConfiguration", podTenancy},
	}
	if n := len(m.ofKind("MutatingWebhookConfiguration")) + len(m.ofKind("ValidatingWebhookConfiguration")); n != len(configs) {
		t.Errorf("want exactly %d webhook configurations, found %d", len(configs), n)
	}
	for _, c := range configs {
		hooks, o := webhooksOf(t, m, c.kind, c.name)
		inject, _ := o.annotations()[injectCAAnnotation].(string)
		switch {
		case w.certManager && inject != w.namespace+"/"+servingSecret:
			t.Errorf("%s %s: annotation %s = %q, want %q", c.kind, c.name, injectCAAnnotation, inject, w.namespace+"/"+servingSecret)
		case !w.certManager && inject != "":
			t.Errorf("%s %s: self-managed mode must not carry %s (cainjector would fight Joiner's own injection)", c.kind, c.name, injectCAAnnotation)
		}
		for _, h := range hooks {
			checkWebhookCommon(t, c.name, h, w)
		}
		if c.name == podTenancy {
			checkTenancyWebhook(t, c.kind, hooks, w)
			continue
		}
		stage := "defaulting"
		if c.kind == "ValidatingWebhookConfiguration" {
			stage = "validation"
		}
		checkKindWebhooks(t, c.name, hooks, kindWebhooks(stage), w)
	}
}

func checkWebhookCommon(t *testing.T, config string, h commonWebhook, w want) {
	t.Helper()
	at := config + "/" + h.Name
	svc := h.ClientConfig.Service
	switch {
	case h.ClientConfig.URL != nil:
		t.Errorf("%s: must call the Service, not a URL", at)
	case svc == nil:
		t.Errorf("%s: no clientConfig.service", at)
	case svc.Name != webhookService || svc.Namespace != w.namespace || svc.Port == nil || *svc.Port != 443:
		t.Errorf("%s: clientConfig.service = %s/%s:%v, want %s/%s:443", at, svc.Namespace, svc.Name, deref(svc.Port), w.namespace, webhookService)
	}
	if h.SideEffects == nil || *h.SideEffects != admissionv1.SideEffectClassNone {
		t.Errorf("%s: sideEffects = %v, want None", at, deref(h.SideEffects))
	}
	if !slices.Equal(h.AdmissionReviewVersions, []string{"v1"}) {
		t.Errorf("%s: admissionReviewVersions = %v, want [v1]", at, h.AdmissionReviewVersions)
	}
	if h.MatchPolicy == nil || *h.MatchPolicy != admissionv1.Equivalent {
		t.Errorf("%s: matchPolicy = %v, want Equivalent", at, deref(h.MatchPolicy))
	}
	if h.ObjectSelector != nil {
		t.Errorf("%s: unexpected objectSelector %v", at, h.ObjectSelector)
	}
	for _, r := range h.Rules {
		for _, f := range [][]string{r.APIGroups, r.APIVersions, r.Resources} {
			if slices.Contains(f, "*") || slices.ContainsFunc(f, func(s string) bool { return strings.Contains(s, "/") }) {
				t.Errorf("%s: rule %v matches a wildcard or a subresource", at, f)
			}
		}
		for _, op := range r.Operations {
			if op == admissionv1.OperationAll || op == admissionv1.Delete || op == admissionv1.Connect {
				t.Errorf("%s: operation %s is not allowed", at, op)
			}
		}
	}
}

func checkKindWebhooks(t *testing.T, config string, hooks []commonWebhook, wantHooks []kindWebhook, w want) {
	t.Helper()
	if len(hooks) != len(wantHooks) {
		t.Errorf("%s: %d webhooks, want %d", config, len(hooks), len(wantHooks))
	}
	byName := map[string]commonWebhook{}
	for _, h := range hooks {
		byName[h.Name] = h
	}
	for _, k := range wantHooks {
		h, ok := byName[k.name]
		if !ok {
			t.Errorf("%s: webhook %s is missing", config, k.name)
			continue
		}
		at := config + "/" + k.name
		if svc := h.ClientConfig.Service; svc != nil && deref(svc.Path) != k.path {
			t.Errorf("%s: path = %q, want %q", at, deref(svc.Path), k.path)
		}
		if h.FailurePolicy == nil || *h.FailurePolicy != w.failurePolicy {
			t.Errorf("%s: failurePolicy = %v, want %s", at, deref(h.FailurePolicy), w.failurePolicy)
		}
		if h.TimeoutSeconds == nil || *h.TimeoutSeconds != 5 {
			t.Errorf("%s: timeoutSeconds = %v, want 5", at, deref(h.TimeoutSeconds))
		}
		wantRule := admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule: admissionv1.Rule{
				APIGroups: []string{k.group}, APIVersions: []string{k.version}, Resources: []string{k.resource},
				Scope: ptr(admissionv1.ClusterScope),
			},
		}
		if !reflect.DeepEqual(h.Rules, []admissionv1.RuleWithOperations{wantRule}) {
			t.Errorf("%s: rules = %+v, want exactly %+v", at, h.Rules, wantRule)
		}
		if h.NamespaceSelector != nil {
			t.Errorf("%s: namespaceSelector %v is meaningless for a cluster-scoped kind", at, h.NamespaceSelector)
		}
		wantCond := fmt.Sprintf("request.userInfo.username != '%s'", w.saUser())
		if len(h.MatchConditions) != 1 || h.MatchConditions[0].Expression != wantCond {
			t.Errorf("%s: matchConditions = %+v, want one condition %q (exempting Joiner's own service account)", at, h.MatchConditions, wantCond)
		}
	}
}

func checkTenancyWebhook(t *testing.T, kind string, hooks []commonWebhook, w want) {
	t.Helper()
	at := kind + " " + podTenancy
	if kind == "ValidatingWebhookConfiguration" {
		if len(hooks) != 2 || hooks[1].Name != "workload.tenancy.joiner.dev" {
			t.Fatalf("%s: want the webhooks pod.tenancy.joiner.dev and workload.tenancy.joiner.dev, got %d", at, len(hooks))
		}
		checkWorkloadWebhook(t, at, hooks[0], hooks[1])
		hooks = hooks[:1]
	}
	if len(hooks) != 1 || hooks[0].Name != "pod.tenancy.joiner.dev" {
		t.Fatalf("%s: want the single webhook pod.tenancy.joiner.dev, got %d", at, len(hooks))
	}
	h := hooks[0]
	wantPath := map[string]string{"MutatingWebhookConfiguration": "/mutate/pod", "ValidatingWebhookConfiguration": "/validate/pod"}[kind]
	if svc := h.ClientConfig.Service; svc != nil && deref(svc.Path) != wantPath {
		t.Errorf("%s: path = %q, want %q", at, deref(svc.Path), wantPath)
	}
	// Fail-open whatever webhook.failurePolicy says: a Pod webhook that fails closed can deadlock the cluster.
	if h.FailurePolicy == nil || *h.FailurePolicy != admissionv1.Ignore {
		t.Errorf("%s: failurePolicy = %v, want Ignore", at, deref(h.FailurePolicy))
	}
	if h.TimeoutSeconds == nil || *h.TimeoutSeconds != 3 {
		t.Errorf("%s: timeoutSeconds = %v, want 3", at, deref(h.TimeoutSeconds))
	}
	wantRule := admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr(admissionv1.NamespacedScope)},
	}
	if !reflect.DeepEqual(h.Rules, []admissionv1.RuleWithOperations{wantRule}) {
		t.Errorf("%s: rules = %+v, want exactly %+v", at, h.Rules, wantRule)
	}
	wantSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
			Values: []string{"kube-system", "kube-public", "kube-node-lease", w.namespace}},
		{Key: "joiner.dev/nodepools", Operator: metav1.LabelSelectorOpExists},
	}}
	if !reflect.DeepEqual(h.NamespaceSelector, wantSel) {
		t.Errorf("%s: namespaceSelector = %+v, want %+v (system namespaces excluded, bound namespaces only)", at, h.NamespaceSelector, wantSel)
	}
}

// checkWorkloadWebhook asserts the workload-template webhook sits beside the Pod webhook with its
// namespaceSelector, failurePolicy and timeout, and matches CREATE and UPDATE of the six workload kinds.
func checkWorkloadWebhook(t *testing.T, at string, pod, h commonWebhook) {
	t.Helper()
	at += "/" + h.Name
	if svc := h.ClientConfig.Service; svc == nil || deref(svc.Path) != "/validate/workload" {
		t.Errorf("%s: want service path /validate/workload", at)
	}
	if !reflect.DeepEqual(h.FailurePolicy, pod.FailurePolicy) || !reflect.DeepEqual(h.TimeoutSeconds, pod.TimeoutSeconds) ||
		!reflect.DeepEqual(h.NamespaceSelector, pod.NamespaceSelector) {
		t.Errorf("%s: failurePolicy, timeoutSeconds and namespaceSelector must be the Pod webhook's", at)
	}
	ops := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}
	scope := ptr(admissionv1.NamespacedScope)
	want := []admissionv1.RuleWithOperations{
		{Operations: ops, Rule: admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
			Resources: []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, Scope: scope}},
		{Operations: ops, Rule: admissionv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"},
			Resources: []string{"jobs", "cronjobs"}, Scope: scope}},
	}
	if !reflect.DeepEqual(h.Rules, want) {
		t.Errorf("%s: rules = %+v, want exactly %+v", at, h.Rules, want)
	}
}

// checkDeployment asserts the controller Deployment's availability and security properties.
func checkDeployment(t *testing.T, m manifest, w want) {
	t.Helper()
	var d appsv1.Deployment
	decode(t, m.get(t, "Deployment", deploymentName), &d)
	if d.Namespace != w.namespace {
		t.Errorf("Deployment namespace = %q, want %q", d.Namespace, w.namespace)
	}
	if deref(d.Spec.Replicas) != 2 {
		t.Errorf("replicas = %d, want 2", deref(d.Spec.Replicas))
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update must have maxUnavailable 0 so a webhook backend stays up, got %+v", d.Spec.Strategy)
	}
	ps := d.Spec.Template.Spec
	if ps.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q, want system-cluster-critical", ps.PriorityClassName)
	}
	if ps.ServiceAccountName != w.serviceAccount {
		t.Errorf("serviceAccountName = %q, want %q", ps.ServiceAccountName, w.serviceAccount)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("pod template lacks selector label %s=%s", k, v)
		}
	}
	if sc := ps.SecurityContext; sc == nil || !deref(sc.RunAsNonRoot) || deref(sc.RunAsUser) != 65532 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", sc)
	}
	checkSpread(t, ps, d.Spec.Selector.MatchLabels)
	if len(ps.Containers) != 1 || ps.Containers[0].Name != "controller" {
		t.Fatalf("want one container named controller, got %d", len(ps.Containers))
	}
	c := ps.Containers[0]
	if sc := c.SecurityContext; sc == nil || !deref(sc.RunAsNonRoot) || deref(sc.RunAsUser) != 65532 ||
		!deref(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || deref(sc.Privileged) {
		t.Errorf("container securityContext = %+v, want non-root 65532, read-only root, no privilege escalation, drop ALL, seccomp RuntimeDefault", sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	if !strings.HasPrefix(c.Image, "ghcr.io/joiner-dev/joiner") {
		t.Errorf("image = %q, want ghcr.io/joiner-dev/joiner", c.Image)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["https-webhook"] != w.webhookPort || ports["http-metrics"] != 8080 || ports["http-health"] != 8081 {
		t.Errorf("container ports = %v, want https-webhook %d, http-metrics 8080, http-health 8081", ports, w.webhookPort)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || resolvePort(p.probe.HTTPGet.Port, ports) != 8081 {
			t.Errorf("%s: %s on port %s, want %s on 8081", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	var podNS bool
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			podNS = true
		}
	}
	if !podNS {
		t.Error("env POD_NAMESPACE from fieldRef metadata.namespace is missing")
	}
	checkArgs(t, c.Args, w)
}

func checkSpread(t *testing.T, ps corev1.PodSpec, selector map[string]string) {
	t.Helper()
	var anti bool
	if a := ps.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if term.PodAffinityTerm.TopologyKey == "kubernetes.io/hostname" && term.PodAffinityTerm.LabelSelector != nil &&
				maps.Equal(term.PodAffinityTerm.LabelSelector.MatchLabels, selector) {
				anti = true
			}
		}
		if len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
			t.Error("pod anti-affinity must be preferred, not required (a one-node cluster must still run both replicas)")
		}
	}
	if !anti {
		t.Error("want preferred pod anti-affinity on kubernetes.io/hostname selecting the controller pods")
	}
	var notOnOwnNodes bool
	if a := ps.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Key == "karpenter.sh/nodepool" && e.Operator == corev1.NodeSelectorOpDoesNotExist {
					notOnOwnNodes = true
				}
			}
		}
	}
	if !notOnOwnNodes {
		t.Error("want required node affinity karpenter.sh/nodepool DoesNotExist (Joiner must not run on nodes it manages)")
	}
	var spread bool
	for _, c := range ps.TopologySpreadConstraints {
		if c.TopologyKey == "topology.kubernetes.io/zone" && c.LabelSelector != nil && maps.Equal(c.LabelSelector.MatchLabels, selector) {
			spread = true
		}
	}
	if !spread {
		t.Error("want a zone topology spread constraint selecting the controller pods")
	}
}

func resolvePort(p intstr.IntOrString, named map[string]int32) int32 {
	if p.Type == intstr.String {
		return named[p.StrVal]
	}
	return p.IntVal
}

func checkArgs(t *testing.T, args []string, w want) {
	t.Helper()
	if len(args) == 0 || args[0] != "controller" {
		t.Fatalf("args = %v, want the controller subcommand first", args)
	}
	flags := map[string]string{}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		if _, dup := flags[k]; dup {
			t.Errorf("flag %s given twice in %v", k, args)
		}
		flags[k] = v
	}
	mode := "self-managed"
	if w.certManager {
		mode = "cert-manager"
	}
	expect := map[string]string{
		"--leader-elect":              "true",
		"--webhook-port":              fmt.Sprint(w.webhookPort),
		"--metrics-bind-address":      ":8080",
		"--health-probe-bind-address": ":8081",
		"--cert-mode":                 mode,
		"--tls-min-version":           "1.2",
		"--log-level":                 "info",
	}
	for k, v := range expect {
		if got, ok := flags[k]; !ok || got != v {
			t.Errorf("flag %s = %q, want %q (args %v)", k, got, v, args)
		}
	}
	if got, ok := flags["--cert-manager-issuer"]; ok != w.certManager || got != w.issuer {
		t.Errorf("--cert-manager-issuer = %q (present %v), want %q", got, ok, w.issuer)
	}
	if w.clusterArg != "" && flags["--cluster-name"] != w.clusterArg {
		t.Errorf("--cluster-name = %q, want %q", flags["--cluster-name"], w.clusterArg)
	}
}

// checkServicesAndPDB asserts the webhook and metrics Services and the PodDisruptionBudget.
func checkServicesAndPDB(t *testing.T, m manifest, w want) {
	t.Helper()
	var d appsv1.Deployment
	decode(t, m.get(t, "Deployment", deploymentName), &d)
	ports := map[string]int32{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, s := range []struct {
		name, port string
		svcPort    int32
		target     int32
	}{{webhookService, "https-webhook", 443, w.webhookPort}, {metricsService, "http-metrics", 8080, 8080}} {
		var svc corev1.Service
		decode(t, m.get(t, "Service", s.name), &svc)
		if svc.Namespace != w.namespace || !maps.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
			t.Errorf("Service %s: namespace %q selector %v, want %q and the Deployment's selector", s.name, svc.Namespace, svc.Spec.Selector, w.namespace)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != s.port || svc.Spec.Ports[0].Port != s.svcPort ||
			resolvePort(svc.Spec.Ports[0].TargetPort, ports) != s.target {
			t.Errorf("Service %s: ports %+v, want %s %d → %d", s.name, svc.Spec.Ports, s.port, s.svcPort, s.target)
		}
	}
	var pdb policyv1.PodDisruptionBudget
	decode(t, m.get(t, "PodDisruptionBudget", deploymentName), &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PDB: minAvailable %v maxUnavailable %v, want minAvailable 1", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
	if pdb.Spec.Selector == nil || !maps.Equal(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PDB selector %v, want the Deployment's selector %v", pdb.Spec.Selector, d.Spec.Selector.MatchLabels)
	}
}

// rbacRule is one policy rule with the object that holds it.
type rbacRule struct {
	owner string
	rule  rbacv1.PolicyRule
}

func rbacRules(t *testing.T, m manifest) []rbacRule {
	t.Helper()
	var out []rbacRule
	for _, o := range m {
		var rules []rbacv1.PolicyRule
		switch o.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			decode(t, o, &r)
			if r.AggregationRule != nil {
				t.Errorf("%s: aggregation rules are not allowed", o.key())
			}
			rules = r.Rules
		case "Role":
			var r rbacv1.Role
			decode(t, o, &r)
			rules = r.Rules
		default:
			continue
		}
		for _, r := range rules {
			out = append(out, rbacRule{o.key(), r})
		}
	}
	return out
}

// nameRestricted lists, per group/resource, the verbs that must carry resourceNames and the names allowed.
var nameRestricted = map[string]struct {
	verbs []string
	names []string
}{
	"/secrets":                   {[]string{"get", "list", "watch", "update", "patch", "delete"}, []string{servingSecret}},
	"coordination.k8s.io/leases": {[]string{"get", "list", "watch", "update", "patch", "delete"}, []string{leaseName}},
	"admissionregistration.k8s.io/mutatingwebhookconfigurations": {
		[]string{"update", "patch", "delete"}, []string{mutatingDefaulting, podTenancy}},
	"admissionregistration.k8s.io/validatingwebhookconfigurations": {
		[]string{"update", "patch", "delete"}, []string{validating, podTenancy}},
	"cert-manager.io/issuers":      {[]string{"update", "patch", "delete"}, []string{"joiner-selfsigned", "joiner-ca"}},
	"cert-manager.io/certificates": {[]string{"update", "patch", "delete"}, []string{"joiner-ca", servingSecret}},
}

// checkRBAC asserts least privilege: explicit verbs and resources, names where they can be checked,
// no dangerous grants, and exactly the grants the controller's code needs (grantNeeds).
func checkRBAC(t *testing.T, m manifest, w want) {
	t.Helper()
	rules := rbacRules(t, m)
	if len(rules) == 0 {
		t.Fatal("no RBAC rules rendered")
	}
	for _, r := range rules {
		at := fmt.Sprintf("%s rule %+v", r.owner, r.rule)
		if len(r.rule.NonResourceURLs) != 0 {
			t.Errorf("%s: nonResourceURLs are not needed", at)
		}
		if len(r.rule.Verbs) == 0 || len(r.rule.Resources) == 0 || len(r.rule.APIGroups) == 0 {
			t.Errorf("%s: verbs, resources and apiGroups must be explicit", at)
		}
		for _, f := range [][]string{r.rule.Verbs, r.rule.Resources, r.rule.APIGroups, r.rule.ResourceNames} {
			if slices.ContainsFunc(f, func(s string) bool { return strings.Contains(s, "*") }) {
				t.Errorf("%s: wildcard", at)
			}
		}
		for _, v := range r.rule.Verbs {
			if slices.Contains([]string{"escalate", "bind", "impersonate", "deletecollection"}, v) {
				t.Errorf("%s: verb %s is never needed", at, v)
			}
			if v == "create" && len(r.rule.ResourceNames) != 0 {
				t.Errorf("%s: create with resourceNames never matches (the name is not known at authorization time)", at)
			}
		}
		for _, g := range r.rule.APIGroups {
			for _, res := range r.rule.Resources {
				if slices.Contains([]string{"pods/exec", "pods/attach", "pods/portforward", "nodes/proxy", "serviceaccounts/token", "configmaps"}, res) && g == "" {
					t.Errorf("%s: %s is not needed", at, res)
				}
				if res == "secrets" && g == "" && strings.HasPrefix(r.owner, "ClusterRole/") {
					t.Errorf("%s: Secrets only through a Role in the release namespace", at)
				}
				lim, ok := nameRestricted[g+"/"+res]
				if !ok {
					continue
				}
				for _, v := range r.rule.Verbs {
					if !slices.Contains(lim.verbs, v) {
						continue
					}
					if len(r.rule.ResourceNames) == 0 {
						t.Errorf("%s: %s on %s must be limited with resourceNames to %v", at, v, res, lim.names)
					}
					for _, n := range r.rule.ResourceNames {
						if !slices.Contains(lim.names, n) {
							t.Errorf("%s: resourceName %q is not one of Joiner's own %v", at, n, lim.names)
						}
					}
				}
			}
		}
	}
	// Every (group, resource, verb) granted is one the code needs, and the reverse (grantNeeds).
	t.Run("least privilege", func(t *testing.T) { checkGrantsHaveNeeds(t, m, w) })
	// Names and namespaces, which grantNeeds does not cover: the controller's own objects can be
	// written, and only in their namespace (scope: "" cluster-wide, or the release namespace).
	type grant struct{ group, resource, verb, name, scope string }
	ns := w.namespace
	required := []grant{
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", "watch", "", ""},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", "update", validating, ""},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", "update", podTenancy, ""},
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", "update", mutatingDefaulting, ""},
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", "update", podTenancy, ""},
		{"coordination.k8s.io", "leases", "create", "", ns},
		{"coordination.k8s.io", "leases", "update", leaseName, ns},
		{"", "secrets", "get", servingSecret, ns},
		{"", "secrets", "watch", servingSecret, ns},
		{"", "secrets", "update", servingSecret, ns},
		{"", "secrets", "create", "", ns},
	}
	forbidden := []grant{
		{"", "secrets", "get", "some-other-secret", ns},
		{"", "secrets", "get", servingSecret, "kube-system"},
		{"", "secrets", "create", "", "kube-system"},
		{"admissionregistration.k8s.io", "validatingwebhookconfigurations", "update", "someone-elses-webhook", ""},
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", "delete", mutatingDefaulting, ""},
		{"coordination.k8s.io", "leases", "update", "kube-scheduler", "kube-system"},
		{"", "pods", "create", "", ""},
		{"", "pods/status", "patch", "", ""},
		{"apps", "deployments", "update", "", ""},
		{"karpenter.sh", "nodepools", "create", "", ""},
		{"karpenter.sh", "nodepools", "delete", "", ""},
		{"joiner.dev", "provisioningpolicies", "update", "", ""},
	}
	if w.certManager {
		required = append(required,
			grant{"cert-manager.io", "certificates", "create", "", ns},
			grant{"cert-manager.io", "certificates", "update", servingSecret, ns},
			grant{"cert-manager.io", "issuers", "get", "joiner-ca", ns})
		forbidden = append(forbidden, grant{"cert-manager.io", "certificates", "update", "other-cert", ns})
	} else {
		forbidden = append(forbidden, grant{"cert-manager.io", "certificates", "create", "", ns})
	}
	bound := boundRules(t, m, w)
	for _, g := range required {
		if !allowed(bound, g.group, g.resource, g.verb, g.name, g.scope) {
			t.Errorf("service account %s cannot %s %s %q in %q: the controller needs it", w.saUser(), g.verb, groupResource(g.group, g.resource), g.name, g.scope)
		}
	}
	for _, g := range forbidden {
		if allowed(bound, g.group, g.resource, g.verb, g.name, g.scope) {
			t.Errorf("service account %s may %s %s %q in %q: more than it needs", w.saUser(), g.verb, groupResource(g.group, g.resource), g.name, g.scope)
		}
	}
}

func groupResource(g, r string) string {
	if g == "" {
		return r
	}
	return r + "." + g
}

// scopedRule is a rule bound to the controller's service account, with the namespace it applies in ("" = all).
type scopedRule struct {
	scope string
	rule  rbacv1.PolicyRule
}

// boundRules returns the rules the rendered bindings grant to the controller's service account.
func boundRules(t *testing.T, m manifest, w want) []scopedRule {
	t.Helper()
	clusterRoles, roles := map[string][]rbacv1.PolicyRule{}, map[string][]rbacv1.PolicyRule{}
	for _, o := range m {
		switch o.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			decode(t, o, &r)
			clusterRoles[r.Name] = r.Rules
		case "Role":
			var r rbacv1.Role
			decode(t, o, &r)
			roles[r.Namespace+"/"+r.Name] = r.Rules
		}
	}
	isSA := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == w.serviceAccount && s.Namespace == w.namespace
		})
	}
	var out []scopedRule
	for _, o := range m {
		switch o.Kind {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			decode(t, o, &b)
			if isSA(b.Subjects) && b.RoleRef.Kind == "ClusterRole" {
				for _, r := range clusterRoles[b.RoleRef.Name] {
					out = append(out, scopedRule{"", r})
				}
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			decode(t, o, &b)
			if !isSA(b.Subjects) {
				continue
			}
			src := roles[b.Namespace+"/"+b.RoleRef.Name]
			if b.RoleRef.Kind == "ClusterRole" {
				src = clusterRoles[b.RoleRef.Name]
			}
			for _, r := range src {
				out = append(out, scopedRule{b.Namespace, r})
			}
		}
	}
	return out
}

// allowed evaluates RBAC like the apiserver does for a request (scope "" = cluster-wide request or
// a request in any namespace the rule reaches).
func allowed(rules []scopedRule, group, resource, verb, name, ns string) bool {
	for _, r := range rules {
		if r.scope != "" && r.scope != ns {
			continue
		}
		if !slices.Contains(r.rule.APIGroups, group) || !slices.Contains(r.rule.Resources, resource) || !slices.Contains(r.rule.Verbs, verb) {
			continue
		}
		if len(r.rule.ResourceNames) == 0 || (name != "" && slices.Contains(r.rule.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// checkCertManager asserts the cert-manager objects of cert-manager mode, and their absence otherwise.
func checkCertManager(t *testing.T, m manifest, w want) {
	t.Helper()
	certs, issuers := m.ofKind("Certificate"), m.ofKind("Issuer")
	if !w.certManager {
		if len(certs)+len(issuers)+len(m.ofKind("ClusterIssuer")) != 0 {
			t.Errorf("self-managed mode must not render cert-manager objects (cert-manager may not be installed)")
		}
		return
	}
	serving := certField(t, m.get(t, "Certificate", servingSecret))
	wantDNS := []any{"joiner-webhook." + w.namespace + ".svc", "joiner-webhook." + w.namespace + ".svc.cluster.local"}
	if fmt.Sprint(serving["dnsNames"]) != fmt.Sprint(wantDNS) || serving["secretName"] != servingSecret {
		t.Errorf("Certificate %s: dnsNames %v secretName %v, want %v and %s", servingSecret, serving["dnsNames"], serving["secretName"], wantDNS, servingSecret)
	}
	ref, _ := serving["issuerRef"].(map[string]any)
	if got := fmt.Sprintf("%v/%v", ref["kind"], ref["name"]); got != w.issuer {
		t.Errorf("Certificate %s: issuerRef %s, want %s", servingSecret, got, w.issuer)
	}
	if !w.ownCA {
		if len(issuers) != 0 || m.has("Certificate", "joiner-ca") {
			t.Errorf("with an external issuer the rendering must not create its own CA")
		}
		return
	}
	selfSigned := certField(t, m.get(t, "Issuer", "joiner-selfsigned"))
	if _, ok := selfSigned["selfSigned"]; !ok {
		t.Errorf("Issuer joiner-selfsigned is not selfSigned: %v", selfSigned)
	}
	ca := certField(t, m.get(t, "Certificate", "joiner-ca"))
	caRef, _ := ca["issuerRef"].(map[string]any)
	if ca["isCA"] != true || caRef["name"] != "joiner-selfsigned" || ca["secretName"] != "joiner-ca" {
		t.Errorf("Certificate joiner-ca must be a CA issued by joiner-selfsigned into Secret joiner-ca: %v", ca)
	}
	caIssuer := certField(t, m.get(t, "Issuer", "joiner-ca"))
	if fmt.Sprint(caIssuer["ca"]) != "map[secretName:joiner-ca]" {
		t.Errorf("Issuer joiner-ca must sign with Secret joiner-ca: %v", caIssuer)
	}
	for _, o := range append(certs, issuers...) {
		if o.Namespace != w.namespace {
			t.Errorf("%s must be in %s", o.key(), w.namespace)
		}
	}
}

func certField(t *testing.T, o object) map[string]any {
	t.Helper()
	spec, ok := o.Fields["spec"].(map[string]any)
	if !ok {
		t.Fatalf("%s has no spec", o.key())
	}
	return spec
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
