package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// InstanceTypeLabels describes one instance type of the provider's catalog by the node labels it can
// carry: for each label key, the set of values a node of that type may get. Keys with one value per type
// (instance type, architecture, CPU count) hold one value; keys chosen at launch (zone, capacity type)
// hold every value an offering of the type has.
//
// A key that some instance type of the catalog has is "known": an instance type without it (or with an
// empty set) does not carry that label, so `Exists` fails and `DoesNotExist` holds for it. A key that no
// instance type has (a custom label such as joiner.dev/team) is not constrained by the catalog: Joiner puts
// such labels on nodes from the NodePool itself. Keys use the stable well-known names
// (kubernetes.io/arch, not beta.kubernetes.io/arch).
type InstanceTypeLabels map[string][]string

// InstanceTypeLister returns the instance types a NodePool could launch, such as the catalog of the
// provider behind its nodeClassRef. The validators use it to deny requirements that no instance type
// satisfies. An empty result means "unknown" and skips the check; an error is reported as a warning and
// never denies, so the admission path does not depend on the provider being healthy.
//
// It is deliberately independent of the cloudprovider package; the provider's catalog is adapted to it
// where the handlers are wired.
type InstanceTypeLister interface {
	InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]InstanceTypeLabels, error)
}

// InstanceTypeListerFunc adapts a function to InstanceTypeLister.
type InstanceTypeListerFunc func(ctx context.Context, nodePool *karpv1.NodePool) ([]InstanceTypeLabels, error)

// InstanceTypes implements InstanceTypeLister.
func (f InstanceTypeListerFunc) InstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]InstanceTypeLabels, error) {
	return f(ctx, nodePool)
}

// catalogFindings reports constraints that no instance type satisfies:
//  1. each constraint that no instance type satisfies on its own ("no instance type in the catalog
//     satisfies node.kubernetes.io/instance-type In [m9z.huge]");
//  2. failing that, the first constraint that, together with the constraints before it, leaves no
//     instance type;
//  3. when instance types remain, each minValues they cannot provide.
//
// The common case, a satisfiable template, costs one filtering pass over the catalog.
func catalogFindings(cs []constraint, types []InstanceTypeLabels) []string {
	if len(types) == 0 || len(cs) == 0 {
		return nil
	}
	known := knownKeys(cs, types)
	survivors := types
	for i, c := range cs {
		if !known[c.key] {
			continue
		}
		next := make([]InstanceTypeLabels, 0, len(survivors))
		for _, it := range survivors {
			if satisfiedBy(it, c) {
				next = append(next, it)
			}
		}
		if len(next) == 0 {
			if alone := unsatisfiedAlone(cs, types, known); len(alone) > 0 {
				return alone
			}
			return []string{fmt.Sprintf("%s: no instance type in the catalog satisfies %s together with %s; widen one of them",
				c.field, c, describeEarlier(cs[:i], known))}
		}
		survivors = next
	}
	var out []string
	for _, c := range cs {
		if c.minValues == nil || !known[c.key] {
			continue
		}
		distinct := map[string]struct{}{}
		for _, it := range survivors {
			for _, v := range it[c.key] {
				if c.req.Has(v) {
					distinct[v] = struct{}{}
				}
			}
		}
		if len(distinct) < *c.minValues {
			out = append(out, fmt.Sprintf("%s: minValues %d needs %d distinct %s values, but the instance types that satisfy all requirements offer %d; lower minValues or widen the requirements",
				c.field, *c.minValues, *c.minValues, c.rawKey, len(distinct)))
		}
	}
	return out
}

// unsatisfiedAlone reports every constraint that no instance type satisfies on its own.
func unsatisfiedAlone(cs []constraint, types []InstanceTypeLabels, known map[string]bool) []string {
	var out []string
	for _, c := range cs {
		if known[c.key] && !slices.ContainsFunc(types, func(it InstanceTypeLabels) bool { return satisfiedBy(it, c) }) {
			out = append(out, fmt.Sprintf("%s: no instance type in the catalog satisfies %s", c.field, c))
		}
	}
	return out
}

func describeEarlier(earlier []constraint, known map[string]bool) string {
	var fields []string
	for _, p := range earlier {
		if known[p.key] {
			fields = append(fields, p.field)
		}
	}
	return strings.Join(fields, ", ")
}

// knownKeys returns the constraint keys that at least one instance type has.
func knownKeys(cs []constraint, types []InstanceTypeLabels) map[string]bool {
	known := make(map[string]bool, len(cs))
	for _, c := range cs {
		if _, done := known[c.key]; done {
			continue
		}
		known[c.key] = slices.ContainsFunc(types, func(it InstanceTypeLabels) bool {
			_, ok := it[c.key]
			return ok
		})
	}
	return known
}

// satisfiedBy reports whether some node of instance type it meets c. The key is known to the catalog.
func satisfiedBy(it InstanceTypeLabels, c constraint) bool {
	vals := it[c.key]
	if len(vals) == 0 {
		return c.req.Matches("", false)
	}
	return slices.ContainsFunc(vals, c.req.Has)
}
