package catalog

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/providers/catalog/internal/schema"
)

func gzipJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func validFile() schema.File {
	return schema.File{
		Schema:  schema.Version,
		Regions: []schema.Region{{Name: "r-1", Zones: []schema.Zone{{Name: "r-1a", ID: "r1-az1"}, {Name: "r-1b", ID: "r1-az2"}}}},
		Types: []schema.Type{{
			Name: "x1.large", Category: "x", Family: "x1", Generation: 1, Size: "large",
			Architectures: []string{"amd64"}, VCPU: 2, MemoryMiB: 4096, MaxENIs: 2, IPv4PerENI: 4, MaxPods: 8, SpotSupported: true,
			Regions: []schema.Prices{{Region: "r-1", OnDemand: 0.1, Zones: []string{"r-1a", "r-1b"}, Spot: []float64{0.03, 0}, SpotSource: schema.SpotZonal}},
		}},
	}
}

func TestParseValid(t *testing.T) {
	f := validFile()
	c, err := parse(bytes.NewReader(gzipJSON(t, f)))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	it, ok := c.InstanceType("r-1", "x1.large")
	if !ok {
		t.Fatal("x1.large missing")
	}
	want := []Offering{
		{Region: "r-1", Zone: "r-1a", ZoneID: "r1-az1", CapacityType: CapacityTypeOnDemand, Price: 0.1, PriceSource: PriceSourceOnDemand, Available: true},
		{Region: "r-1", Zone: "r-1a", ZoneID: "r1-az1", CapacityType: CapacityTypeSpot, Price: 0.03, PriceSource: PriceSourceSpotZonal, Available: true},
		{Region: "r-1", Zone: "r-1b", ZoneID: "r1-az2", CapacityType: CapacityTypeOnDemand, Price: 0.1, PriceSource: PriceSourceOnDemand, Available: true},
		{Region: "r-1", Zone: "r-1b", ZoneID: "r1-az2", CapacityType: CapacityTypeSpot, Price: 0, PriceSource: PriceSourceNone, Available: false},
	}
	if len(it.Offerings) != len(want) {
		t.Fatalf("offerings = %+v, want %+v", it.Offerings, want)
	}
	for i := range want {
		if it.Offerings[i] != want[i] {
			t.Errorf("offering %d = %+v, want %+v", i, it.Offerings[i], want[i])
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		data    func(t *testing.T) []byte
		wantErr string
	}{
		{"not gzip", func(*testing.T) []byte { return []byte("plain") }, "opening gzip stream"},
		{"not json", func(t *testing.T) []byte { return gzipJSON(t, "x") }, "decoding"},
		{"wrong schema", func(t *testing.T) []byte {
			f := validFile()
			f.Schema = schema.Version + 1
			return gzipJSON(t, f)
		}, "schema version"},
		{"unknown region", func(t *testing.T) []byte {
			f := validFile()
			f.Types[0].Regions[0].Region = "r-2"
			return gzipJSON(t, f)
		}, "unknown region r-2"},
		{"unknown zone", func(t *testing.T) []byte {
			f := validFile()
			f.Types[0].Regions[0].Zones[1] = "r-1z"
			return gzipJSON(t, f)
		}, "zone r-1z is not in region r-1"},
		{"spot length", func(t *testing.T) []byte {
			f := validFile()
			f.Types[0].Regions[0].Spot = []float64{0.1}
			return gzipJSON(t, f)
		}, "1 spot prices for 2 zones"},
		{"duplicate type", func(t *testing.T) []byte {
			f := validFile()
			f.Types = append(f.Types, f.Types[0])
			return gzipJSON(t, f)
		}, "listed twice"},
		{"unsorted", func(t *testing.T) []byte {
			f := validFile()
			second := f.Types[0]
			second.Name = "a1.large"
			f.Types = append(f.Types, second)
			return gzipJSON(t, f)
		}, "not sorted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(bytes.NewReader(tc.data(t)))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parse error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
