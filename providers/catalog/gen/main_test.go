package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/joiner-dev/joiner/providers/catalog/internal/schema"
)

func TestSplitName(t *testing.T) {
	tests := []struct {
		name, category, family, size string
		generation                   int
	}{
		{"m5.large", "m", "m5", "large", 5},
		{"c7i-flex.2xlarge", "c", "c7i-flex", "2xlarge", 7},
		{"m7g.metal", "m", "m7g", "metal", 7},
		{"c8gd.metal-24xl", "c", "c8gd", "metal-24xl", 8},
		{"g4dn.xlarge", "g", "g4dn", "xlarge", 4},
		{"u-6tb1.metal", "u", "u-6tb1", "metal", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, f, g, s := splitName(tc.name)
			if c != tc.category || f != tc.family || g != tc.generation || s != tc.size {
				t.Errorf("splitName(%q) = %q %q %d %q, want %q %q %d %q", tc.name, c, f, g, s, tc.category, tc.family, tc.generation, tc.size)
			}
		})
	}
}

func TestRegularZones(t *testing.T) {
	tests := map[string]string{
		"us-east-2":      "use2-az1",
		"eu-central-1":   "euc1-az1",
		"ap-northeast-3": "apne3-az1",
		"us-gov-west-1":  "usgw1-az1",
	}
	for region, firstID := range tests {
		z := regularZones(region)
		if len(z) != 3 || z[0].Name != region+"a" || z[0].ID != firstID || z[2].Name != region+"c" {
			t.Errorf("regularZones(%s) = %+v, want a..c starting with %s", region, z, firstID)
		}
	}
}

func TestSpotPrices(t *testing.T) {
	zones := []string{"r-1a", "r-1b", "r-1c"}
	tests := []struct {
		name       string
		zones      []string
		price      linuxPrice
		wantSource string
		check      func(t *testing.T, got []float64)
	}{
		{
			name: "zonal list of the same length is a permutation", zones: zones,
			price:      linuxPrice{OnDemand: 1, Spot: []numString{0.3, 0.1, 0.2}},
			wantSource: schema.SpotZonal,
			check: func(t *testing.T, got []float64) {
				s := slices.Clone(got)
				slices.Sort(s)
				if !slices.Equal(s, []float64{0.1, 0.2, 0.3}) {
					t.Errorf("got %v, want a permutation of 0.1 0.2 0.3", got)
				}
			},
		},
		{
			name: "shorter zonal list is spread", zones: zones,
			price:      linuxPrice{OnDemand: 1, Spot: []numString{0.2}},
			wantSource: schema.SpotZonal,
			check: func(t *testing.T, got []float64) {
				if !slices.Equal(got, []float64{0.2, 0.2, 0.2}) {
					t.Errorf("got %v, want 0.2 everywhere", got)
				}
			},
		},
		{
			name: "longer zonal list uses values from the whole range", zones: zones[:2],
			price:      linuxPrice{OnDemand: 1, Spot: []numString{0.1, 0.2, 0.3, 0.4}},
			wantSource: schema.SpotZonal,
			check: func(t *testing.T, got []float64) {
				s := slices.Clone(got)
				slices.Sort(s)
				if !slices.Equal(s, []float64{0.1, 0.3}) {
					t.Errorf("got %v, want 0.1 and 0.3", got)
				}
			},
		},
		{
			name: "regional average jittered by 5%", zones: zones,
			price:      linuxPrice{OnDemand: 1, SpotAvg: 0.4},
			wantSource: schema.SpotRegional,
			check: func(t *testing.T, got []float64) {
				for _, v := range got {
					if v < 0.38 || v > 0.42 {
						t.Errorf("got %v, want within 0.38..0.42", got)
					}
				}
			},
		},
		{
			name: "derived from on-demand", zones: zones,
			price:      linuxPrice{OnDemand: 1},
			wantSource: schema.SpotDerived,
			check: func(t *testing.T, got []float64) {
				for _, v := range got {
					if v < 0.3 || v > 0.6 || math.Round(v*1e4)/1e4 != v {
						t.Errorf("got %v, want 4-decimal values within 0.30..0.60", got)
					}
				}
			},
		},
		{
			name: "no figure at all", zones: zones,
			price:      linuxPrice{},
			wantSource: "",
			check: func(t *testing.T, got []float64) {
				if !slices.Equal(got, []float64{0, 0, 0}) {
					t.Errorf("got %v, want zeros", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, src := spotPrices("x1.large", tc.zones, tc.price)
			if src != tc.wantSource || len(got) != len(tc.zones) {
				t.Fatalf("source %q, %d prices; want %q, %d", src, len(got), tc.wantSource, len(tc.zones))
			}
			tc.check(t, got)
			again, _ := spotPrices("x1.large", tc.zones, tc.price)
			if !slices.Equal(got, again) {
				t.Errorf("not deterministic: %v then %v", got, again)
			}
		})
	}
}

func TestNumString(t *testing.T) {
	var v struct{ A, B, C, D numString }
	if err := json.Unmarshal([]byte(`{"A":"0.096","B":1.5,"C":"N/A","D":"-1"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 0.096 || v.B != 1.5 || v.C != 0 || v.D != 0 {
		t.Errorf("got %+v, want 0.096 1.5 0 0", v)
	}
}

// sourcesOrSkip locates the real datasets without downloading anything.
func sourcesOrSkip(t *testing.T) options {
	t.Helper()
	moto, err := resolveMoto("")
	if err != nil {
		t.Skipf("moto dataset not available (install moto 5.2.1 or set MOTO_DIR): %v", err)
	}
	prices, err := resolvePrices(false)
	if err != nil {
		t.Skipf("price dataset not available (run go generate in the catalog folder, or "+
			"`go mod download %s@%s` in a scratch module): %v", pricesModule, pricesVersion, err)
	}
	return options{
		motoDir:    moto,
		pricesDir:  prices,
		regions:    splitList(defaultRegions),
		families:   regexp.MustCompile(defaultFamilies),
		pricesVers: pricesVersion,
	}
}

func gunzip(t *testing.T, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerateIsDeterministic(t *testing.T) {
	opts := sourcesOrSkip(t)
	first, st, err := generate(opts)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	second, _, err := generate(opts)
	if err != nil {
		t.Fatalf("generate again: %v", err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("two runs on the same inputs differ (%d vs %d bytes)", len(first), len(second))
	}
	if st.types < 300 || st.regions != 5 {
		t.Errorf("stats = %s, want >= 300 types in 5 regions", st)
	}

	// The committed file must be what the generator makes from these inputs.
	// The payload is compared rather than the gzip bytes, so that a change
	// in the Go toolchain's compressor alone does not fail the test.
	committed, err := os.ReadFile("../catalog.json.gz")
	if err != nil {
		t.Fatalf("reading committed catalog: %v", err)
	}
	var f schema.File
	if err := json.Unmarshal(gunzip(t, committed), &f); err != nil {
		t.Fatalf("decoding committed catalog: %v", err)
	}
	moto, err := readMoto(opts.motoDir, opts.regions)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for _, s := range f.Sources {
		recorded[s.Name] = s.Version
	}
	if recorded[motoName] != moto.version || recorded[pricesModule] != opts.pricesVers {
		t.Logf("committed catalog was made from moto %s / prices %s, local sources are moto %s / prices %s: not comparing",
			recorded[motoName], recorded[pricesModule], moto.version, opts.pricesVers)
		return
	}
	if !bytes.Equal(gunzip(t, first), gunzip(t, committed)) {
		t.Errorf("committed catalog.json.gz is stale: run go generate in providers/catalog")
	}
}
