package webhooks_test

import (
	"context"
	"reflect"
	"sort"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

// TestRequestDecodesEachObjectOnce checks that the checks of one request share its decoded objects: each
// object's JSON is decoded at most once into a map and at most once into its typed view, and an object
// handed over as a map (as joiner check does) is encoded at most once and never decoded into a map.
func TestRequestDecodesEachObjectOnce(t *testing.T) {
	badSchedule := func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr("0 25 * * *"), Duration: &metav1.Duration{Duration: 3600e9}}}
	}
	heavy := nodePool("a")
	heavy.Spec.Weight = ptr(int32(90))
	denied := nodePool("a")
	badSchedule(denied)
	tests := []struct {
		name        string
		path        string
		req         admission.Request
		fromMap     bool
		wantAllowed bool
		wantObject  webhooks.Counts
		wantOld     webhooks.Counts
	}{
		{
			name: "NodePool CREATE denied by a policy",
			path: webhooks.PathValidateNodePool,
			req:  request("NodePool", admissionv1.Create, "", "a", heavy, nil),
			// The map feeds the review, the typed view the semantic checks.
			wantObject: webhooks.Counts{MapDecodes: 1, TypedDecodes: 1},
		},
		{
			name:        "NodePool UPDATE denied, the old object checked for what it already had",
			path:        webhooks.PathValidateNodePool,
			req:         request("NodePool", admissionv1.Update, "", "a", denied, nodePool("a")),
			wantObject:  webhooks.Counts{MapDecodes: 1, TypedDecodes: 1},
			wantOld:     webhooks.Counts{MapDecodes: 1, TypedDecodes: 1},
			wantAllowed: false,
		},
		{
			name:        "NodePool UPDATE admitted: the old object is decoded into a map only",
			path:        webhooks.PathValidateNodePool,
			req:         request("NodePool", admissionv1.Update, "", "a", nodePool("a"), nodePool("a")),
			wantObject:  webhooks.Counts{MapDecodes: 1, TypedDecodes: 1},
			wantOld:     webhooks.Counts{MapDecodes: 1},
			wantAllowed: true,
		},
		{
			name:        "NodePool CREATE defaulted",
			path:        webhooks.PathDefaultNodePool,
			req:         request("NodePool", admissionv1.Create, "", "a", []byte(`{"kind":"NodePool","spec":{"template":{"spec":{}}}}`), nil),
			wantObject:  webhooks.Counts{MapDecodes: 1},
			wantAllowed: true,
		},
		{
			name:       "NodePool CREATE handed over as a map",
			path:       webhooks.PathValidateNodePool,
			req:        request("NodePool", admissionv1.Create, "", "a", heavy, nil),
			fromMap:    true,
			wantObject: webhooks.Counts{Encodes: 1, TypedDecodes: 1},
		},
		{
			name:        "NodePool UPDATE handed over as maps",
			path:        webhooks.PathValidateNodePool,
			req:         request("NodePool", admissionv1.Update, "", "a", denied, nodePool("a")),
			fromMap:     true,
			wantObject:  webhooks.Counts{Encodes: 1, TypedDecodes: 1},
			wantOld:     webhooks.Counts{Encodes: 1, TypedDecodes: 1},
			wantAllowed: false,
		},
		{
			name:        "NodePool CREATE handed over as a map and defaulted",
			path:        webhooks.PathDefaultNodePool,
			req:         request("NodePool", admissionv1.Create, "", "a", []byte(`{"kind":"NodePool","spec":{"template":{"spec":{}}}}`), nil),
			fromMap:     true,
			wantObject:  webhooks.Counts{Encodes: 1},
			wantAllowed: true,
		},
	}
	e := newEnv(t, envOptions{
		objects:       []client.Object{ec2NodeClass("default")},
		instanceTypes: catalogLister(),
		policies:      []policy.Policy{testPolicy("max-weight", policy.ActionDeny, regoMaxWeight, map[string]any{"max": 50})},
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := e.handlers[tc.path]
			want := h.Handle(context.Background(), tc.req)
			r := webhooks.NewRequest(tc.req)
			if tc.fromMap {
				r = fromMaps(t, tc.req)
			}
			got := h.HandleDecoded(context.Background(), r)
			if got.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v (%q), want %v", got.Allowed, message(got), tc.wantAllowed)
			}
			// The order of a patch's operations follows map iteration; compare them by path.
			sortPatches(&got)
			sortPatches(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("HandleDecoded answered\n%+v\nHandle answered\n%+v", got, want)
			}
			if c := r.New.Counts(); c != tc.wantObject {
				t.Errorf("object: %+v, want %+v", c, tc.wantObject)
			}
			var old webhooks.Counts
			if r.Old != nil {
				old = r.Old.Counts()
			}
			if old != tc.wantOld {
				t.Errorf("old object: %+v, want %+v", old, tc.wantOld)
			}
		})
	}
}

// fromMaps is the request with its objects handed over already decoded into unstructured maps (int64
// and float64 numbers, not json.Number), as joiner check hands them over.
func fromMaps(t *testing.T, req admission.Request) *webhooks.Request {
	t.Helper()
	toMap := func(raw []byte) *webhooks.Object {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		return webhooks.ObjectFromMap(u.Object)
	}
	r := &webhooks.Request{Request: req, New: toMap(req.Object.Raw)}
	r.Request.Object.Raw, r.Request.OldObject.Raw = nil, nil
	if len(req.OldObject.Raw) > 0 {
		r.Old = toMap(req.OldObject.Raw)
	}
	return r
}

// sortPatches orders a response's patch operations by path.
func sortPatches(resp *admission.Response) {
	sort.Slice(resp.Patches, func(i, j int) bool { return resp.Patches[i].Path < resp.Patches[j].Path })
}
