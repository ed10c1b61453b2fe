package policy_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/policy"
)

func reviewedNodePool(meta map[string]any) map[string]any {
	return map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta, "spec": map[string]any{}}
}

func TestBuildReview(t *testing.T) {
	managed := []any{map[string]any{"manager": "kubectl"}}
	tests := []struct {
		name    string
		in      policy.ReviewInput
		want    policy.Review
		wantErr string
	}{
		{
			name: "kind, name and namespace from the object",
			in:   policy.ReviewInput{Operation: policy.OperationCreate, Object: reviewedNodePool(map[string]any{"name": "a", "namespace": "ns"})},
			want: policy.Review{Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Operation: policy.OperationCreate, Name: "a", Namespace: "ns",
				Object: reviewedNodePool(map[string]any{"name": "a", "namespace": "ns"})},
		},
		{
			name: "what the request says wins",
			in: policy.ReviewInput{Operation: policy.OperationUpdate, Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Name: "req",
				Object: reviewedNodePool(map[string]any{"name": "obj"}), OldObject: reviewedNodePool(map[string]any{"name": "obj"}),
				UserInfo: policy.UserInfo{Username: "alice"}, NamespaceLabels: map[string]string{"team": "a"}},
			want: policy.Review{Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Operation: policy.OperationUpdate, Name: "req",
				Object: reviewedNodePool(map[string]any{"name": "obj"}), OldObject: reviewedNodePool(map[string]any{"name": "obj"}),
				UserInfo: policy.UserInfo{Username: "alice"}, NamespaceLabels: map[string]string{"team": "a"}},
		},
		{
			name: "generateName stands in for a name not yet generated",
			in:   policy.ReviewInput{Operation: policy.OperationCreate, Object: reviewedNodePool(map[string]any{"generateName": "pool-"})},
			want: policy.Review{Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Operation: policy.OperationCreate, Name: "pool-",
				Object: reviewedNodePool(map[string]any{"generateName": "pool-"})},
		},
		{
			name: "managedFields are left out of both objects",
			in: policy.ReviewInput{Operation: policy.OperationUpdate,
				Object:    reviewedNodePool(map[string]any{"name": "a", "managedFields": managed}),
				OldObject: reviewedNodePool(map[string]any{"name": "a", "managedFields": managed})},
			want: policy.Review{Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Operation: policy.OperationUpdate, Name: "a",
				Object: reviewedNodePool(map[string]any{"name": "a"}), OldObject: reviewedNodePool(map[string]any{"name": "a"})},
		},
		{
			name: "DELETE reads the old object",
			in:   policy.ReviewInput{Operation: policy.OperationDelete, OldObject: reviewedNodePool(map[string]any{"name": "gone"})},
			want: policy.Review{Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Operation: policy.OperationDelete, Name: "gone",
				OldObject: reviewedNodePool(map[string]any{"name": "gone"})},
		},
		{
			name:    "no kind anywhere",
			in:      policy.ReviewInput{Operation: policy.OperationCreate, Object: map[string]any{"metadata": map[string]any{"name": "a"}}},
			wantErr: "new review: object has no apiVersion or kind",
		},
		{
			name:    "no object",
			in:      policy.ReviewInput{Operation: policy.OperationCreate},
			wantErr: "new review: no object given",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policy.BuildReview(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("review =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestBuildReviewLeavesTheCallersObjectAlone(t *testing.T) {
	obj := reviewedNodePool(map[string]any{"name": "a", "managedFields": []any{"x"}})
	if _, err := policy.BuildReview(policy.ReviewInput{Operation: policy.OperationCreate, Object: obj}); err != nil {
		t.Fatal(err)
	}
	if _, ok := obj["metadata"].(map[string]any)["managedFields"]; !ok {
		t.Error("BuildReview removed managedFields from the caller's object")
	}
}

func TestVerdictSortsByEnforcementAction(t *testing.T) {
	boom := errors.New("boom")
	// Evaluate's order: by policy name, each policy either violations or one failure.
	results := []policy.Violation{
		{Policy: "a-deny", Action: policy.ActionDeny, Message: "one"},
		{Policy: "a-deny", Action: policy.ActionDeny, Message: "two"},
		{Policy: "b-deny-broken", Action: policy.ActionDeny, Message: "policy evaluation failed: boom", Err: boom},
		{Policy: "c-warn", Action: policy.ActionWarn, Message: "careful"},
		{Policy: "d-dry", Action: policy.ActionDryRun, Message: "noted"},
		{Policy: "e-warn-broken", Action: policy.ActionWarn, Message: "policy evaluation failed: boom", Err: boom},
		{Policy: "f-deny", Action: policy.ActionDeny, Message: "three"},
		{Policy: "g-dry-broken", Action: policy.ActionDryRun, Message: "policy evaluation failed: boom", Err: boom},
	}
	v := policy.NewVerdict(results)
	tests := []struct {
		name string
		got  []policy.Violation
		want []string
	}{
		{"denials: Deny violations and Deny failures, fail closed", v.Denials(), []string{"a-deny one", "a-deny two", "b-deny-broken policy evaluation failed: boom", "f-deny three"}},
		{"warnings: Warn violations and Warn failures", v.Warnings(), []string{"c-warn careful", "e-warn-broken policy evaluation failed: boom"}},
		{"recorded: DryRun violations and DryRun failures", v.Recorded(), []string{"d-dry noted", "g-dry-broken policy evaluation failed: boom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]string, len(tt.got))
			for i, x := range tt.got {
				got[i] = x.Policy + " " + x.Message
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if !reflect.DeepEqual(v.All(), results) {
		t.Errorf("All() = %+v, want the evaluation order %+v", v.All(), results)
	}
}

func TestDecide(t *testing.T) {
	e := policy.New(policy.Options{})
	err := e.SetPolicies(context.Background(), []policy.Policy{
		{Name: "no-limit", Rego: "package t.nolimit\n\nviolation contains {\"msg\": \"set spec.limits.cpu\", \"field\": \"spec.limits.cpu\"} if { not input.review.object.spec.limits.cpu }\n"},
		{Name: "team", EnforcementAction: policy.ActionWarn, Rego: "package t.team\n\nviolation contains {\"msg\": \"label the team\"} if { not input.review.object.metadata.labels.team }\n"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := policy.BuildReview(policy.ReviewInput{Operation: policy.OperationCreate, Object: reviewedNodePool(map[string]any{"name": "a"})})
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Decide(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if got := policy.Messages(v.Denials()); !reflect.DeepEqual(got, []string{"[no-limit] set spec.limits.cpu (field: spec.limits.cpu)"}) {
		t.Errorf("denials = %q", got)
	}
	if got := policy.Messages(v.Warnings()); !reflect.DeepEqual(got, []string{"[team] label the team"}) {
		t.Errorf("warnings = %q", got)
	}
	if _, err := e.Decide(context.Background(), policy.Review{Operation: "PATCH", Kind: r.Kind}); err == nil {
		t.Error("Decide accepted an unsupported operation")
	}
}
