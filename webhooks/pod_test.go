package webhooks_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

func namespace(name, pools string, labels map[string]string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if pools != "" {
		ns.Annotations = map[string]string{webhooks.NodePoolsAnnotation: pools}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[webhooks.BoundLabel] = webhooks.BoundLabelValue
	}
	return ns
}

func taintedPool(name string, taints ...karpv1.Taint) *karpv1.NodePool {
	np := nodePool(name)
	np.Spec.Template.Spec.Taints = taints
	return np
}

func taint(key, value string) karpv1.Taint {
	return karpv1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule}
}

// tenancyObjects: team-a is bound to NodePool team-a, team-ab to team-a and team-a-gpu; team-b's pools
// carry their own taints; default is unbound; kube-system is annotated but exempt.
func tenancyObjects() []client.Object {
	return []client.Object{
		namespace("team-a", "team-a", map[string]string{"env": "prod"}),
		namespace("team-ab", " team-a , team-a-gpu,team-a ", nil),
		namespace("default", "", nil),
		namespace("kube-system", "team-a", nil),
		namespace("ghost-pool", "team-a,missing", nil),
		taintedPool("team-a", taint("joiner.dev/team", "a")),
		taintedPool("team-a-gpu", taint("joiner.dev/team", "a"), taint("nvidia.com/gpu", "")),
		taintedPool("team-b", taint("joiner.dev/team", "b")),
		taintedPool("team-b-gpu", taint("joiner.dev/team", "b"), taint("nvidia.com/gpu", "")),
		taintedPool("shared"),
	}
}

func pod(namespace string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func podRequest(op admissionv1.Operation, p, old *corev1.Pod) admissionRequest {
	var obj, oldObj any
	if p != nil {
		obj = p
	}
	if old != nil {
		oldObj = old
	}
	ns := ""
	switch {
	case p != nil:
		ns = p.Namespace
	case old != nil:
		ns = old.Namespace
	}
	return request("Pod", op, ns, "web", obj, oldObj)
}

func TestMutatePod(t *testing.T) {
	nodepoolIn := func(values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	teamA := corev1.Toleration{Key: "joiner.dev/team", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name         string
		pod          *corev1.Pod
		op           admissionv1.Operation
		want         func(*corev1.Pod) // applied to a copy of pod to get the expected result; nil: no patch
		wantWarnings []string
	}{
		{
			name: "single pool: nodeSelector and toleration",
			pod:  pod("team-a", nil),
			want: func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-a"}
				p.Spec.Tolerations = []corev1.Toleration{teamA}
			},
		},
		{
			name: "single pool: existing selector and toleration are kept",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
				p.Spec.Tolerations = []corev1.Toleration{{Key: "joiner.dev/team", Operator: corev1.TolerationOpExists}}
			}),
			want: func(p *corev1.Pod) { p.Spec.NodeSelector[karpv1.NodePoolLabelKey] = "team-a" },
		},
		{
			name: "several pools: required affinity created",
			pod:  pod("team-ab", nil),
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{nodepoolIn("team-a", "team-a-gpu")}}},
				}}}
				p.Spec.Tolerations = []corev1.Toleration{teamA, gpu}
			},
		},
		{
			name: "several pools: merged into every existing term",
			pod: pod("team-ab", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
						{MatchExpressions: []corev1.NodeSelectorRequirement{nodepoolIn("team-a-gpu")}},
						{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}},
					},
				}}}
			}),
			want: func(p *corev1.Pod) {
				terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				terms[0].MatchExpressions = append(terms[0].MatchExpressions, nodepoolIn("team-a", "team-a-gpu"))
				terms[2].MatchExpressions = append(terms[2].MatchExpressions, nodepoolIn("team-a", "team-a-gpu"))
				p.Spec.Tolerations = []corev1.Toleration{teamA, gpu}
			},
		},
		{
			name: "several pools: a pod that selects one of them keeps its selector",
			pod: pod("team-ab", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-a-gpu"}
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Key: "joiner.dev/team"}, gpu}
			}),
		},
		{
			name:         "bound NodePool that does not exist",
			pod:          pod("ghost-pool", nil),
			wantWarnings: []string{`NodePool "missing" bound to namespace "ghost-pool" does not exist; create it or fix annotation joiner.dev/nodepools`},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{nodepoolIn("team-a", "missing")}}},
				}}}
				p.Spec.Tolerations = []corev1.Toleration{teamA}
			},
		},
		{name: "kube-system is untouched even when annotated", pod: pod("kube-system", nil)},
		{name: "unbound namespace is untouched", pod: pod("default", nil)},
		{name: "update is untouched", pod: pod("team-a", nil), op: admissionv1.Update},
	}
	e := newEnv(t, envOptions{objects: tenancyObjects()})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			var old *corev1.Pod
			if op == admissionv1.Update {
				old = tc.pod
			}
			r := podRequest(op, tc.pod, old)
			resp := e.handle(t, webhooks.PathMutatePod, r)
			if !resp.Allowed {
				t.Fatalf("mutation denied: %q", message(resp))
			}
			if !equalStrings(resp.Warnings, tc.wantWarnings) {
				t.Fatalf("warnings %q, want %q", resp.Warnings, tc.wantWarnings)
			}
			if tc.want == nil {
				if len(resp.Patches) != 0 {
					t.Fatalf("want no patch, got %v", resp.Patches)
				}
				return
			}
			patched := applyPatch(t, r.Object.Raw, resp)
			want := tc.pod.DeepCopy()
			tc.want(want)
			if got, wantMap := decode(t, patched), decode(t, rawJSON(want)); !reflect.DeepEqual(got, wantMap) {
				t.Fatalf("patched pod:\n got %s\nwant %s", patched, rawJSON(want))
			}
			// Idempotence: mutating the mutated pod yields no patch.
			r.Object.Raw = patched
			if again := e.handle(t, webhooks.PathMutatePod, r); len(again.Patches) != 0 {
				t.Fatalf("second mutation returned patch %v", again.Patches)
			}
		})
	}
}

const regoNoLatest = `package joiner.test.no_latest

violation contains {"msg": msg, "field": sprintf("spec.containers[%d].image", [i])} if {
	some i, c in input.review.object.spec.containers
	endswith(c.image, ":latest")
	msg := sprintf("container %s uses a :latest image; pin a version", [c.name])
}
`

func TestValidatePod(t *testing.T) {
	required := func(exprs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}}, {MatchExpressions: exprs}},
		}}}
	}
	in := func(values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	noLatest := policy.Policy{Name: "no-latest", Rego: regoNoLatest, Match: policy.Match{
		Kinds: []string{"Pod"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
	}}
	latest := func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:latest" }
	tests := []struct {
		name        string
		pod         *corev1.Pod
		old         *corev1.Pod
		wantDenials []string
		wantWarning []string
	}{
		{name: "pod on its own pool", pod: pod("team-a", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-a"}
			p.Spec.Tolerations = []corev1.Toleration{{Key: "joiner.dev/team", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
		})},
		{
			name:        "nodeSelector of another tenant's pool",
			pod:         pod("team-a", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"} }),
			wantDenials: []string{`spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`},
		},
		{
			name: "required affinity naming another tenant's pools",
			pod:  pod("team-ab", func(p *corev1.Pod) { p.Spec.Affinity = required(in("team-a", "team-b", "team-b-gpu")) }),
			wantDenials: []string{
				`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0]: NodePool team-b, team-b-gpu is not bound to namespace "team-ab" (bound: team-a, team-a-gpu); use only the bound NodePools`,
			},
		},
		{
			name: "preferred affinity naming another tenant's pool",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in("team-b")}}},
				}}}
			}),
			wantDenials: []string{`spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`},
		},
		{
			name: "NotIn another tenant's pool is fine",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Spec.Affinity = required(corev1.NodeSelectorRequirement{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"team-b"}})
			}),
		},
		{
			name: "toleration of another tenant's taint",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{
					{Key: "joiner.dev/team", Value: "a", Effect: corev1.TaintEffectNoSchedule},
					{Key: "joiner.dev/team", Operator: corev1.TolerationOpEqual, Value: "b"},
				}
			}),
			wantDenials: []string{`spec.tolerations[1]: tolerates joiner.dev/team=b:NoSchedule, a taint only NodePool "team-b" carries, which is not bound to namespace "team-a"; remove the toleration`},
		},
		{
			name: "toleration of a taint its own pool also carries",
			pod: pod("team-ab", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			}),
		},
		{
			name: "key-less Exists toleration tolerates everything",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}),
			wantDenials: []string{`spec.tolerations[0]: operator Exists without a key tolerates every taint, including nvidia.com/gpu:NoSchedule of NodePool "team-a-gpu", which is not bound to namespace "team-a"; set the key of a bound NodePool's taint`},
		},
		{
			name: "everything at once",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"}
				p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
				latest(p)
			}),
			wantDenials: []string{
				`spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`,
				`spec.tolerations[0]: tolerates nvidia.com/gpu:NoSchedule, a taint only NodePool "team-a-gpu" carries, which is not bound to namespace "team-a"; remove the toleration`,
				`[no-latest] container web uses a :latest image; pin a version (field: spec.containers[0].image)`,
			},
		},
		{
			name: "kube-system is untouched",
			pod: pod("kube-system", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"}
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}),
		},
		{
			name: "unbound namespace has no tenancy",
			pod:  pod("default", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"} }),
		},
		{
			name: "Pod policy applies where the namespace selector matches",
			pod:  pod("team-a", latest),
			wantDenials: []string{
				`[no-latest] container web uses a :latest image; pin a version (field: spec.containers[0].image)`,
			},
		},
		{name: "Pod policy skips namespaces the selector does not match", pod: pod("team-ab", latest)},
		{
			name: "update keeps an old violation as a warning",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Labels = map[string]string{"new": "label"}
				p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"}
			}),
			old:         pod("team-a", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"} }),
			wantWarning: []string{`pre-existing: spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`},
		},
		{
			name: "update adding a foreign toleration is denied",
			pod: pod("team-a", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "joiner.dev/team", Value: "b", Effect: corev1.TaintEffectNoSchedule}}
			}),
			old:         pod("team-a", nil),
			wantDenials: []string{`spec.tolerations[0]: tolerates joiner.dev/team=b:NoSchedule, a taint only NodePool "team-b" carries, which is not bound to namespace "team-a"; remove the toleration`},
		},
	}
	e := newEnv(t, envOptions{objects: tenancyObjects(), policies: []policy.Policy{noLatest}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := admissionv1.Create
			if tc.old != nil {
				op = admissionv1.Update
			}
			resp := e.handle(t, webhooks.PathValidatePod, podRequest(op, tc.pod, tc.old))
			assertDecision(t, resp, len(tc.wantDenials) == 0, tc.wantDenials, tc.wantWarning)
		})
	}
}

func TestPodTenancyLookupFailures(t *testing.T) {
	boom := errors.New("etcdserver: request timed out")
	failing := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tenancyObjects()...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				return boom
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	e := newEnv(t, envOptions{reader: failing})
	p := pod("team-a", nil)

	mutated := e.handle(t, webhooks.PathMutatePod, podRequest(admissionv1.Create, p, nil))
	if !mutated.Allowed || len(mutated.Patches) != 0 || len(mutated.Warnings) != 1 {
		t.Fatalf("mutator should admit unchanged with a warning, got allowed=%v patches=%v warnings=%q", mutated.Allowed, mutated.Patches, mutated.Warnings)
	}
	validated := e.handle(t, webhooks.PathValidatePod, podRequest(admissionv1.Create, p, nil))
	want := `could not check NodePool tenancy of the pod: read namespace "team-a": etcdserver: request timed out; retry`
	if validated.Allowed || message(validated) != want {
		t.Fatalf("validator should deny (fail closed) with %q, got allowed=%v %q", want, validated.Allowed, message(validated))
	}
}

func TestBoundNodePools(t *testing.T) {
	tests := []struct {
		annotation *string
		want       []string
	}{
		{annotation: nil, want: nil},
		{annotation: ptr(""), want: nil},
		{annotation: ptr(" , ,"), want: nil},
		{annotation: ptr("team-a"), want: []string{"team-a"}},
		{annotation: ptr(" team-a ,team-a-gpu,team-a,"), want: []string{"team-a", "team-a-gpu"}},
	}
	for _, tc := range tests {
		ns := &corev1.Namespace{}
		if tc.annotation != nil {
			ns.Annotations = map[string]string{webhooks.NodePoolsAnnotation: *tc.annotation}
		}
		if got := webhooks.BoundNodePools(ns); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("BoundNodePools(%v) = %q, want %q", tc.annotation, got, tc.want)
		}
	}
	if webhooks.BoundNodePools(nil) != nil {
		t.Error("BoundNodePools(nil) is not nil")
	}
}
