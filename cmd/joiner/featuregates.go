package main

import (
	"fmt"
	"strings"
)

// featureGate is one gate --feature-gates (FEATURE_GATES) takes: Karpenter v1.14's gates with
// Karpenter's defaults, then Joiner's own.
type featureGate struct {
	name string
	def  bool
	// effect, target and note say what the gate does in Joiner, as a setting's do.
	effect       effect
	target, note string
}

// spotToSpotGate is the gate --spot-to-spot-consolidation also sets.
const spotToSpotGate = "SpotToSpotConsolidation"

// featureGates are the gates, in Karpenter's FEATURE_GATES order, then Joiner's.
var featureGates = []featureGate{
	{name: "NodeRepair", target: "controllers.Options.NodeRepair: node repair deletes the NodeClaim of a Node whose condition matches one of the provider's " +
		"repair policies past its toleration (Ready False/Unknown 30m), unless more than 20% of its NodePool's nodes are unhealthy"},
	{name: "ReservedCapacity", def: true,
		target: "aws nodeclass.Options.DisableCapacityReservations = !on: EC2NodeClasses resolve capacityReservationSelectorTerms into their status " +
			"(Joiner does not launch into reservations yet)"},
	{name: spotToSpotGate, target: "disruption planner SpotToSpot: replace spot nodes with cheaper spot nodes (--spot-to-spot-consolidation, when given, wins)"},
	{name: "NodeOverlay", effect: notYet, note: "Joiner has no NodeOverlay API yet"},
	{name: "StaticCapacity", target: "controllers.Options.DisableStaticCapacity = !on: static NodePools (spec.replicas) get their nodes"},
	{name: "CapacityBuffer", target: "controllers.Options.CapacityBuffer: the CapacityBuffer controller resolves autoscaling.x-k8s.io/v1beta1 CapacityBuffers, " +
		"the provisioner keeps their units' room free and consolidation counts it as used"},
	// Joiner's own.
	{name: "ConsolidationChurnGuard", def: true,
		target: "Joiner's own: off sets --consolidation-min-savings-fraction and --consolidation-cooldown to -1 where not given " +
			"(Karpenter's rule: any cheaper replacement, no cooldown)"},
	{name: "PlanForExpectedPods",
		target: "Joiner's own: controllers.Options.PlanForExpectedPods: the provisioner also plans for the pods ReplicaSets, StatefulSets and Jobs " +
			"are still to create, and consolidation keeps the room launched for them until they arrive"},
}

// gateDefaults is the default of every gate, as FEATURE_GATES writes it.
func gateDefaults() string {
	parts := make([]string, 0, len(featureGates))
	for _, g := range featureGates {
		parts = append(parts, fmt.Sprintf("%s=%t", g.name, g.def))
	}
	return strings.Join(parts, ",")
}

// applyFeatureGates parses Name=true|false pairs over the defaults. An unknown gate is an error
// naming the nearest one.
func applyFeatureGates(f *controllerFlags, v string) error {
	f.karp.gates, f.karp.gatesGiven = map[string]bool{}, map[string]bool{}
	names := make([]string, 0, len(featureGates))
	for _, g := range featureGates {
		f.karp.gates[g.name] = g.def
		names = append(names, g.name)
	}
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if _, known := f.karp.gates[name]; !known {
			return fmt.Errorf("unknown feature gate %q%s; the gates are %s", name, nearestHint(name, names), strings.Join(names, ", "))
		}
		if !ok || (value != "true" && value != "false") {
			return fmt.Errorf("feature gate %s: want %s=true or %s=false", name, name, name)
		}
		f.karp.gates[name], f.karp.gatesGiven[name] = value == "true", true
	}
	return nil
}

// applyGates applies the gates in effect to the options, once every flag is parsed (visited holds
// the flags given): --spot-to-spot-consolidation, when given, wins over the gate unless
// --feature-gates says otherwise on the same command line.
func applyGates(f *controllerFlags, visited map[string]bool) error {
	gates := f.karp.gates
	f.karp.gateFrom = map[string]string{}
	from := map[string]string{"flag": "--feature-gates", "env": "FEATURE_GATES"}[f.karp.given["feature-gates"].from]
	for name := range f.karp.gatesGiven {
		f.karp.gateFrom[name] = from
	}
	planner := &f.opts.Controllers.Disruption.Planner
	if visited["spot-to-spot-consolidation"] {
		if f.karp.gatesGiven[spotToSpotGate] && from == "--feature-gates" && gates[spotToSpotGate] != planner.SpotToSpot {
			return fmt.Errorf("--spot-to-spot-consolidation=%t and --feature-gates %s=%t disagree: give one", planner.SpotToSpot, spotToSpotGate, gates[spotToSpotGate])
		}
		gates[spotToSpotGate], f.karp.gateFrom[spotToSpotGate] = planner.SpotToSpot, "--spot-to-spot-consolidation"
	}
	planner.SpotToSpot = gates[spotToSpotGate]
	f.opts.Controllers.DisableStaticCapacity = !gates["StaticCapacity"]
	f.opts.Controllers.NodeRepair = gates["NodeRepair"]
	f.opts.Controllers.CapacityBuffer = gates["CapacityBuffer"]
	f.opts.Controllers.PlanForExpectedPods = gates["PlanForExpectedPods"]
	if !gates["ConsolidationChurnGuard"] {
		if !visited["consolidation-min-savings-fraction"] {
			planner.MinSavingsFraction = -1
		}
		if !visited["consolidation-cooldown"] {
			planner.Cooldown = -1
		}
	}
	for _, g := range featureGates {
		if g.effect != supported && gates[g.name] != g.def {
			f.karp.notes = append(f.karp.notes, fmt.Sprintf("feature gate %s=%t (from %s): %s: %s", g.name, gates[g.name], f.karp.gateFrom[g.name], g.effect, g.note))
		}
	}
	return nil
}

// gateSource says where a gate's value came from.
func gateSource(f *controllerFlags, name string) string {
	if from, ok := f.karp.gateFrom[name]; ok {
		return from
	}
	return "default"
}
