package aws

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-dev/joiner/providers/catalog"
)

// fallbackPriceRegion is the region whose catalog prices stand in for a region the catalog does
// not cover, as Karpenter falls back to its us-east-1 table.
const fallbackPriceRegion = "us-east-1"

// minSpotShareOfOnDemand is the smallest spot price, as a share of the on-demand price, that
// counts as real. Real spot prices sit between roughly 10% and 100% of on-demand; emulators
// answer placeholders (moto: $0.00001 for every type), which must not make every spot offering
// look free.
const minSpotShareOfOnDemand = 0.01

// minSpotPrice is the smallest spot price ($/h) that counts as real for a type whose on-demand
// price is unknown: the cheapest EC2 spot offering costs about $0.001/h, ten times this, while
// emulators' placeholders sit below it. Without it a type the catalog does not price would be
// launched at a placeholder price, although only priced types are launched.
const minSpotPrice = 0.0001

// Pricing holds the prices of one region: on-demand from the embedded catalog (the region's, else
// us-east-1's), spot from DescribeSpotPriceHistory when it returns real prices, else the
// catalog's zonal spot prices, else the on-demand price. It is safe for concurrent use.
type Pricing struct {
	region       string
	onDemand     map[string]float64            // type -> price
	catalogSpot  map[string]map[string]float64 // type -> zone -> price
	mu           sync.RWMutex
	liveSpot     map[string]map[string]float64 // type -> zone -> price
	spotUpdated  time.Time
	spotRejected int // records of the last update that were not real prices
}

// NewPricing returns the catalog prices of region.
func NewPricing(cat *catalog.Catalog, region string) *Pricing {
	p := &Pricing{region: region, onDemand: map[string]float64{}, catalogSpot: map[string]map[string]float64{}}
	if cat == nil {
		return p
	}
	types := cat.InstanceTypes(region)
	if types == nil {
		types = cat.InstanceTypes(fallbackPriceRegion)
	}
	for _, t := range types {
		for _, o := range t.Offerings {
			if !o.Available {
				continue
			}
			switch o.CapacityType {
			case catalog.CapacityTypeOnDemand:
				p.onDemand[t.Name] = o.Price
			case catalog.CapacityTypeSpot:
				if o.Region != region {
					continue
				}
				if p.catalogSpot[t.Name] == nil {
					p.catalogSpot[t.Name] = map[string]float64{}
				}
				p.catalogSpot[t.Name][o.Zone] = o.Price
			}
		}
	}
	return p
}

// OnDemand returns the hourly on-demand price of the type, and false when unknown.
func (p *Pricing) OnDemand(instanceType string) (float64, bool) {
	v, ok := p.onDemand[instanceType]
	return v, ok
}

// Spot returns the hourly spot price of the type in the zone, and false when unknown.
func (p *Pricing) Spot(instanceType, zone string) (float64, bool) {
	p.mu.RLock()
	v, ok := p.liveSpot[instanceType][zone]
	p.mu.RUnlock()
	if ok {
		return v, true
	}
	if v, ok := p.catalogSpot[instanceType][zone]; ok {
		return v, true
	}
	return p.OnDemand(instanceType)
}

// SpotUpdated returns when live spot prices were last taken and how many records of that update
// were rejected as placeholders.
func (p *Pricing) SpotUpdated() (time.Time, int) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.spotUpdated, p.spotRejected
}

// spotRecord is one price of the history.
type spotRecord struct {
	price float64
	at    time.Time
}

// UpdateSpot reads the current spot prices (Linux/UNIX) with DescribeSpotPriceHistory and keeps,
// per type and zone, the latest one that is a real price (at least 1% of the on-demand price).
// It returns how many prices it kept; with none kept the previous prices stay.
func (p *Pricing) UpdateSpot(ctx context.Context, api EC2API, now time.Time) (int, error) {
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime:           aws.Time(now),
		MaxResults:          aws.Int32(1000),
	}
	latest := map[string]map[string]spotRecord{}
	rejected := 0
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(api, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("describe spot price history: %w", err)
		}
		for _, r := range out.SpotPriceHistory {
			if !p.realSpot(r) {
				rejected++
				continue
			}
			t, z := string(r.InstanceType), aws.ToString(r.AvailabilityZone)
			price, _ := strconv.ParseFloat(aws.ToString(r.SpotPrice), 64)
			at := aws.ToTime(r.Timestamp)
			if latest[t] == nil {
				latest[t] = map[string]spotRecord{}
			}
			if have, ok := latest[t][z]; !ok || at.After(have.at) {
				latest[t][z] = spotRecord{price: price, at: at}
			}
		}
	}
	kept := 0
	live := make(map[string]map[string]float64, len(latest))
	for t, zones := range latest {
		live[t] = make(map[string]float64, len(zones))
		for z, r := range zones {
			live[t][z] = r.price
			kept++
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spotRejected = rejected
	if kept > 0 {
		p.liveSpot, p.spotUpdated = live, now
	}
	return kept, nil
}

// realSpot reports whether a history record is a usable price: positive, and not below 1% of the
// type's on-demand price when that is known, or below minSpotPrice when it is not.
func (p *Pricing) realSpot(r ec2types.SpotPrice) bool {
	price, err := strconv.ParseFloat(aws.ToString(r.SpotPrice), 64)
	if err != nil || price <= 0 || aws.ToString(r.AvailabilityZone) == "" {
		return false
	}
	if od, ok := p.onDemand[string(r.InstanceType)]; ok {
		return price >= od*minSpotShareOfOnDemand
	}
	return price >= minSpotPrice
}
