package webhooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

const cronFix = "; use 5 fields: minute hour day-of-month month day-of-week"

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func ptr[T any](v T) *T { return &v }

func catalogLister() webhooks.InstanceTypeLister {
	return webhooks.InstanceTypeListerFunc(func(context.Context, *karpv1.NodePool) ([]webhooks.InstanceTypeLabels, error) {
		return testCatalog(), nil
	})
}

func TestValidateNodePoolSemantics(t *testing.T) {
	const cpu = awsv1.LabelInstanceCPU
	const family = awsv1.LabelInstanceFamily
	tests := []struct {
		name         string
		mutate       func(np *karpv1.NodePool)
		lister       webhooks.InstanceTypeLister
		wantDenials  []string
		wantWarnings []string
	}{
		{name: "valid NodePool", mutate: func(*karpv1.NodePool) {}},
		{
			name: "budget schedule hour out of range",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Disruption.Budgets = []karpv1.Budget{
					{Nodes: "10%"},
					{Nodes: "0", Schedule: ptr("0 25 * * *"), Duration: &metav1.Duration{Duration: 3600e9}},
				}
			},
			wantDenials: []string{`spec.disruption.budgets[1].schedule: "0 25 * * *" is not a valid cron expression (end of range (25) above maximum (23))` + cronFix},
		},
		{
			name: "budget schedules with descriptor and day names are valid",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Disruption.Budgets = []karpv1.Budget{
					{Nodes: "0", Schedule: ptr("@daily"), Duration: &metav1.Duration{Duration: 3600e9}},
					{Nodes: "0", Schedule: ptr("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 3600e9}},
				}
			},
		},
		{
			name: "budget schedule with four fields",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr("0 9 * *"), Duration: &metav1.Duration{Duration: 3600e9}}}
			},
			wantDenials: []string{`spec.disruption.budgets[0].schedule: "0 9 * *" is not a valid cron expression (expected exactly 5 fields, found 4)` + cronFix},
		},
		{
			name: "budget schedule @every and time zone",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Disruption.Budgets = []karpv1.Budget{
					{Nodes: "0", Schedule: ptr("@every 1h"), Duration: &metav1.Duration{Duration: 3600e9}},
					{Nodes: "0", Schedule: ptr("CRON_TZ=Europe/Paris 0 9 * * *"), Duration: &metav1.Duration{Duration: 3600e9}},
				}
			},
			wantDenials: []string{
				`spec.disruption.budgets[0].schedule: "@every 1h" is not a valid cron expression (@every intervals are not supported; use a descriptor such as @daily)` + cronFix,
				`spec.disruption.budgets[1].schedule: "CRON_TZ=Europe/Paris 0 9 * * *" is not a valid cron expression (time zones are not supported: schedules are evaluated in UTC)` + cronFix,
			},
		},
		{
			name: "In and NotIn the same value",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
					req(corev1.LabelArchStable, corev1.NodeSelectorOpNotIn, "amd64"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[1]: kubernetes.io/arch NotIn [amd64] contradicts spec.template.spec.requirements[0] (kubernetes.io/arch In [amd64]); no node can satisfy both, remove one or change its values"},
		},
		{
			name: "disjoint In values across two entries",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b"),
					req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
					req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[2]: topology.kubernetes.io/zone In [us-east-1c] contradicts spec.template.spec.requirements[0] (topology.kubernetes.io/zone In [us-east-1a, us-east-1b]); no node can satisfy both, remove one or change its values"},
		},
		{
			name: "overlapping In values are fine",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b"),
					req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b", "us-east-1c"),
					req(corev1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "us-east-1a"),
				}
			},
		},
		{
			name: "template label outside a requirement",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Labels[corev1.LabelArchStable] = "arm64"
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")}
			},
			wantDenials: []string{"spec.template.spec.requirements[0]: kubernetes.io/arch In [amd64] contradicts spec.template.metadata.labels[kubernetes.io/arch] (kubernetes.io/arch=arm64); no node can satisfy both, remove one or change its values"},
		},
		{
			name: "Gt at or above Lt",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(cpu, corev1.NodeSelectorOpGt, "8"),
					req(cpu, corev1.NodeSelectorOpLt, "4"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[1]: karpenter.k8s.aws/instance-cpu Lt 4 contradicts spec.template.spec.requirements[0] (karpenter.k8s.aws/instance-cpu Gt 8); no node can satisfy both, remove one or change its values"},
		},
		{
			name: "Gt and Lt with no integer between",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(cpu, corev1.NodeSelectorOpGt, "4"),
					req(cpu, corev1.NodeSelectorOpLt, "5"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[1]: karpenter.k8s.aws/instance-cpu Lt 5 contradicts spec.template.spec.requirements[0] (karpenter.k8s.aws/instance-cpu Gt 4); no node can satisfy both, remove one or change its values"},
		},
		{
			name: "Gte and Lte on the same bound are fine",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(cpu, karpv1.NodeSelectorOpGte, "4"),
					req(cpu, karpv1.NodeSelectorOpLte, "4"),
				}
			},
		},
		{
			name: "Exists and DoesNotExist",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req("example.com/pool", corev1.NodeSelectorOpExists),
					req("example.com/pool", corev1.NodeSelectorOpDoesNotExist),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[1]: example.com/pool DoesNotExist contradicts spec.template.spec.requirements[0] (example.com/pool Exists); no node can satisfy both, remove one or change its values"},
		},
		{
			name: "contradiction only among three constraints",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(cpu, karpv1.NodeSelectorOpGte, "4"),
					req(cpu, karpv1.NodeSelectorOpLte, "5"),
					req(cpu, corev1.NodeSelectorOpNotIn, "4", "5"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[2]: karpenter.k8s.aws/instance-cpu NotIn [4, 5] contradicts the earlier constraints on karpenter.k8s.aws/instance-cpu (karpenter.k8s.aws/instance-cpu Gte 4; karpenter.k8s.aws/instance-cpu Lte 5); no node can satisfy all of them, remove or change one"},
		},
		{
			name: "beta label key is the same label as its stable key",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
					req("beta.kubernetes.io/arch", corev1.NodeSelectorOpIn, "arm64"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[1]: beta.kubernetes.io/arch In [arm64] contradicts spec.template.spec.requirements[0] (kubernetes.io/arch In [amd64]); no node can satisfy both, remove one or change its values"},
		},
		{
			name:   "instance type missing from the catalog",
			lister: catalogLister(),
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
					req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"),
					req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m9z.huge"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[2]: no instance type in the catalog satisfies node.kubernetes.io/instance-type In [m9z.huge]"},
		},
		{
			name:   "requirements each satisfiable but not together",
			lister: catalogLister(),
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"),
					req("joiner.dev/team", corev1.NodeSelectorOpIn, "a"),
					req(family, corev1.NodeSelectorOpIn, "m5"),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[2]: no instance type in the catalog satisfies karpenter.k8s.aws/instance-family In [m5] together with spec.template.spec.requirements[0]; widen one of them"},
		},
		{
			name:   "label known to some instance types only",
			lister: catalogLister(),
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Labels[corev1.LabelArchStable] = "arm64"
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(awsv1.LabelInstanceGPUName, corev1.NodeSelectorOpExists),
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[0]: no instance type in the catalog satisfies karpenter.k8s.aws/instance-gpu-name Exists together with spec.template.metadata.labels[kubernetes.io/arch]; widen one of them"},
		},
		{
			name:   "template label no instance type carries",
			lister: catalogLister(),
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Labels[corev1.LabelArchStable] = "s390x"
				np.Spec.Template.Spec.Requirements = np.Spec.Template.Spec.Requirements[1:]
			},
			wantDenials: []string{"spec.template.metadata.labels[kubernetes.io/arch]: no instance type in the catalog satisfies kubernetes.io/arch=s390x"},
		},
		{
			name:   "minValues above what the catalog offers",
			lister: catalogLister(),
			mutate: func(np *karpv1.NodePool) {
				families := req(family, corev1.NodeSelectorOpIn, "m5", "m7g", "g5")
				families.MinValues = ptr(3)
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
					req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
					families,
				}
			},
			wantDenials: []string{"spec.template.spec.requirements[1]: minValues 3 needs 3 distinct karpenter.k8s.aws/instance-family values, but the instance types that satisfy all requirements offer 2; lower minValues or widen the requirements"},
		},
		{
			name:   "bounds satisfied by the catalog",
			lister: catalogLister(),
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
					req(cpu, corev1.NodeSelectorOpGt, "2"), req(awsv1.LabelInstanceGPUName, corev1.NodeSelectorOpDoesNotExist))
			},
		},
		{
			name: "catalog unavailable",
			lister: webhooks.InstanceTypeListerFunc(func(context.Context, *karpv1.NodePool) ([]webhooks.InstanceTypeLabels, error) {
				return nil, errors.New("catalog unavailable")
			}),
			mutate:       func(*karpv1.NodePool) {},
			wantWarnings: []string{"spec.template.spec.requirements: not checked against the instance-type catalog: catalog unavailable"},
		},
		{
			name: "duplicate taints across taints and startupTaints",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints = []karpv1.Taint{
					{Key: "joiner.dev/team", Value: "a", Effect: corev1.TaintEffectNoSchedule},
					{Key: "joiner.dev/team", Value: "a", Effect: corev1.TaintEffectNoExecute},
					{Key: "joiner.dev/team", Value: "b", Effect: corev1.TaintEffectNoSchedule},
				}
				np.Spec.Template.Spec.StartupTaints = []karpv1.Taint{{Key: "joiner.dev/team", Effect: corev1.TaintEffectNoExecute}}
			},
			wantDenials: []string{
				"spec.template.spec.taints[2]: taint joiner.dev/team=b:NoSchedule duplicates spec.template.spec.taints[0] (same key and effect); remove one of them",
				"spec.template.spec.startupTaints[0]: taint joiner.dev/team:NoExecute duplicates spec.template.spec.taints[1] (same key and effect); remove one of them",
			},
		},
		{
			name:         "node class does not exist",
			mutate:       func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "missing" },
			wantWarnings: []string{`spec.template.spec.nodeClassRef: EC2NodeClass "missing" does not exist; create it, or the NodePool stays NotReady`},
		},
		{
			name: "LocalNodeClass reference that exists",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: "local"}
			},
		},
		{
			name: "node class of an unknown kind",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "example.com", Kind: "FooNodeClass", Name: "x"}
			},
			wantWarnings: []string{`spec.template.spec.nodeClassRef: FooNodeClass in group "example.com" is not a node class Joiner knows; use EC2NodeClass (karpenter.k8s.aws) or LocalNodeClass (joiner.dev)`},
		},
		{
			name: "limits below current usage",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Limits[corev1.ResourceCPU] = resource.MustParse("800")
				np.Spec.Limits[corev1.ResourceMemory] = resource.MustParse("100Gi")
				np.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500"), corev1.ResourceMemory: resource.MustParse("64Gi")}
			},
			wantWarnings: []string{"spec.limits.cpu: 800 is below current usage 1500; no new nodes launch until usage drops below it"},
		},
		{
			name: "several problems in one denial",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr("61 * * * *"), Duration: &metav1.Duration{Duration: 3600e9}}}
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("joiner.dev/team", corev1.NodeSelectorOpNotIn, "a"))
				np.Spec.Template.Spec.NodeClassRef.Name = "missing"
			},
			wantDenials: []string{
				`spec.disruption.budgets[0].schedule: "61 * * * *" is not a valid cron expression (end of range (61) above maximum (59))` + cronFix,
				"spec.template.spec.requirements[3]: joiner.dev/team NotIn [a] contradicts spec.template.metadata.labels[joiner.dev/team] (joiner.dev/team=a); no node can satisfy both, remove one or change its values",
			},
			wantWarnings: []string{`spec.template.spec.nodeClassRef: EC2NodeClass "missing" does not exist; create it, or the NodePool stays NotReady`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			local := &v1alpha1.LocalNodeClass{}
			local.Name = "local"
			e := newEnv(t, envOptions{objects: []client.Object{ec2NodeClass("default"), local}, instanceTypes: tc.lister})
			np := nodePool("general")
			tc.mutate(np)
			resp := e.handle(t, webhooks.PathValidateNodePool, request("NodePool", admissionv1.Create, "", np.Name, np, nil))
			assertDecision(t, resp, len(tc.wantDenials) == 0, tc.wantDenials, tc.wantWarnings)
		})
	}
}

const regoMaxWeight = `package joiner.test.max_weight

violation contains {"msg": msg, "field": "spec.weight"} if {
	w := input.review.object.spec.weight
	w > input.parameters.max
	msg := sprintf("weight %d is above %d; lower spec.weight", [w, input.parameters.max])
}
`

const regoRequireTeam = `package joiner.test.require_team

violation contains {"msg": "NodePool has no joiner.dev/team label; label it with its owning team", "field": "metadata.labels"} if {
	not input.review.object.metadata.labels["joiner.dev/team"]
}
`

const regoLongMessage = `package joiner.test.long

violation contains {"msg": concat(" ", ["consider"| some _ in numbers.range(1, 40)])} if {
	input.review.object.kind == "NodePool"
}
`

// regoBroken fails at evaluation: the range it asks for (a name of 2 or more characters) is over
// the engine's builtin size cap, which stops the evaluation.
const regoBroken = `package joiner.test.broken

violation contains {"msg": "never"} if {
	count(numbers.range(1, count(input.review.object.metadata.name) * 100000)) > 0
}
`

func testPolicy(name string, action policy.Action, rego string, params map[string]any) policy.Policy {
	return policy.Policy{Name: name, Rego: rego, EnforcementAction: action, Match: policy.Match{Kinds: []string{"NodePool"}}, Parameters: params}
}

func TestValidateNodePoolPolicies(t *testing.T) {
	heavy := func(np *karpv1.NodePool) { np.Spec.Weight = ptr(int32(90)) }
	unlabelled := func(np *karpv1.NodePool) { np.Labels = nil }
	labelled := func(np *karpv1.NodePool) { np.Labels = map[string]string{"joiner.dev/team": "a"} }
	tests := []struct {
		name         string
		policies     []policy.Policy
		mutate       func(np *karpv1.NodePool)
		wantAllowed  bool
		wantDenials  []string
		wantWarnings []string
		wantDryRun   []string
		wantPrefix   string // for evaluation errors, whose cause is OPA's wording
	}{
		{
			name:        "Deny policy denies with name, message and field",
			policies:    []policy.Policy{testPolicy("max-weight", policy.ActionDeny, regoMaxWeight, map[string]any{"max": 50})},
			mutate:      heavy,
			wantDenials: []string{"[max-weight] weight 90 is above 50; lower spec.weight (field: spec.weight)"},
		},
		{
			name:        "compliant object is admitted",
			policies:    []policy.Policy{testPolicy("max-weight", policy.ActionDeny, regoMaxWeight, map[string]any{"max": 50})},
			mutate:      labelled,
			wantAllowed: true,
		},
		{
			name: "two Deny policies give two lines",
			policies: []policy.Policy{
				testPolicy("max-weight", policy.ActionDeny, regoMaxWeight, map[string]any{"max": 50}),
				testPolicy("require-team", policy.ActionDeny, regoRequireTeam, nil),
			},
			mutate: func(np *karpv1.NodePool) { heavy(np); unlabelled(np) },
			wantDenials: []string{
				"[max-weight] weight 90 is above 50; lower spec.weight (field: spec.weight)",
				"[require-team] NodePool has no joiner.dev/team label; label it with its owning team (field: metadata.labels)",
			},
		},
		{
			name:         "Warn policy admits with a warning",
			policies:     []policy.Policy{testPolicy("require-team", policy.ActionWarn, regoRequireTeam, nil)},
			mutate:       unlabelled,
			wantAllowed:  true,
			wantWarnings: []string{"[require-team] NodePool has no joiner.dev/team label; label it with its owning team (field: metadata.labels)"},
		},
		{
			name:         "a long Warn message is never cut",
			policies:     []policy.Policy{testPolicy("long", policy.ActionWarn, regoLongMessage, nil)},
			mutate:       labelled,
			wantAllowed:  true,
			wantWarnings: []string{"[long] " + strings.TrimSpace(strings.Repeat("consider ", 40))},
		},
		{
			name:        "DryRun policy admits silently and records",
			policies:    []policy.Policy{testPolicy("require-team", policy.ActionDryRun, regoRequireTeam, nil)},
			mutate:      unlabelled,
			wantAllowed: true,
			wantDryRun:  []string{"[require-team] NodePool has no joiner.dev/team label; label it with its owning team (field: metadata.labels)"},
		},
		{
			name: "Deny, Warn and DryRun together",
			policies: []policy.Policy{
				testPolicy("max-weight", policy.ActionDeny, regoMaxWeight, map[string]any{"max": 50}),
				testPolicy("require-team", policy.ActionWarn, regoRequireTeam, nil),
				testPolicy("require-team-dry", policy.ActionDryRun, regoRequireTeam, nil),
			},
			mutate:       func(np *karpv1.NodePool) { heavy(np); unlabelled(np) },
			wantDenials:  []string{"[max-weight] weight 90 is above 50; lower spec.weight (field: spec.weight)"},
			wantWarnings: []string{"[require-team] NodePool has no joiner.dev/team label; label it with its owning team (field: metadata.labels)"},
			wantDryRun:   []string{"[require-team-dry] NodePool has no joiner.dev/team label; label it with its owning team (field: metadata.labels)"},
		},
		{
			name:       "Deny policy that fails to evaluate denies",
			policies:   []policy.Policy{testPolicy("broken", policy.ActionDeny, regoBroken, nil)},
			mutate:     labelled,
			wantPrefix: "[broken] policy evaluation failed: ",
		},
		{
			name:        "Warn policy that fails to evaluate only warns",
			policies:    []policy.Policy{testPolicy("broken", policy.ActionWarn, regoBroken, nil)},
			mutate:      labelled,
			wantAllowed: true,
			wantPrefix:  "[broken] policy evaluation failed: ",
		},
		{
			name:        "policy of another kind does not apply",
			policies:    []policy.Policy{{Name: "pods-only", Rego: regoRequireTeam, Match: policy.Match{Kinds: []string{"Pod"}}}},
			mutate:      unlabelled,
			wantAllowed: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{objects: []client.Object{ec2NodeClass("default")}, policies: tc.policies})
			np := nodePool("general")
			tc.mutate(np)
			resp := e.handle(t, webhooks.PathValidateNodePool, request("NodePool", admissionv1.Create, "", np.Name, np, nil))
			if tc.wantPrefix != "" {
				lines := resp.Warnings
				if !tc.wantAllowed {
					lines = strings.Split(message(resp), "\n")
				}
				if resp.Allowed != tc.wantAllowed || len(lines) != 1 || !strings.HasPrefix(lines[0], tc.wantPrefix) {
					t.Fatalf("allowed=%v message=%q warnings=%q; want allowed=%v and one line starting %q", resp.Allowed, message(resp), resp.Warnings, tc.wantAllowed, tc.wantPrefix)
				}
				if got := e.counter(t, webhooks.MetricPolicyErrors, map[string]string{"policy": "broken", "kind": "NodePool"}); got != 1 {
					t.Fatalf("%s{policy=broken} = %v, want 1", webhooks.MetricPolicyErrors, got)
				}
				return
			}
			assertDecision(t, resp, tc.wantAllowed || len(tc.wantDenials) == 0, tc.wantDenials, tc.wantWarnings)
			var dry []string
			for _, v := range e.dryRun {
				dry = append(dry, v.String())
			}
			if !equalStrings(dry, tc.wantDryRun) {
				t.Fatalf("dry-run hook got %q, want %q", dry, tc.wantDryRun)
			}
			for _, line := range tc.wantDryRun {
				name := strings.TrimPrefix(line[:strings.IndexByte(line, ']')], "[")
				if got := e.counter(t, webhooks.MetricPolicyViolations, map[string]string{"policy": name, "action": "DryRun", "kind": "NodePool"}); got != 1 {
					t.Fatalf("%s{policy=%s,action=DryRun} = %v, want 1", webhooks.MetricPolicyViolations, name, got)
				}
			}
		})
	}
}

func TestValidateNodePoolRequestHandling(t *testing.T) {
	bad := nodePool("general")
	bad.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr("0 25 * * *"), Duration: &metav1.Duration{Duration: 3600e9}}}
	badLine := `spec.disruption.budgets[0].schedule: "0 25 * * *" is not a valid cron expression (end of range (25) above maximum (23))` + cronFix
	good := nodePool("general")
	contradicting := bad.DeepCopy()
	contradicting.Spec.Template.Spec.Requirements = append(contradicting.Spec.Template.Spec.Requirements, req("joiner.dev/team", corev1.NodeSelectorOpIn, "b"))
	contradictionLine := "spec.template.spec.requirements[3]: joiner.dev/team In [b] contradicts spec.template.metadata.labels[joiner.dev/team] (joiner.dev/team=a); no node can satisfy both, remove one or change its values"
	deleting := bad.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	deleting.Finalizers = []string{"karpenter.sh/termination"}

	tests := []struct {
		name         string
		req          func() admissionRequest
		wantAllowed  bool
		wantDenials  []string
		wantWarnings []string
		wantCode     int32
	}{
		{
			name:        "update that introduces a problem is denied",
			req:         func() admissionRequest { return updateReq(bad, good) },
			wantDenials: []string{badLine},
		},
		{
			name:         "update of an object that already had the problem is admitted with a warning",
			req:          func() admissionRequest { return updateReq(bad, bad) },
			wantAllowed:  true,
			wantWarnings: []string{"pre-existing: spec.disruption.budgets[0].schedule: \"0 25 * * *\" is not a valid cron expression (end of range (25) above maximum (23)); use 5 fields: minute hour day-of-month month day-of-week"},
		},
		{
			name:         "update keeps old problems as warnings and denies new ones",
			req:          func() admissionRequest { return updateReq(contradicting, bad) },
			wantDenials:  []string{contradictionLine},
			wantWarnings: []string{"pre-existing: spec.disruption.budgets[0].schedule: \"0 25 * * *\" is not a valid cron expression (end of range (25) above maximum (23)); use 5 fields: minute hour day-of-month month day-of-week"},
		},
		{
			name:        "object being deleted is not checked",
			req:         func() admissionRequest { return updateReq(deleting, bad) },
			wantAllowed: true,
		},
		{
			name: "Joiner's own service account is exempt",
			req: func() admissionRequest {
				r := request("NodePool", admissionv1.Create, "", "general", bad, nil)
				r.UserInfo.Username = webhooks.ServiceAccountUsername
				return r
			},
			wantAllowed: true,
		},
		{
			name:        "delete is admitted",
			req:         func() admissionRequest { return request("NodePool", admissionv1.Delete, "", "general", nil, bad) },
			wantAllowed: true,
		},
		{
			name:     "request for another kind is rejected as a bad request",
			req:      func() admissionRequest { return request("NodeClaim", admissionv1.Create, "", "general", good, nil) },
			wantCode: 400,
		},
		{
			name: "object that is not JSON is rejected as a bad request",
			req: func() admissionRequest {
				return request("NodePool", admissionv1.Create, "", "general", []byte("{not json"), nil)
			},
			wantCode: 400,
		},
		{
			name: "object of the wrong shape is rejected as a bad request",
			req: func() admissionRequest {
				return request("NodePool", admissionv1.Create, "", "general", `{"spec":{"weight":"heavy"}}`, nil)
			},
			wantCode: 400,
		},
		{
			name:     "update without an old object is rejected as a bad request",
			req:      func() admissionRequest { return request("NodePool", admissionv1.Update, "", "general", good, nil) },
			wantCode: 400,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{objects: []client.Object{ec2NodeClass("default")}})
			resp := e.handle(t, webhooks.PathValidateNodePool, tc.req())
			if tc.wantCode != 0 {
				if resp.Allowed || resp.Result == nil || resp.Result.Code != tc.wantCode {
					t.Fatalf("response %+v, want a rejection with code %d", resp.AdmissionResponse, tc.wantCode)
				}
				return
			}
			assertDecision(t, resp, tc.wantAllowed, tc.wantDenials, tc.wantWarnings)
		})
	}
}

func updateReq(obj, old *karpv1.NodePool) admissionRequest {
	return request("NodePool", admissionv1.Update, "", obj.Name, obj, old)
}
