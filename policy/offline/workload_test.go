package offline_test

import (
	"testing"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
)

// TestCheckJudgesWorkloadTemplates: the policy check (admissioncheck's policy-only mode) judges a Deployment's pod template with the
// policies that opt in, and reports the field as a path in the Deployment.
func TestCheckJudgesWorkloadTemplates(t *testing.T) {
	rego := `package nolatest

violation contains {"msg": "pin the image", "field": sprintf("spec.containers[%d].image", [i])} if {
	some i, c in input.review.object.spec.containers
	endswith(c.image, ":latest")
}
`
	deployment := offline.Object{Source: "web", Content: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "team-a"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx:latest"}}}}}}}
	tests := []struct {
		name      string
		workloads bool
		want      []string
	}{
		{"opted in", true, []string{"[no-latest] pin the image (field: spec.template.spec.containers[0].image)"}},
		{"not opted in", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy.Policy{Name: "no-latest", Rego: rego, Match: policy.Match{Kinds: []string{"Pod"}, WorkloadTemplates: tt.workloads}}
			rep, _ := checkObjects(t, []policy.Policy{p}, []offline.Object{deployment})
			var got []string
			for _, pr := range rep.Objects[0].Problems {
				got = append(got, pr.Message)
			}
			if len(got) != len(tt.want) || (len(got) == 1 && got[0] != tt.want[0]) {
				t.Fatalf("violations = %q, want %q", got, tt.want)
			}
		})
	}
}
