package policy_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
)

// benchNodePool is a realistic production NodePool as the webhook receives it (unstructured JSON form),
// compliant with every library policy.
func benchNodePool(name, team string, cpu string) map[string]any {
	return map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodePool",
		"metadata": map[string]any{
			"name":              name,
			"uid":               "5f0c7a4e-9a63-4d3e-8a0e-1f3c2d7b9e10",
			"resourceVersion":   "918273",
			"generation":        int64(4),
			"creationTimestamp": "2026-05-01T10:00:00Z",
			"labels":            map[string]any{"joiner.dev/team": team, "joiner.dev/environment": "production"},
			"annotations":       map[string]any{"karpenter.sh/nodepool-hash": "6821555240594823858", "karpenter.sh/nodepool-hash-version": "v3"},
		},
		"spec": map[string]any{
			"weight": int64(10),
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"joiner.dev/team": team, "workload": "general"}},
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
					"requirements": []any{
						map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64", "arm64"}},
						map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}},
						map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand", "spot"}},
						map[string]any{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": []any{"c", "m", "r"}},
						map[string]any{"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": []any{"5"}},
						map[string]any{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []any{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
						map[string]any{"key": "joiner.dev/team", "operator": "In", "values": []any{team}},
					},
					"taints":                 []any{map[string]any{"key": "joiner.dev/team", "value": team, "effect": "NoSchedule"}},
					"expireAfter":            "720h",
					"terminationGracePeriod": "48h",
				},
			},
			"disruption": map[string]any{
				"consolidationPolicy": "WhenEmptyOrUnderutilized",
				"consolidateAfter":    "1m",
				"budgets": []any{
					map[string]any{"nodes": "10%"},
					map[string]any{"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": []any{"Drifted"}},
				},
			},
			"limits": map[string]any{"cpu": cpu, "memory": "400Gi"},
		},
		"status": map[string]any{
			"resources": map[string]any{"cpu": "48", "memory": "192Gi", "nodes": "6", "pods": "660"},
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "2026-05-01T10:00:05Z"},
				map[string]any{"type": "ValidationSucceeded", "status": "True", "reason": "ValidationSucceeded", "lastTransitionTime": "2026-05-01T10:00:01Z"},
				map[string]any{"type": "NodeClassReady", "status": "True", "reason": "NodeClassReady", "lastTransitionTime": "2026-05-01T10:00:02Z"},
			},
		},
	}
}

// benchPolicies returns n distinct policies cycling through the library: each copy has its own name and
// its own parameters object (the library parameters plus an instance number), as when a team instantiates
// the same policy several times.
func benchPolicies(tb testing.TB, n int) []policy.Policy {
	tb.Helper()
	loaded, err := offline.LoadPolicies("library")
	if err != nil {
		tb.Fatal(err)
	}
	lib := offline.Policies(loaded)
	out := make([]policy.Policy, n)
	for i := range out {
		p := lib[i%len(lib)]
		p.Name = fmt.Sprintf("%s-%02d", p.Name, i)
		p.Parameters = maps.Clone(p.Parameters)
		p.Parameters["instance"] = int64(i)
		out[i] = p
	}
	return out
}

// simplePolicies returns n distinct single-rule policies of the kind most Gatekeeper-style constraints are:
// a required label, allowed values of a requirement, a numeric cap. The NodePool satisfies all of them.
func simplePolicies(n int) []policy.Policy {
	templates := []struct {
		rego   string
		params func(i int) map[string]any
	}{
		{`package bench.required_label

violation contains {"msg": sprintf("label %s is required", [input.parameters.key]), "field": "metadata.labels"} if {
	not input.review.object.metadata.labels[input.parameters.key]
}
`, func(i int) map[string]any {
			return map[string]any{"key": []string{"joiner.dev/team", "joiner.dev/environment"}[i%2]}
		}},
		{`package bench.allowed_values

violation contains {"msg": sprintf("%s value %s is not allowed", [req.key, v]), "field": sprintf("spec.template.spec.requirements[%d]", [i])} if {
	some i, req in input.review.object.spec.template.spec.requirements
	req.key == input.parameters.key
	some v in req.values
	not v in input.parameters.allowed
}
`, func(i int) map[string]any {
			keys := []string{"kubernetes.io/arch", "kubernetes.io/os", "topology.kubernetes.io/zone"}
			return map[string]any{"key": keys[i%3], "allowed": []any{"amd64", "arm64", "linux", "eu-west-1a", "eu-west-1b", "eu-west-1c", fmt.Sprint("extra-", i)}}
		}},
		{`package bench.weight_cap

violation contains {"msg": "weight too high", "field": "spec.weight"} if {
	input.review.object.spec.weight > input.parameters.max
}
`, func(i int) map[string]any { return map[string]any{"max": int64(50 + i)} }},
	}
	out := make([]policy.Policy, n)
	for i := range out {
		t := templates[i%len(templates)]
		out[i] = policy.Policy{Name: fmt.Sprintf("simple-%02d", i), Rego: t.rego, Parameters: t.params(i), Match: policy.Match{Kinds: []string{"NodePool"}}}
	}
	return out
}

// BenchmarkEvaluate measures one Evaluate of a NodePool CREATE against 1, 10 and 50 policies, with 20
// NodePools in the inventory, and reports the p50 and p99 latency of single evaluations and the CPU time
// per evaluation. Two policy mixes are measured:
//   - library: the ready policies of policy/library, cycled (cpu-limit first; it scans the inventory);
//   - single-rule: one-rule object checks (required label, allowed values, numeric cap).
func BenchmarkEvaluate(b *testing.B) {
	var inventory []map[string]any
	for i := range 20 {
		inventory = append(inventory, benchNodePool(fmt.Sprintf("pool-%02d", i), []string{"team-a", "team-b", "platform"}[i%3], "10"))
	}
	review, err := policy.NewReview(policy.OperationCreate, benchNodePool("new-pool", "team-a", "50"), nil)
	if err != nil {
		b.Fatal(err)
	}
	mixes := []struct {
		name     string
		policies func(n int) []policy.Policy
	}{
		{"library", func(n int) []policy.Policy { return benchPolicies(b, n) }},
		{"single-rule", simplePolicies},
	}
	for _, mix := range mixes {
		for _, n := range []int{1, 10, 50} {
			b.Run(fmt.Sprintf("%s/policies=%d", mix.name, n), func(b *testing.B) {
				benchmarkEvaluate(b, policy.Options{}, mix.policies(n), inventory, review)
			})
		}
	}
}

// BenchmarkEvaluateMemoryBudget measures what watching the heap during evaluations costs: the library mix
// at 10 policies with the default memory budget and with the budget disabled.
func BenchmarkEvaluateMemoryBudget(b *testing.B) {
	var inventory []map[string]any
	for i := range 20 {
		inventory = append(inventory, benchNodePool(fmt.Sprintf("pool-%02d", i), []string{"team-a", "team-b", "platform"}[i%3], "10"))
	}
	review, err := policy.NewReview(policy.OperationCreate, benchNodePool("new-pool", "team-a", "50"), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		budget int64
	}{{"budget=default", 0}, {"budget=off", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			benchmarkEvaluate(b, policy.Options{MemoryBudget: bc.budget}, benchPolicies(b, 10), inventory, review)
		})
	}
}

func benchmarkEvaluate(b *testing.B, opts policy.Options, policies []policy.Policy, inventory []map[string]any, review policy.Review) {
	ctx := context.Background()
	e := policy.New(opts)
	if err := e.SetPolicies(ctx, policies); err != nil {
		b.Fatal(err)
	}
	if err := e.SetInventory(ctx, inventory); err != nil {
		b.Fatal(err)
	}
	// Sanity: the NodePool is compliant, so the benchmark measures full evaluation, not errors.
	if vs, err := e.Evaluate(ctx, review); err != nil || len(vs) != 0 {
		b.Fatalf("want a compliant NodePool, got %v %v", vs, err)
	}
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	cpuBefore := processCPU(b)
	for b.Loop() {
		start := time.Now()
		if _, err := e.Evaluate(ctx, review); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	// CPU time per evaluation (all goroutines, GC included) tells compute cost apart from waiting for a core
	// on a shared machine.
	b.ReportMetric(float64((processCPU(b)-cpuBefore).Microseconds())/float64(len(durations)), "cpu-us/op")
	slices.Sort(durations)
	b.ReportMetric(float64(percentile(durations, 0.50).Microseconds()), "p50-us")
	b.ReportMetric(float64(percentile(durations, 0.99).Microseconds()), "p99-us")
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// processCPU returns the user and system CPU time the process has used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
