package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// gateOptions reads the options the gates reach, as text.
func gateOptions(f controllerFlags) string {
	p := f.opts.Controllers.Disruption.Planner
	aws := f.awsFactoryOptions(logr.Discard(), func(context.Context) (string, error) { return "1.36", nil })
	return fmt.Sprintf("spotToSpot=%t disableStatic=%t disableReservations=%t minSavingsFraction=%v cooldown=%s",
		p.SpotToSpot, f.opts.Controllers.DisableStaticCapacity, aws.NodeClass.DisableCapacityReservations, p.MinSavingsFraction, p.Cooldown)
}

// TestFeatureGates: each gate, by --feature-gates and by FEATURE_GATES, reaches its option, with
// Karpenter's defaults for the gates left out; --spot-to-spot-consolidation is the same switch as
// the SpotToSpotConsolidation gate.
func TestFeatureGates(t *testing.T) {
	const defaults = "spotToSpot=false disableStatic=true disableReservations=false minSavingsFraction=0.05 cooldown=10m0s"
	tests := []struct {
		name  string
		gates string
		args  []string
		want  string
		// envOnly gives the gates only as FEATURE_GATES (with --feature-gates the case is an error).
		envOnly bool
	}{
		{name: "Karpenter's defaults", want: defaults},
		{name: "SpotToSpotConsolidation", gates: "SpotToSpotConsolidation=true",
			want: "spotToSpot=true disableStatic=true disableReservations=false minSavingsFraction=0.05 cooldown=10m0s"},
		{name: "StaticCapacity", gates: "StaticCapacity=true",
			want: "spotToSpot=false disableStatic=false disableReservations=false minSavingsFraction=0.05 cooldown=10m0s"},
		{name: "ReservedCapacity off", gates: "ReservedCapacity=false",
			want: "spotToSpot=false disableStatic=true disableReservations=true minSavingsFraction=0.05 cooldown=10m0s"},
		{name: "Joiner's churn guard off", gates: "ConsolidationChurnGuard=false",
			want: "spotToSpot=false disableStatic=true disableReservations=false minSavingsFraction=-1 cooldown=-1ns"},
		{name: "churn guard off keeps the flags given", gates: "ConsolidationChurnGuard=false", args: []string{"--consolidation-cooldown=5m"},
			want: "spotToSpot=false disableStatic=true disableReservations=false minSavingsFraction=-1 cooldown=5m0s"},
		{name: "gates without effect change no option", gates: "NodeRepair=true, NodeOverlay=true,CapacityBuffer=true", want: defaults},
		{name: "the chart's every gate", gates: "NodeRepair=true,ReservedCapacity=false,SpotToSpotConsolidation=true,NodeOverlay=true,StaticCapacity=true,CapacityBuffer=true",
			want: "spotToSpot=true disableStatic=false disableReservations=true minSavingsFraction=0.05 cooldown=10m0s"},
		{name: "the alias alone", args: []string{"--spot-to-spot-consolidation"},
			want: "spotToSpot=true disableStatic=true disableReservations=false minSavingsFraction=0.05 cooldown=10m0s"},
		{name: "the alias wins over the variable", gates: "SpotToSpotConsolidation=true", args: []string{"--spot-to-spot-consolidation=false"}, want: defaults, envOnly: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.envOnly {
				args := tt.args
				if tt.gates != "" {
					args = append([]string{"--feature-gates=" + tt.gates}, args...)
				}
				if got := gateOptions(parse(t, args...)); got != tt.want {
					t.Errorf("--feature-gates: %s, want %s", got, tt.want)
				}
			}
			if tt.gates == "" {
				return
			}
			t.Setenv("FEATURE_GATES", tt.gates)
			if got := gateOptions(parse(t, tt.args...)); got != tt.want {
				t.Errorf("FEATURE_GATES: %s, want %s", got, tt.want)
			}
		})
	}
}

// TestFeatureGatesWithoutEffectAreNoted: a gate Joiner has no behaviour for, turned on, is noted
// for the log at start; one left at its default is not.
func TestFeatureGatesWithoutEffectAreNoted(t *testing.T) {
	t.Setenv("FEATURE_GATES", "NodeOverlay=true,NodeRepair=false")
	notes := parse(t).karp.notes
	want := "feature gate NodeOverlay=true (from FEATURE_GATES): accepted, no effect in Joiner yet: Joiner has no NodeOverlay API yet"
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notes %q, want [%q]", notes, want)
	}
}

// TestBadFeatureGates: an unknown gate names the nearest; a value other than true or false, and
// the alias and --feature-gates disagreeing, are errors.
func TestBadFeatureGates(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{name: "misspelt gate", args: []string{"--feature-gates=SpotToSpotConsolidaton=true"},
			want: `--feature-gates "SpotToSpotConsolidaton=true": unknown feature gate "SpotToSpotConsolidaton" (did you mean SpotToSpotConsolidation?); ` +
				"the gates are NodeRepair, ReservedCapacity, SpotToSpotConsolidation, NodeOverlay, StaticCapacity, CapacityBuffer, ConsolidationChurnGuard, PlanForExpectedPods"},
		{name: "misspelt gate in the variable", env: "NodeRepiar=true",
			want: `environment variable FEATURE_GATES="NodeRepiar=true": unknown feature gate "NodeRepiar" (did you mean NodeRepair?)`},
		{name: "Kubernetes' own gate", env: "InPlacePodVerticalScaling=true", want: `unknown feature gate "InPlacePodVerticalScaling"`},
		{name: "not a bool", args: []string{"--feature-gates=NodeRepair=yes"}, want: "feature gate NodeRepair: want NodeRepair=true or NodeRepair=false"},
		{name: "no value", env: "NodeRepair", want: "feature gate NodeRepair: want NodeRepair=true or NodeRepair=false"},
		{name: "alias and gate disagree", args: []string{"--spot-to-spot-consolidation=true", "--feature-gates=SpotToSpotConsolidation=false"},
			want: "--spot-to-spot-consolidation=true and --feature-gates SpotToSpotConsolidation=false disagree: give one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("FEATURE_GATES", tt.env)
			}
			var stderr bytes.Buffer
			_, err := parseControllerFlags(tt.args, &stderr)
			if !errors.Is(err, errBadFlags) || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("err = %v, stderr %q; want errBadFlags and %q", err, stderr.String(), tt.want)
			}
		})
	}
}

// TestGateDefaultsAreKarpenters: the gates and their defaults are Karpenter v1.14's FEATURE_GATES
// default, in its order, then Joiner's own.
func TestGateDefaultsAreKarpenters(t *testing.T) {
	const karpenter = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
	if got := gateDefaults(); got != karpenter+",ConsolidationChurnGuard=true,PlanForExpectedPods=false" {
		t.Errorf("gate defaults %s", got)
	}
}
