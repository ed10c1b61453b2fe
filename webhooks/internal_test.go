package webhooks

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

func TestClampWarnings(t *testing.T) {
	long := strings.Repeat("word ", 40)
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{name: "short warnings pass unchanged", in: []string{"a", "b"}, want: []string{"a", "b"}},
		{name: "a long warning is never cut", in: []string{long}, want: []string{strings.TrimSpace(long)}},
		{name: "a long word is never cut", in: []string{strings.Repeat("x", 200)}, want: []string{strings.Repeat("x", 200)}},
		{name: "multi-byte characters pass whole", in: []string{strings.Repeat("é", 100)}, want: []string{strings.Repeat("é", 100)}},
		{name: "control characters become spaces", in: []string{"line one\nline\ttwo\r"}, want: []string{"line one line two"}},
		{name: "duplicates and empty warnings are dropped", in: []string{"same", "", "same", " "}, want: []string{"same"}},
		{name: "invalid UTF-8 is repaired", in: []string{"bad \xff byte"}, want: []string{"bad ? byte"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := clampWarnings(tc.in)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || len(got) != len(tc.want) {
				t.Fatalf("clampWarnings(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			for _, w := range got {
				if !utf8.ValidString(w) || strings.HasSuffix(w, "…") {
					t.Fatalf("warning %q is invalid UTF-8 or cut", w)
				}
			}
		})
	}
}

func TestConstraintsSatisfiable(t *testing.T) {
	c := func(op corev1.NodeSelectorOperator, values ...string) constraint {
		return constraint{key: "k", rawKey: "k", op: op, values: values, req: requirementOf("k", op, values)}
	}
	maxInt := fmt.Sprint(int64(math.MaxInt64))
	tests := []struct {
		name string
		cs   []constraint
		want bool
	}{
		{name: "nothing", want: true},
		{name: "NotIn alone allows the label to be absent", cs: []constraint{c(corev1.NodeSelectorOpNotIn, "a"), c(corev1.NodeSelectorOpDoesNotExist)}, want: true},
		{name: "In without values", cs: []constraint{c(corev1.NodeSelectorOpIn)}, want: false},
		{name: "In narrowed to nothing by NotIn", cs: []constraint{c(corev1.NodeSelectorOpIn, "a", "b"), c(corev1.NodeSelectorOpNotIn, "b", "a")}, want: false},
		{name: "In survives NotIn", cs: []constraint{c(corev1.NodeSelectorOpIn, "a", "b"), c(corev1.NodeSelectorOpNotIn, "a")}, want: true},
		{name: "In of non-integers with a bound", cs: []constraint{c(corev1.NodeSelectorOpIn, "large"), c(corev1.NodeSelectorOpGt, "1")}, want: false},
		{name: "In value within bounds", cs: []constraint{c(corev1.NodeSelectorOpIn, "2", "8"), c(corev1.NodeSelectorOpGt, "4"), c(corev1.NodeSelectorOpLt, "10")}, want: true},
		{name: "Lt 0 has no label value", cs: []constraint{c(corev1.NodeSelectorOpLt, "0")}, want: false},
		{name: "Gt of the largest integer", cs: []constraint{c(corev1.NodeSelectorOpGt, maxInt)}, want: false},
		{name: "Gte of the largest integer excluded by NotIn", cs: []constraint{c(karpv1.NodeSelectorOpGte, maxInt), c(corev1.NodeSelectorOpNotIn, maxInt)}, want: false},
		{name: "Gte of the largest integer", cs: []constraint{c(karpv1.NodeSelectorOpGte, maxInt)}, want: true},
		{name: "small range fully excluded", cs: []constraint{c(karpv1.NodeSelectorOpGte, "1"), c(karpv1.NodeSelectorOpLte, "3"), c(corev1.NodeSelectorOpNotIn, "1", "2", "3", "x")}, want: false},
		{name: "malformed bound is ignored", cs: []constraint{c(corev1.NodeSelectorOpGt, "many"), c(corev1.NodeSelectorOpGt, "1", "2")}, want: true},
		{name: "unknown operator is ignored", cs: []constraint{c("Near", "x")}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allowed := requirements.Any("k")
			for _, c := range tc.cs {
				allowed = allowed.Intersect(c.req)
			}
			if got := !allowed.IsEmpty(); got != tc.want {
				t.Fatalf("satisfiable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLimitFindingsQuoteAsWritten(t *testing.T) {
	want := []string{
		"spec.limits.cpu: 1000 is below current usage 1500; no new nodes launch until usage drops below it",
		"spec.limits.nodes: 10 is below current usage 12; no new nodes launch until usage drops below it",
	}
	tests := []struct {
		name       string
		obj, usage map[string]any
	}{
		{
			name:  "decoded from JSON",
			obj:   decodedMap(t, `{"spec":{"limits":{"cpu":"1000","memory":"100Gi","nodes":10,"gpu":"lots"}}}`),
			usage: decodedMap(t, `{"status":{"resources":{"cpu":"1500","memory":"64Gi","nodes":"12","gpu":"1"}}}`),
		},
		{
			name:  "unstructured, with int64 numbers",
			obj:   map[string]any{"spec": map[string]any{"limits": map[string]any{"cpu": "1000", "memory": "100Gi", "nodes": int64(10), "gpu": "lots"}}},
			usage: map[string]any{"status": map[string]any{"resources": map[string]any{"cpu": "1500", "memory": "64Gi", "nodes": "12", "gpu": "1"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := limitFindings(tc.obj, tc.usage); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("limitFindings\n got %q\nwant %q", got, want)
			}
		})
	}
}

func decodedMap(t *testing.T, raw string) map[string]any {
	t.Helper()
	m, err := NewObject([]byte(raw)).Content()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestScheduleError(t *testing.T) {
	tests := map[string]string{
		"0 9 * * mon-fri":  "",
		"@hourly":          "",
		"*/15 * * * *":     "",
		"":                 "empty spec string",
		"0 0 32 * *":       "end of range (32) above maximum (31)",
		"a b c d e":        "failed to parse int from a",
		"@fortnightly":     "unrecognized descriptor",
		"TZ=UTC 0 9 * * *": "time zones are not supported: schedules are evaluated in UTC",
	}
	for in, want := range tests {
		if got := scheduleError(in); got != want {
			t.Errorf("scheduleError(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGrandfather(t *testing.T) {
	got := grandfather(
		findings{denials: []string{"old problem", "new problem"}, warnings: []string{"w"}},
		findings{denials: []string{"old problem", "fixed problem"}},
	)
	if fmt.Sprint(got.denials) != "[new problem]" || fmt.Sprint(got.warnings) != "[w pre-existing: old problem]" {
		t.Fatalf("grandfather = %+v", got)
	}
}
