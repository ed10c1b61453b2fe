package local

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
)

func TestResolve(t *testing.T) {
	cat := loadCatalog(t)
	var allUSEast1 []string
	for _, z := range cat.Zones("us-east-1") {
		allUSEast1 = append(allUSEast1, z.Name)
	}
	for _, tc := range []struct {
		name       string
		spec       joinerv1alpha1.LocalNodeClassSpec
		wantRegion string
		wantZones  []string
		wantDelay  time.Duration
		wantReason string
		wantMsg    []string // substrings of the error
	}{
		{name: "defaults", wantRegion: "us-east-1", wantZones: allUSEast1, wantDelay: DefaultNodeRegistrationDelay},
		{
			name:       "zones in catalog order, custom delay",
			spec:       joinerv1alpha1.LocalNodeClassSpec{Region: "us-west-2", Zones: []string{"us-west-2c", "us-west-2a"}, NodeRegistrationDelay: &metav1.Duration{Duration: 300 * time.Millisecond}},
			wantRegion: "us-west-2", wantZones: []string{"us-west-2a", "us-west-2c"}, wantDelay: 300 * time.Millisecond,
		},
		{
			name:       "unknown region",
			spec:       joinerv1alpha1.LocalNodeClassSpec{Region: "mars-north-1"},
			wantReason: ReasonRegionNotFound,
			wantMsg:    []string{"spec.region: mars-north-1 is not a region of the catalog", "valid regions: ", "us-east-1"},
		},
		{
			name:       "unknown zone names its index",
			spec:       joinerv1alpha1.LocalNodeClassSpec{Region: "us-east-1", Zones: []string{"us-east-1a", "us-east-1z"}},
			wantReason: ReasonZoneNotFound,
			wantMsg:    []string{"spec.zones[1]: us-east-1z is not a zone of us-east-1; valid zones: " + strings.Join(allUSEast1, ", ")},
		},
		{
			name:       "zone of another region",
			spec:       joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"eu-west-1a"}},
			wantReason: ReasonZoneNotFound,
			wantMsg:    []string{"spec.zones[0]: eu-west-1a is not a zone of us-east-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: tc.spec}
			got, err := Resolve(cat, nc)
			if tc.wantReason != "" {
				var ncErr *NodeClassError
				if !errors.As(err, &ncErr) || ncErr.Reason != tc.wantReason {
					t.Fatalf("Resolve error = %v, want a NodeClassError with reason %s", err, tc.wantReason)
				}
				for _, m := range tc.wantMsg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not contain %q", err, m)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got.Region != tc.wantRegion || !slices.Equal(got.Zones, tc.wantZones) || got.RegistrationDelay != tc.wantDelay {
				t.Errorf("Resolve = %+v, want region %s zones %v delay %s", got, tc.wantRegion, tc.wantZones, tc.wantDelay)
			}
		})
	}
}
