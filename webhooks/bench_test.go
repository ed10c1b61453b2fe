package webhooks_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

// benchRego are policy bodies a production cluster might run against NodePools; benchPolicies cycles
// through them under distinct packages. The benchmark NodePool complies with all of them, so every
// policy runs to the end.
func benchRego() []string {
	return []string{
		`violation contains {"msg": "weight too high", "field": "spec.weight"} if { input.review.object.spec.weight > input.parameters.maxWeight }`,
		`violation contains {"msg": "no team label", "field": "metadata.labels"} if { not input.review.object.metadata.labels["joiner.dev/team"] }`,
		`violation contains {"msg": sprintf("arch %s not allowed", [v]), "field": sprintf("spec.template.spec.requirements[%d]", [i])} if {
	some i, r in input.review.object.spec.template.spec.requirements
	r.key == "kubernetes.io/arch"
	some v in r.values
	not v in {"amd64", "arm64"}
}`,
		`violation contains {"msg": "no disruption budget", "field": "spec.disruption.budgets"} if { count(object.get(input.review.object, ["spec", "disruption", "budgets"], [])) == 0 }`,
		`violation contains {"msg": "cpu limit too high", "field": "spec.limits.cpu"} if { units.parse(input.review.object.spec.limits.cpu) > input.parameters.maxCPU }`,
		`violation contains {"msg": "category not allowed", "field": sprintf("spec.template.spec.requirements[%d]", [i])} if {
	some i, r in input.review.object.spec.template.spec.requirements
	r.key == "karpenter.k8s.aws/instance-category"
	some v in r.values
	not v in {"c", "m", "r"}
}`,
		`violation contains {"msg": "nodes never expire", "field": "spec.template.spec.expireAfter"} if { input.review.object.spec.template.spec.expireAfter == "Never" }`,
		`violation contains {"msg": sprintf("taint %s not allowed", [t.key]), "field": sprintf("spec.template.spec.taints[%d]", [i])} if {
	some i, t in object.get(input.review.object, ["spec", "template", "spec", "taints"], [])
	not startswith(t.key, "joiner.dev/")
}`,
	}
}

func benchPolicies(n int) []policy.Policy {
	bodies := benchRego()
	out := make([]policy.Policy, n)
	for i := range out {
		action := policy.ActionDeny
		switch i % 10 {
		case 8:
			action = policy.ActionWarn
		case 9:
			action = policy.ActionDryRun
		}
		out[i] = policy.Policy{
			Name:              fmt.Sprintf("bench-%02d", i),
			Generation:        1,
			Rego:              fmt.Sprintf("package joiner.bench.p%d\n\n%s\n", i, bodies[i%len(bodies)]),
			EnforcementAction: action,
			Match:             policy.Match{Kinds: []string{"NodePool"}},
			Parameters:        map[string]any{"maxWeight": 50, "maxCPU": 4000},
		}
	}
	return out
}

// benchCatalog builds a catalog of the size of a real region: 32 families in 3 categories, 2
// architectures, 9 sizes each (576 instance types), offered in 3 zones on spot and on-demand.
func benchCatalog() []webhooks.InstanceTypeLabels {
	var out []webhooks.InstanceTypeLabels
	sizes := []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "metal"}
	for f := range 32 {
		category := []string{"c", "m", "r"}[f%3]
		arch, suffix := "amd64", ""
		if f%2 == 1 {
			arch, suffix = "arm64", "g"
		}
		family := fmt.Sprintf("%s%d%s", category, 5+f/6, suffix)
		for s, size := range sizes {
			out = append(out, webhooks.InstanceTypeLabels{
				corev1.LabelInstanceTypeStable: {family + "." + size},
				corev1.LabelArchStable:         {arch},
				corev1.LabelOSStable:           {"linux"},
				awsv1.LabelInstanceCategory:    {category},
				awsv1.LabelInstanceFamily:      {family},
				awsv1.LabelInstanceGeneration:  {fmt.Sprint(5 + f/6)},
				awsv1.LabelInstanceCPU:         {fmt.Sprint(2 << s)},
				corev1.LabelTopologyZone:       {"eu-west-1a", "eu-west-1b", "eu-west-1c"},
				karpv1.CapacityTypeLabelKey:    {"spot", "on-demand"},
			})
		}
	}
	return out
}

// benchNodePool is a production NodePool: seven requirements, a taint, two budgets, limits and status.
func benchNodePool() *karpv1.NodePool {
	np := nodePool("team-a-general")
	np.Labels = map[string]string{"joiner.dev/team": "a", "joiner.dev/environment": "production"}
	np.Spec.Template.Labels = map[string]string{"joiner.dev/team": "a", "workload": "general"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
		req(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
		req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand"),
		req(awsv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"),
		req(awsv1.LabelInstanceGeneration, corev1.NodeSelectorOpGt, "5"),
		req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "eu-west-1a", "eu-west-1b", "eu-west-1c"),
		req("joiner.dev/team", corev1.NodeSelectorOpIn, "a"),
	}
	np.Spec.Template.Spec.ExpireAfter = mustDuration("720h")
	np.Spec.Disruption.Budgets = []karpv1.Budget{
		{Nodes: "10%"},
		{Nodes: "0", Schedule: ptr("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 8 * time.Hour}, Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
	}
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400"), corev1.ResourceMemory: resource.MustParse("1600Gi")}
	np.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("48"), corev1.ResourceMemory: resource.MustParse("192Gi")}
	return np
}

// BenchmarkValidateNodePool measures a full NodePool validation as the webhook serves it: decoding, the
// semantic checks (cron, requirement reasoning, a 576-type catalog, taints, node class lookup, limits)
// and 50 policies. It reports the p50 and p99 latency of single requests.
func BenchmarkValidateNodePool(b *testing.B) {
	catalog := benchCatalog()
	e := newEnv(b, envOptions{
		objects:  []client.Object{ec2NodeClass("default")},
		policies: benchPolicies(50),
		instanceTypes: webhooks.InstanceTypeListerFunc(func(context.Context, *karpv1.NodePool) ([]webhooks.InstanceTypeLabels, error) {
			return catalog, nil
		}),
	})
	h := e.handlers[webhooks.PathValidateNodePool]
	np := benchNodePool()
	r := request("NodePool", admissionv1.Update, "", np.Name, np, np)
	ctx := context.Background()
	if resp := h.Handle(ctx, r); !resp.Allowed || len(resp.Warnings) != 0 {
		b.Fatalf("benchmark NodePool is not compliant: %q %q", message(resp), resp.Warnings)
	}
	latencies := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		resp := h.Handle(ctx, r)
		latencies = append(latencies, time.Since(start))
		if !resp.Allowed {
			b.Fatalf("denied: %q", message(resp))
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
