package aws

import (
	"context"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-dev/joiner/providers/catalog"
)

func loadCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func TestPricingFromCatalog(t *testing.T) {
	cat := loadCatalog(t)
	p := NewPricing(cat, "us-east-1")
	want, _ := cat.InstanceType("us-east-1", "m5.large")
	od, ok := p.OnDemand("m5.large")
	if !ok || od != want.Offerings[0].Price {
		t.Errorf("OnDemand(m5.large) = %v, %v; want the catalog's %v", od, ok, want.Offerings[0].Price)
	}
	for _, o := range want.Offerings {
		if o.CapacityType != catalog.CapacityTypeSpot || !o.Available {
			continue
		}
		if got, ok := p.Spot("m5.large", o.Zone); !ok || got != o.Price {
			t.Errorf("Spot(m5.large, %s) = %v, %v; want the catalog's %v", o.Zone, got, ok, o.Price)
		}
	}
	if _, ok := p.OnDemand("x9.nonexistent"); ok {
		t.Error("an unknown type has an on-demand price")
	}
	// A region the catalog does not cover takes us-east-1's on-demand prices and no zonal spot.
	far := NewPricing(cat, "ap-southeast-7")
	if got, ok := far.OnDemand("m5.large"); !ok || got != od {
		t.Errorf("fallback OnDemand = %v, %v; want us-east-1's %v", got, ok, od)
	}
	if got, ok := far.Spot("m5.large", "ap-southeast-7a"); !ok || got != od {
		t.Errorf("fallback Spot = %v, %v; want the on-demand price %v", got, ok, od)
	}
}

func TestUpdateSpotRejectsPlaceholders(t *testing.T) {
	cat := loadCatalog(t)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	stale := time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		history  []ec2types.SpotPrice
		wantKept int
		want1a   float64 // m5.large spot in us-east-1a after the update; 0: the catalog's
	}{
		{name: "moto's placeholders are ignored", history: []ec2types.SpotPrice{
			spotPrice("m5.large", "us-east-1a", "0.00001", stale), spotPrice("m5.large", "us-east-1b", "0.00001", stale),
		}},
		{name: "placeholders of a type the catalog does not price are ignored too", history: []ec2types.SpotPrice{
			spotPrice("zz9.unpriced", "us-east-1a", "0.00001", stale),
		}},
		{name: "a real price of a type the catalog does not price is kept", wantKept: 1, history: []ec2types.SpotPrice{
			spotPrice("zz9.unpriced", "us-east-1a", "0.0123", now),
		}},
		{name: "real prices are kept, the newest wins", wantKept: 2, want1a: 0.041, history: []ec2types.SpotPrice{
			spotPrice("m5.large", "us-east-1a", "0.039", now.Add(-2*time.Hour)),
			spotPrice("m5.large", "us-east-1a", "0.041", now.Add(-time.Hour)),
			spotPrice("m5.large", "us-east-1b", "0.038", now.Add(-time.Hour)),
			spotPrice("m5.large", "us-east-1c", "garbage", now),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPricing(cat, "us-east-1")
			before, _ := p.Spot("m5.large", "us-east-1a")
			kept, err := p.UpdateSpot(context.Background(), &fakeEC2{spot: tc.history}, now)
			if err != nil {
				t.Fatal(err)
			}
			if kept != tc.wantKept {
				t.Errorf("kept %d prices, want %d", kept, tc.wantKept)
			}
			want := tc.want1a
			if want == 0 {
				want = before
			}
			if got, _ := p.Spot("m5.large", "us-east-1a"); got != want {
				t.Errorf("Spot(m5.large, us-east-1a) = %v, want %v", got, want)
			}
		})
	}
}
