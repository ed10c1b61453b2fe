package main

import "testing"

// TestPlanForExpectedPodsGate: Joiner's own PlanForExpectedPods gate is off by default and reaches
// controllers.Options.PlanForExpectedPods by --feature-gates and by FEATURE_GATES.
func TestPlanForExpectedPodsGate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want bool
	}{
		{name: "off by default"},
		{name: "on by flag", args: []string{"--feature-gates=PlanForExpectedPods=true"}, want: true},
		{name: "on by the variable", env: "CapacityBuffer=true,PlanForExpectedPods=true", want: true},
		{name: "off by flag", args: []string{"--feature-gates=PlanForExpectedPods=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("FEATURE_GATES", tt.env)
			}
			if got := parse(t, tt.args...).opts.Controllers.PlanForExpectedPods; got != tt.want {
				t.Errorf("PlanForExpectedPods = %t, want %t", got, tt.want)
			}
		})
	}
}
