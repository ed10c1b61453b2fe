// Package resourcestest builds and compares resource lists in tests. It is imported by tests
// only.
package resourcestest

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// List builds a resource list from name/quantity pairs, such as List("cpu", "2", "memory", "4Gi").
func List(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// Describe formats a resource list as sorted name=quantity pairs, "<nil>" for nil.
func Describe(rl corev1.ResourceList) string {
	if rl == nil {
		return "<nil>"
	}
	parts := make([]string, 0, len(rl))
	for name, q := range rl {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Equal reports whether two lists have the same names and equal quantities; nil only equals nil.
func Equal(a, b corev1.ResourceList) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return equality.Semantic.DeepEqual(a, b)
}
