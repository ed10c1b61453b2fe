package runtimevalidation_test

import (
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/runtimevalidation"
)

var (
	name63   = strings.Repeat("n", 63)
	name64   = strings.Repeat("n", 64)
	prefix60 = strings.Repeat("p", 60)
	// prefix254 is a DNS subdomain of 254 characters, one more than a label key prefix may have.
	prefix254 = strings.Join([]string{prefix60, prefix60, prefix60, prefix60, "pppppppppp"}, ".")
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func withMinValues(r karpv1.NodeSelectorRequirementWithMinValues, n int) karpv1.NodeSelectorRequirementWithMinValues {
	r.MinValues = &n
	return r
}

// nodePool returns a NodePool that passes runtime validation.
func nodePool() *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "general"},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
			TemplateObjectMeta: karpv1.TemplateObjectMeta{Labels: map[string]string{"joiner.dev/team": "a", "plain": ""}},
			Spec: karpv1.NodeClaimTemplateSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
					req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand", "reserved"),
					req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "3"),
					req("example.com/gpu", corev1.NodeSelectorOpExists),
				},
				Taints: []karpv1.Taint{{Key: "joiner.dev/team", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
			},
		}},
	}
}

// matches reports whether got matches want, where "…" in want stands for any text (the long reasons of
// k8s.io/apimachinery/pkg/util/validation, which tests should not pin word for word).
func matches(want, got string) bool {
	parts := strings.Split(want, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

func assertMessages(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := runtimevalidation.Messages(errs)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n got %q\nwant %q", len(got), len(want), got, want)
	}
	for i := range want {
		if !matches(want[i], got[i]) {
			t.Errorf("error %d:\n got %q\nwant %q", i, got[i], want[i])
		}
		if errs[i].Field == "" || !strings.HasPrefix(got[i], errs[i].Field+": ") {
			t.Errorf("error %d has no field path: %q", i, got[i])
		}
	}
}

func TestNodePool(t *testing.T) {
	const reqs = "spec.template.spec.requirements"
	tests := []struct {
		name   string
		mutate func(np *karpv1.NodePool)
		want   []string
	}{
		{name: "valid NodePool", mutate: func(*karpv1.NodePool) {}},
		{
			name: "label key and requirement key with a 63-character name and a 253-character prefix",
			mutate: func(np *karpv1.NodePool) {
				key := prefix254[1:] + "/" + name63
				np.Spec.Template.Labels[key] = "x"
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(key, corev1.NodeSelectorOpIn, "x"))
			},
		},
		{
			name: "label key that is not a qualified name",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Labels["team name"] = "a"
				np.Spec.Template.Labels["a/b/c"] = "a"
			},
			want: []string{
				`spec.template.metadata.labels[a/b/c]: key "a/b/c" is not a valid label key: …; rename the label`,
				`spec.template.metadata.labels[team name]: key "team name" is not a valid label key: name part must consist of alphanumeric characters…; rename the label`,
			},
		},
		{
			name:   "label key with a name part over 63 characters",
			mutate: func(np *karpv1.NodePool) { np.Spec.Template.Labels["example.com/"+name64] = "a" },
			want: []string{
				`spec.template.metadata.labels[example.com/` + name64 + `]: key "example.com/` + name64 + `" is not a valid label key: name part must be no more than 63 bytes; rename the label`,
			},
		},
		{
			name:   "label value that is not a label value",
			mutate: func(np *karpv1.NodePool) { np.Spec.Template.Labels["joiner.dev/team"] = "-a" },
			want:   []string{`spec.template.metadata.labels[joiner.dev/team]: value "-a" is not a valid label value: …must start and end with an alphanumeric character…; change the value`},
		},
		{
			name: "requirement key with a name part over 63 characters",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[3].Key = "example.com/" + name64
			},
			want: []string{reqs + `[3].key: "example.com/` + name64 + `" is not a valid label key: name part must be no more than 63 bytes; shorten or rename the key`},
		},
		{
			name:   "requirement key with a prefix over 253 characters",
			mutate: func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[3].Key = prefix254 + "/gpu" },
			want:   []string{reqs + `[3].key: "` + prefix254 + `/gpu" is not a valid label key: prefix part must be no more than 253 bytes; shorten or rename the key`},
		},
		{
			name: "requirement values that are not label values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					req("joiner.dev/team", corev1.NodeSelectorOpIn, "a", "-b", "c d"),
					req("joiner.dev/tier", corev1.NodeSelectorOpNotIn, "gold-"))
			},
			want: []string{
				reqs + `[4].values[1]: "-b" is not a valid label value: …; change the value`,
				reqs + `[4].values[2]: "c d" is not a valid label value: …; change the value`,
				reqs + `[5].values[0]: "gold-" is not a valid label value: …; change the value`,
			},
		},
		{
			name: "Exists and DoesNotExist without values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("example.com/fpga", corev1.NodeSelectorOpDoesNotExist))
			},
		},
		{
			name: "Exists and DoesNotExist with values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[3].Values = []string{"a100", "-h100"}
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("example.com/fpga", corev1.NodeSelectorOpDoesNotExist, "x"))
			},
			want: []string{
				reqs + `[3].values: operator Exists takes no values, got [a100, -h100]; remove the values, or use operator In to require those values`,
				reqs + `[4].values: operator DoesNotExist takes no values, got [x]; remove the values, or use operator NotIn to exclude those values`,
			},
		},
		{
			name: "capacity types excluded by NotIn",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[1] = req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpNotIn, "reserved")
			},
		},
		{
			name: "unknown capacity types",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[1] = req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "spto")
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpNotIn, "ondemand"))
			},
			want: []string{
				reqs + `[1].values[1]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`,
				reqs + `[4].values[0]: "ondemand" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`,
			},
		},
		{
			name: "minValues met by distinct values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[0] = withMinValues(req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64", "amd64"), 2)
			},
		},
		{
			name: "minValues counting duplicate values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[0] = withMinValues(req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5", "m5", "c5"), 3)
			},
			want: []string{reqs + `[0].minValues: minValues 3 needs 3 distinct values, but values [m5, m5, c5] hold 2 (duplicates count once); add distinct values or lower minValues`},
		},
		{
			name: "taint key and value of the longest allowed length",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.StartupTaints = []karpv1.Taint{{Key: "example.com/" + name63, Value: name63, Effect: corev1.TaintEffectNoExecute}}
			},
		},
		{
			name: "over-long taint key and value",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, karpv1.Taint{Key: "example.com/" + name64, Effect: corev1.TaintEffectNoSchedule})
				np.Spec.Template.Spec.StartupTaints = []karpv1.Taint{{Key: "example.com/ready", Value: name64, Effect: corev1.TaintEffectNoSchedule}}
			},
			want: []string{
				`spec.template.spec.taints[1].key: "example.com/` + name64 + `" is not a valid taint key: name part must be no more than 63 bytes; shorten or rename the key`,
				`spec.template.spec.startupTaints[0].value: "` + name64 + `" is not a valid taint value: must be no more than 63 bytes; change the value`,
			},
		},
		{
			name: "duplicate taints across taints and startupTaints",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints,
					karpv1.Taint{Key: "joiner.dev/team", Value: "a", Effect: corev1.TaintEffectNoExecute},
					karpv1.Taint{Key: "joiner.dev/team", Value: "b", Effect: corev1.TaintEffectNoSchedule})
				np.Spec.Template.Spec.StartupTaints = []karpv1.Taint{{Key: "joiner.dev/team", Effect: corev1.TaintEffectNoExecute}}
			},
			want: []string{
				"spec.template.spec.taints[2]: taint joiner.dev/team=b:NoSchedule duplicates spec.template.spec.taints[0] (same key and effect); remove one of them",
				"spec.template.spec.startupTaints[0]: taint joiner.dev/team:NoExecute duplicates spec.template.spec.taints[1] (same key and effect); remove one of them",
			},
		},
		{
			name: "several problems in labels, requirements, taints order",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints[0].Key = "joiner.dev/" + name64
				np.Spec.Template.Spec.Requirements[2] = req("example.com/x", corev1.NodeSelectorOpExists, "y")
				np.Spec.Template.Labels["bad key"] = "v"
			},
			want: []string{
				`spec.template.metadata.labels[bad key]: key "bad key" is not a valid label key: …; rename the label`,
				reqs + `[2].values: operator Exists takes no values, got [y]; remove the values, or use operator In to require those values`,
				`spec.template.spec.taints[0].key: "joiner.dev/` + name64 + `" is not a valid taint key: …; shorten or rename the key`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := nodePool()
			tc.mutate(np)
			assertMessages(t, runtimevalidation.NodePool(np), tc.want)
		})
	}
}

func TestNodeClaim(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(nc *karpv1.NodeClaim)
		want   []string
	}{
		{name: "valid NodeClaim", mutate: func(*karpv1.NodeClaim) {}},
		{
			name: "metadata labels are the API server's to validate",
			mutate: func(nc *karpv1.NodeClaim) {
				nc.Labels = map[string]string{"bad key": "-v"}
			},
		},
		{
			name: "requirement and taint shapes",
			mutate: func(nc *karpv1.NodeClaim) {
				nc.Spec.Requirements = append(nc.Spec.Requirements,
					req("example.com/"+name64, corev1.NodeSelectorOpExists),
					req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "preemptible"),
					withMinValues(req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "a", "a"), 2))
				nc.Spec.StartupTaints = []karpv1.Taint{{Key: "example.com/" + name64, Effect: corev1.TaintEffectNoSchedule}}
			},
			want: []string{
				`spec.requirements[1].key: "example.com/` + name64 + `" is not a valid label key: name part must be no more than 63 bytes; shorten or rename the key`,
				`spec.requirements[2].values[0]: "preemptible" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`,
				`spec.requirements[3].minValues: minValues 2 needs 2 distinct values, but values [a, a] hold 1 (duplicates count once); add distinct values or lower minValues`,
				`spec.startupTaints[0].key: "example.com/` + name64 + `" is not a valid taint key: name part must be no more than 63 bytes; shorten or rename the key`,
			},
		},
		{
			name: "duplicate taints",
			mutate: func(nc *karpv1.NodeClaim) {
				nc.Spec.Taints = []karpv1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
				nc.Spec.StartupTaints = []karpv1.Taint{{Key: "gpu", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
			},
			want: []string{"spec.startupTaints[0]: taint gpu=x:NoSchedule duplicates spec.taints[0] (same key and effect); remove one of them"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "general-abcde"},
				Spec: karpv1.NodeClaimSpec{Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"),
				}},
			}
			tc.mutate(nc)
			assertMessages(t, runtimevalidation.NodeClaim(nc), tc.want)
		})
	}
}

func TestErrorTypes(t *testing.T) {
	np := nodePool()
	np.Spec.Template.Spec.Requirements[1].Values = []string{"spto"}
	np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, np.Spec.Template.Spec.Taints[0])
	np.Spec.Template.Labels["bad key"] = "v"
	errs := runtimevalidation.NodePool(np)
	want := []field.ErrorType{field.ErrorTypeInvalid, field.ErrorTypeNotSupported, field.ErrorTypeDuplicate}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for i, e := range errs {
		if e.Type != want[i] {
			t.Errorf("error %d (%s) has type %s, want %s", i, e.Field, e.Type, want[i])
		}
	}
}
