package admissioncheck_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/crdvalidation"
	"github.com/joiner-dev/joiner/policy"
)

// manifest decodes a YAML manifest as the CLI's loader would.
func manifest(t testing.TB, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// localNodePool renders a NodePool on the LocalNodeClass "local" with extra lines appended to its
// template spec (indented by six spaces) and to its spec (indented by two).
func localNodePool(name, templateExtra, specExtra string) string {
	return `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ` + name + `
spec:
  limits: {cpu: "10"}
  template:
    spec:
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: local}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
` + templateExtra + specExtra
}

const localClass = `apiVersion: joiner.dev/v1alpha1
kind: LocalNodeClass
metadata: {name: local}
`

var cpuCap = policy.Policy{
	Name:  "cpu-cap",
	Match: policy.Match{Kinds: []string{policy.KindNodePool}},
	Rego: `package test.cpucap

violation contains {"msg": "spec.limits.cpu above 100", "field": "spec.limits.cpu"} if {
	to_number(input.review.object.spec.limits.cpu) > 100
}
`,
}

var teamLabel = policy.Policy{
	Name:              "team-label",
	EnforcementAction: policy.ActionWarn,
	Match:             policy.Match{Kinds: []string{policy.KindNodePool}},
	Rego: `package test.teamlabel

violation contains {"msg": "add a team label", "field": "metadata.labels"} if {
	not input.review.object.metadata.labels.team
}
`,
}

func newChecker(t testing.TB, opts admissioncheck.Options) *admissioncheck.Checker {
	t.Helper()
	c, err := admissioncheck.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		opts admissioncheck.Options
		// object is checked together with the LocalNodeClass "local" and, when set, old.
		object, old string
		// wantError is the apiserver's whole answer; "" means admitted.
		wantError    string
		wantProblems []admissioncheck.Problem
		wantSkipped  bool
	}{
		{name: "a valid NodePool is admitted", object: localNodePool("ok", "", "")},
		{
			name:      "schema",
			object:    localNodePool("heavy", "", "  weight: 101\n"),
			wantError: `NodePool.karpenter.sh "heavy" is invalid: spec.weight: Invalid value: 101: spec.weight in body should be less than or equal to 100`,
			wantProblems: []admissioncheck.Problem{{Action: "deny", By: "apiserver", Field: "spec.weight",
				Message: "spec.weight: Invalid value: 101: spec.weight in body should be less than or equal to 100"}},
		},
		{
			name:      "CEL rule",
			object:    localNodePool("no-values", "      - {key: karpenter.sh/capacity-type, operator: In, values: []}\n", ""),
			wantError: `NodePool.karpenter.sh "no-values" is invalid: spec.template.spec.requirements: Invalid value: requirements with operator 'In' must have a value defined`,
			wantProblems: []admissioncheck.Problem{{Action: "deny", By: "apiserver", Field: "spec.template.spec.requirements",
				Message: "spec.template.spec.requirements: Invalid value: requirements with operator 'In' must have a value defined"}},
		},
		{
			name:      "unknown fields are refused as kubectl's strict validation does",
			object:    localNodePool("colour", "      colour: blue\n", ""),
			wantError: `NodePool in version "v1" cannot be handled as a NodePool: strict decoding error: unknown field "spec.template.spec.colour"`,
			wantProblems: []admissioncheck.Problem{{Action: "deny", By: "apiserver", Field: "spec.template.spec.colour",
				Message: `unknown field "spec.template.spec.colour"`}},
		},
		{
			name:   "unknown fields only warn under Warn",
			opts:   admissioncheck.Options{FieldValidation: crdvalidation.FieldValidationWarn},
			object: localNodePool("colour", "      colour: blue\n", ""),
			wantProblems: []admissioncheck.Problem{{Action: "warn", By: "apiserver", Field: "spec.template.spec.colour",
				Message: `unknown field "spec.template.spec.colour"`}},
		},
		{
			name:   "the defaulting webhook completes nodeClassRef before the schema is checked",
			object: strings.Replace(localNodePool("group-only", "", ""), "kind: LocalNodeClass, ", "", 1),
		},
		{
			name:      "semantic checks of the validating webhook",
			object:    localNodePool("contradiction", "      - {key: kubernetes.io/arch, operator: NotIn, values: [amd64]}\n", ""),
			wantError: "admission webhook \"nodepool.validation.joiner.dev\" denied the request: spec.template.spec.requirements[1]: kubernetes.io/arch NotIn [amd64] contradicts spec.template.spec.requirements[0] (kubernetes.io/arch In [amd64]); no node can satisfy both",
		},
		{
			name:      "the local provider's catalog",
			object:    localNodePool("unsatisfiable", "      - {key: node.kubernetes.io/instance-type, operator: In, values: [m9z.huge]}\n", ""),
			wantError: "admission webhook \"nodepool.validation.joiner.dev\" denied the request: spec.template.spec.requirements[1]: no instance type in the catalog satisfies node.kubernetes.io/instance-type In [m9z.huge]",
			wantProblems: []admissioncheck.Problem{{Action: "deny", By: "nodepool.validation.joiner.dev", Field: "spec.template.spec.requirements[1]",
				Message: "spec.template.spec.requirements[1]: no instance type in the catalog satisfies node.kubernetes.io/instance-type In [m9z.huge]"}},
		},
		{
			name:   "a node class the objects do not hold is only a warning",
			object: strings.Replace(localNodePool("elsewhere", "", ""), "name: local}", "name: elsewhere}", 1),
			wantProblems: []admissioncheck.Problem{
				{Action: "warn", By: "nodepool.validation.joiner.dev", Field: "spec.template.spec.requirements", Message: `spec.template.spec.requirements: not checked against the instance-type catalog: instance types of NodePool elsewhere: get instance types: node class not ready: nodepool elsewhere: LocalNodeClass "elsewhere" not found; create it or fix nodeClassRef.name`},
				{Action: "warn", By: "nodepool.validation.joiner.dev", Field: "spec.template.spec.nodeClassRef", Message: `spec.template.spec.nodeClassRef: LocalNodeClass "elsewhere" does not exist; create it, or the NodePool stays NotReady`},
			},
		},
		{
			name:      "Deny and Warn policies",
			opts:      admissioncheck.Options{Policies: []policy.Policy{cpuCap, teamLabel}},
			object:    strings.Replace(localNodePool("big", "", ""), `cpu: "10"`, `cpu: "500"`, 1),
			wantError: `admission webhook "nodepool.validation.joiner.dev" denied the request: [cpu-cap] spec.limits.cpu above 100 (field: spec.limits.cpu)`,
			wantProblems: []admissioncheck.Problem{
				{Action: "deny", By: "nodepool.validation.joiner.dev", Field: "spec.limits.cpu", Policy: "cpu-cap", Message: "[cpu-cap] spec.limits.cpu above 100 (field: spec.limits.cpu)"},
				{Action: "warn", By: "nodepool.validation.joiner.dev", Field: "metadata.labels", Policy: "team-label", Message: "[team-label] add a team label (field: metadata.labels)"},
			},
		},
		{
			name:      "an update breaking a transition rule",
			old:       localNodePool("moving", "", ""),
			object:    strings.Replace(localNodePool("moving", "", ""), "kind: LocalNodeClass", "kind: OtherNodeClass", 1),
			wantError: `NodePool.karpenter.sh "moving" is invalid: spec.template.spec.nodeClassRef: Invalid value: nodeClassRef.kind is immutable`,
		},
		{name: "an update within the rules", old: localNodePool("growing", "", ""), object: strings.Replace(localNodePool("growing", "", ""), `cpu: "10"`, `cpu: "20"`, 1)},
		{
			name:         "a legacy Provisioner",
			object:       "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\n",
			wantError:    "karpenter.sh/v1alpha5 Provisioner is not served; run `joiner convert`",
			wantProblems: []admissioncheck.Problem{{Action: "error", By: "kind", Message: "karpenter.sh/v1alpha5 Provisioner is not served; run `joiner convert`"}},
		},
		{
			name:      "a legacy AWSNodeTemplate",
			object:    "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: old}\n",
			wantError: "karpenter.k8s.aws/v1alpha1 AWSNodeTemplate is not served; run `joiner convert`",
		},
		{
			name:      "a v1beta1 NodePool",
			object:    "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\n",
			wantError: "karpenter.sh/v1beta1 NodePool is not served by this cluster's CRDs; run `joiner convert`",
		},
		{
			name:      "a v1beta1 EC2NodeClass",
			object:    "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: old}\n",
			wantError: "karpenter.k8s.aws/v1beta1 EC2NodeClass is not served by this cluster's CRDs; run `joiner convert`",
		},
		{
			name:      "a kind Joiner's groups do not define",
			object:    "apiVersion: karpenter.sh/v1\nkind: Machine\nmetadata: {name: m}\n",
			wantError: "karpenter.sh/v1 Machine is not served by this cluster's CRDs; the karpenter.sh kinds are karpenter.sh/v1 NodeClaim, karpenter.sh/v1 NodePool",
		},
		{
			name:      "a kind outside Joiner's groups, with StrictKinds",
			opts:      admissioncheck.Options{StrictKinds: true},
			object:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n",
			wantError: "v1 ConfigMap is not a kind Joiner judges",
		},
		{
			name:        "a kind outside Joiner's groups is skipped",
			object:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n",
			wantSkipped: true,
		},
		{name: "a Namespace is only read", object: "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n", wantSkipped: true},
		{
			name:      "a LocalNodeClass zone outside its region",
			object:    "apiVersion: joiner.dev/v1alpha1\nkind: LocalNodeClass\nmetadata: {name: west}\nspec: {region: us-east-1, zones: [us-west-2a]}\n",
			wantError: `admission webhook "localnodeclass.validation.joiner.dev" denied the request: spec.zones[0]: "us-west-2a" is not a zone of region "us-east-1"; use zones named us-east-1 followed by a letter, such as us-east-1a, or change spec.region`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChecker(t, tt.opts)
			item := admissioncheck.Item{Source: "case.yaml#1", Object: manifest(t, tt.object)}
			if tt.old != "" {
				item.Old = manifest(t, tt.old)
			}
			rep, err := c.Check(context.Background(), []admissioncheck.Item{item, {Source: "class.yaml#1", Object: manifest(t, localClass)}})
			if err != nil {
				t.Fatal(err)
			}
			res := rep.Objects[0]
			if res.Skipped != tt.wantSkipped {
				t.Fatalf("skipped = %v, want %v", res.Skipped, tt.wantSkipped)
			}
			if tt.wantSkipped {
				return
			}
			if res.Allowed != (tt.wantError == "") {
				t.Fatalf("allowed = %v, error %q; want error %q", res.Allowed, res.Error, tt.wantError)
			}
			if !strings.HasPrefix(res.Error, tt.wantError) {
				t.Errorf("error:\n%s\nwant:\n%s", res.Error, tt.wantError)
			}
			if tt.wantProblems != nil && !equalProblems(res.Problems, tt.wantProblems) {
				t.Errorf("problems:\n%+v\nwant:\n%+v", res.Problems, tt.wantProblems)
			}
			if tt.wantProblems == nil && tt.wantError == "" && len(res.Problems) > 0 {
				t.Errorf("unexpected problems: %+v", res.Problems)
			}
			if res.Allowed && res.Object == nil {
				t.Error("an admitted object has no stored form")
			}
		})
	}
}

func equalProblems(a, b []admissioncheck.Problem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCheckStoresTheObjectWithEveryDefault(t *testing.T) {
	c := newChecker(t, admissioncheck.Options{})
	rep, err := c.Check(context.Background(), []admissioncheck.Item{{Source: "np", Object: manifest(t, localNodePool("defaults", "", ""))}})
	if err != nil {
		t.Fatal(err)
	}
	obj := rep.Objects[0].Object
	spec := obj["spec"].(map[string]any)
	disruption := spec["disruption"].(map[string]any)
	if disruption["consolidateAfter"] != "0s" || disruption["consolidationPolicy"] != "WhenEmptyOrUnderutilized" {
		t.Errorf("disruption = %v, want the schema's defaults", disruption)
	}
	if got := spec["template"].(map[string]any)["spec"].(map[string]any)["expireAfter"]; got != "720h" {
		t.Errorf("expireAfter = %v, want 720h", got)
	}
}

func TestCheckPodTenancyReadsTheNamespacesAmongTheObjects(t *testing.T) {
	c := newChecker(t, admissioncheck.Options{})
	namespace := manifest(t, `apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {joiner.dev/nodepools: bound}
  annotations: {joiner.dev/nodepools: pool-a}
`)
	pod := func(ns, pool string) map[string]any {
		return manifest(t, `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: `+ns+`}
spec:
  nodeSelector: {karpenter.sh/nodepool: `+pool+`}
  containers: [{name: c, image: pause}]
`)
	}
	rep, err := c.Check(context.Background(), []admissioncheck.Item{
		{Source: "ns", Object: namespace},
		{Source: "bound", Object: pod("team-a", "pool-b")},
		{Source: "unbound", Object: pod("elsewhere", "pool-b")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Objects[0].Skipped {
		t.Error("the Namespace was judged; it is only read")
	}
	if bound := rep.Objects[1]; bound.Allowed || !strings.Contains(bound.Error, `admission webhook "pod.tenancy.joiner.dev" denied the request: spec.nodeSelector[karpenter.sh/nodepool]: NodePool pool-b is not bound to namespace "team-a"`) {
		t.Errorf("a Pod of team-a selecting pool-b: allowed=%v error %q", bound.Allowed, bound.Error)
	}
	if unbound := rep.Objects[2]; !unbound.Allowed {
		t.Errorf("a Pod of a namespace the Pod webhooks do not select was refused: %s", unbound.Error)
	}
}

func TestCheckFailsOnAPolicyThatDoesNotCompile(t *testing.T) {
	_, err := admissioncheck.New(context.Background(), admissioncheck.Options{Policies: []policy.Policy{{Name: "broken", Rego: "package x\n\nviolation contains"}}})
	if err == nil || !strings.Contains(err.Error(), "compile policies") {
		t.Fatalf("err = %v, want a compile error", err)
	}
}
