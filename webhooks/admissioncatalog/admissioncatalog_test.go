package admissioncatalog_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/requirements"
	"github.com/joiner-dev/joiner/webhooks"
	"github.com/joiner-dev/joiner/webhooks/admissioncatalog"
)

func requirement(t *testing.T, key string, op corev1.NodeSelectorOperator, values ...string) requirements.Requirement {
	t.Helper()
	r, err := requirements.NewRequirement(key, op, values...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLister(t *testing.T) {
	small := &cloudprovider.InstanceType{Name: "small", Requirements: requirements.New(
		requirement(t, corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small"),
		requirement(t, corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-a", "zone-b"),
		requirement(t, "example.com/gpu", corev1.NodeSelectorOpDoesNotExist),
		requirement(t, "example.com/family", corev1.NodeSelectorOpNotIn, "legacy"),
	)}
	cp := fake.New(small)
	cp.ErrorsForNodePool = map[string]error{"broken": errors.New("no catalog")}
	lister := admissioncatalog.Lister(cp)
	tests := []struct {
		name     string
		nodePool string
		want     []webhooks.InstanceTypeLabels
		wantErr  string
	}{
		{
			name:     "label values: none for a label the type lacks, and keys only excluded are left out",
			nodePool: "default",
			want: []webhooks.InstanceTypeLabels{{
				corev1.LabelInstanceTypeStable: {"small"},
				corev1.LabelTopologyZone:       {"zone-a", "zone-b"},
				"example.com/gpu":              nil,
			}},
		},
		{name: "the provider's error names the NodePool", nodePool: "broken", wantErr: "instance types of NodePool broken: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := &karpv1.NodePool{}
			np.Name = tt.nodePool
			for range 2 { // the second call is served from the cache
				got, err := lister.InstanceTypes(context.Background(), np)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("err = %v, want %q", err, tt.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("labels = %v, want %v", got, tt.want)
				}
			}
		})
	}
}
