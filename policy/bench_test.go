package policy_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

// BenchmarkEvaluate measures one Evaluate of a NodePool CREATE against 1, 10 and 50 policies drawn from the
// library, with 20 NodePools in the inventory, and reports the p50 and p99 latency of single evaluations.
func BenchmarkEvaluate(b *testing.B) {
	ctx := context.Background()
	var inventory []map[string]any
	for i := range 20 {
		inventory = append(inventory, benchNodePool(fmt.Sprintf("pool-%02d", i), []string{"team-a", "team-b", "platform"}[i%3], "10"))
	}
	review, err := policy.NewReview(policy.OperationCreate, benchNodePool("new-pool", "team-a", "50"), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			e := policy.New(policy.Options{})
			if err := e.SetPolicies(ctx, benchPolicies(b, n)); err != nil {
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
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := e.Evaluate(ctx, review); err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(durations)
			b.ReportMetric(float64(percentile(durations, 0.50).Microseconds()), "p50-us")
			b.ReportMetric(float64(percentile(durations, 0.99).Microseconds()), "p99-us")
		})
	}
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
