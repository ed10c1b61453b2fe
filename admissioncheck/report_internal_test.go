package admissioncheck

import (
	"reflect"
	"testing"
)

func TestFieldOf(t *testing.T) {
	tests := []struct{ line, want string }{
		{"spec.disruption.budgets[0].schedule: \"0 25 * * *\" is not a valid cron expression", "spec.disruption.budgets[0].schedule"},
		{"spec.template.metadata.labels[kubernetes.io/arch]: arm64 contradicts ...", "spec.template.metadata.labels[kubernetes.io/arch]"},
		{"pre-existing: spec.limits.cpu: 10 is below current usage 20", "spec.limits.cpu"},
		{"[cpu-cap] spec.limits.cpu 500 exceeds the cap of 100 (field: spec.limits.cpu)", "spec.limits.cpu"},
		{"[team] NodePool has no team label", ""},
		{"could not check NodePool tenancy of the pod: boom; retry", ""},
		{"ProvisioningPolicies could not be evaluated for NodePool \"a\": boom", ""},
	}
	for _, tt := range tests {
		if got := fieldOf(tt.line); got != tt.want {
			t.Errorf("fieldOf(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestWebhookDenial(t *testing.T) {
	tests := []struct {
		message   string
		wantName  string
		wantLines []string
	}{
		{`admission webhook "a.joiner.dev" denied the request: one` + "\n" + `two`, "a.joiner.dev", []string{"one", "two"}},
		{`admission webhook "a.joiner.dev" denied the request without explanation`, "a.joiner.dev", []string{`admission webhook "a.joiner.dev" denied the request without explanation`}},
		{"something else", ByWebhook, []string{"something else"}},
	}
	for _, tt := range tests {
		name, lines := webhookDenial(tt.message)
		if name != tt.wantName || !reflect.DeepEqual(lines, tt.wantLines) {
			t.Errorf("webhookDenial(%q) = %q, %q; want %q, %q", tt.message, name, lines, tt.wantName, tt.wantLines)
		}
	}
}
