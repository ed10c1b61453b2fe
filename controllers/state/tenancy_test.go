package state

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/tenancy"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
)

// namespace returns a Namespace bound to pools (none: unbound).
func namespace(name string, pools ...string) corev1.Namespace {
	ns := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(pools) > 0 {
		ns.Annotations = map[string]string{tenancy.NodePoolsAnnotation: strings.Join(pools, ",")}
	}
	return ns
}

func inNamespace(ns string) fixtures.PodOption { return func(p *corev1.Pod) { p.Namespace = ns } }

// notInOf returns the values of the karpenter.sh/nodepool NotIn requirements of each required node
// affinity term of pod, one string per term ("" for a term without one).
func notInOf(pod *corev1.Pod) []string {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []string
	for _, term := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var parts []string
		for _, e := range term.MatchExpressions {
			if e.Key == karpv1.NodePoolLabelKey && e.Operator == corev1.NodeSelectorOpNotIn {
				parts = append(parts, strings.Join(e.Values, ","))
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	return out
}

// TestTenancy checks what a snapshot's Tenancy makes of each pod: the NodePools it may not use,
// the copy a simulation sees, and which NodeClaims the last check refuses for it.
func TestTenancy(t *testing.T) {
	s := &ClusterState{
		Namespaces: []corev1.Namespace{namespace("team-a", "team-a"), namespace("shared-ab", "team-a", "team-b"), namespace("default"),
			{ObjectMeta: metav1.ObjectMeta{Name: "blank", Annotations: map[string]string{tenancy.NodePoolsAnnotation: " , "}}}},
		NodePools: []karpv1.NodePool{fixtures.NodePool("team-a"), fixtures.NodePool("team-b")},
		// A NodePool that is gone, whose nodes are not, is known too.
		Nodes:      []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{karpv1.NodePoolLabelKey: "old"}}}},
		NodeClaims: []karpv1.NodeClaim{fixtures.NodeClaim("nc1", "team-c"), fixtures.NodeClaim("unmanaged", "")},
	}
	tests := []struct {
		name          string
		namespace     string
		wantForbidden []string
		// wantRefused are the NodePools whose NodeClaims Refused refuses for the pod.
		wantRefused []string
	}{
		{name: "bound to one NodePool: every other known one is forbidden", namespace: "team-a",
			wantForbidden: []string{"old", "team-b", "team-c"}, wantRefused: []string{"team-b", "team-c", "old", "nowhere"}},
		{name: "bound to two", namespace: "shared-ab", wantForbidden: []string{"old", "team-c"}, wantRefused: []string{"team-c", "old", "nowhere"}},
		{name: "unbound namespace", namespace: "default"},
		{name: "annotation without names is unbound", namespace: "blank"},
		{name: "namespace that does not exist is unbound", namespace: "missing"},
	}
	tn := s.Tenancy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := fixtures.Pod("p", inNamespace(tc.namespace))
			orig := pod.DeepCopy()
			if got := tn.Forbidden(tc.namespace); !slices.Equal(got, tc.wantForbidden) {
				t.Errorf("Forbidden = %q, want %q", got, tc.wantForbidden)
			}
			got := tn.Restrict(&pod)
			if !reflect.DeepEqual(&pod, orig) {
				t.Error("Restrict changed the pod it was given")
			}
			switch {
			case len(tc.wantForbidden) == 0 && got != &pod:
				t.Error("Restrict copied a pod that may use every NodePool")
			case len(tc.wantForbidden) > 0 && !slices.Equal(notInOf(got), []string{strings.Join(tc.wantForbidden, ",")}):
				t.Errorf("restricted pod requires NotIn %q, want [%q]", notInOf(got), strings.Join(tc.wantForbidden, ","))
			}
			if again := tn.Restrict(got); !reflect.DeepEqual(again.Spec, got.Spec) {
				t.Errorf("restricting twice changed the spec: %q", notInOf(again))
			}
			var refused []string
			for _, pool := range []string{"team-a", "team-b", "team-c", "old", "nowhere"} {
				if len(tn.Refused(pool, []*corev1.Pod{&pod})) > 0 {
					refused = append(refused, pool)
				}
			}
			if !slices.Equal(refused, tc.wantRefused) {
				t.Errorf("Refused NodeClaims of %q, want %q", refused, tc.wantRefused)
			}
		})
	}
	t.Run("nil binds nothing", func(t *testing.T) {
		var none *Tenancy
		pod := fixtures.Pod("p", inNamespace("team-a"))
		if none.Restrict(&pod) != &pod || none.Bound("team-a") != nil || len(none.Refused("x", []*corev1.Pod{&pod})) != 0 {
			t.Error("a nil Tenancy restricted or refused something")
		}
	})
	t.Run("a NodeClaim for no pod is never refused", func(t *testing.T) {
		if got := tn.Refused("team-b", nil); len(got) != 0 {
			t.Errorf("Refused = %v", got)
		}
	})
}

func TestExcludeNodePools(t *testing.T) {
	notIn := corev1.NodeSelectorRequirement{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"team-b", "team-c"}}
	zone := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}
	byName := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}
	withRequired := func(terms ...corev1.NodeSelectorTerm) fixtures.PodOption {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	tests := []struct {
		name string
		pod  corev1.Pod
		want []corev1.NodeSelectorTerm
	}{
		{name: "no affinity: one term", pod: fixtures.Pod("p"),
			want: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{notIn}}}},
		{name: "added to every term that selects, by expression or by field; not to empty ones",
			pod: fixtures.Pod("p", withRequired(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}},
				corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{byName}},
				corev1.NodeSelectorTerm{},
			)),
			want: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{zone, notIn}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{notIn}, MatchFields: []corev1.NodeSelectorRequirement{byName}},
				{},
			}},
		{name: "a term that has it already keeps one",
			pod:  fixtures.Pod("p", withRequired(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone, notIn}})),
			want: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zone, notIn}}}},
		{name: "required affinity without terms matches nothing and stays so", pod: fixtures.Pod("p", withRequired()), want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.pod.DeepCopy()
			got := excludeNodePools(&tc.pod, []string{"team-b", "team-c"})
			if !reflect.DeepEqual(&tc.pod, orig) {
				t.Error("excludeNodePools changed the pod it was given")
			}
			terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if !reflect.DeepEqual(terms, tc.want) {
				t.Errorf("terms\n got %+v\nwant %+v", terms, tc.want)
			}
		})
	}
}

// TestBuildInputRestrictsPendingPods checks that every caller of BuildInput gets the pending pods
// of bound namespaces restricted to their NodePools, and the others as they are.
func TestBuildInputRestrictsPendingPods(t *testing.T) {
	s := &ClusterState{
		Namespaces: []corev1.Namespace{namespace("team-a", "team-a"), namespace("default")},
		NodePools:  []karpv1.NodePool{fixtures.NodePool("team-a"), fixtures.NodePool("team-b")},
		Pods:       []corev1.Pod{fixtures.Pod("bound", inNamespace("team-a")), fixtures.Pod("free")},
	}
	in, err := BuildInput(context.Background(), fake.New(fake.InstanceTypes(2)...), s, nil, scheduling.Options{}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, pod := range in.Pods {
		got[pod.Name] = notInOf(pod)
	}
	want := map[string][]string{"bound": {"team-b"}, "free": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NotIn karpenter.sh/nodepool of the pending pods: %v, want %v", got, want)
	}
	if notInOf(&s.Pods[0]) != nil {
		t.Error("BuildInput changed the snapshot's pod")
	}
}
