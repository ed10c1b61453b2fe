// Command gen builds the embedded instance-type catalog of package catalog
// (catalog.json.gz) from two offline datasets:
//
//   - moto (Apache-2.0): ec2/resources/instance_types.json.gz (DescribeInstanceTypes
//     records), ec2/resources/instance_type_offerings/availability-zone/<region>.json.gz
//     (which types are offered in which zone) and ec2/models/availability_zones_and_regions.py
//     (zone name to zone ID, as moto's DescribeAvailabilityZones reports it);
//   - github.com/cristim/ec2-instances-info (data from ec2instances.info, MIT):
//     data/instances.json, for Linux on-demand and spot prices per region.
//
// It is run by `go generate` in the catalog folder. Without flags it finds moto
// through $MOTO_DIR or the python3 on PATH, and the price module in the Go
// module cache at the pinned version (downloading it into the cache, through a
// throw-away go.mod in a temporary folder, when it is missing).
//
// Output is deterministic: every list is sorted and every derived number comes
// from an FNV-1a hash of stable strings, never from randomness or map order.
package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/joiner-dev/joiner/providers/catalog/internal/schema"
)

const (
	// pricesModule is the Go module that carries the price data.
	pricesModule = "github.com/cristim/ec2-instances-info"
	// pricesVersion pins the price data so that regeneration is reproducible.
	pricesVersion = "v0.0.0-20250528091325-32acf84f42eb"

	// defaultRegions are the regions covered by default.
	defaultRegions = "eu-central-1,eu-west-1,us-east-1,us-east-2,us-west-2"
	// defaultFamilies selects c/m/r generations 5-8 (all variants, including
	// Graviton "g" and "-flex"), t3/t3a/t4g and the g4ad/g4dn/g5/g5g/g6/g6e
	// GPU families.
	defaultFamilies = `^(?:[cmr][5-8][a-z]*(?:-flex)?|t3a?|t4g|g4ad|g4dn|g5g?|g6e?)$`

	motoTypesFile     = "ec2/resources/instance_types.json.gz"
	motoOfferingsDir  = "ec2/resources/instance_type_offerings/availability-zone"
	motoZonesFile     = "ec2/models/availability_zones_and_regions.py"
	motoInitFile      = "__init__.py"
	pricesDataFile    = "data/instances.json"
	pricesLicense     = "MIT"
	motoLicense       = "Apache-2.0"
	motoName          = "moto"
	mbpsPerGbps       = 1000 // Gbps -> Mbps
	spotRegionalLow   = 0.95
	spotRegionalRange = 0.10
	spotDerivedLow    = 0.30
	spotDerivedRange  = 0.30
)

// options are the generator's inputs.
type options struct {
	motoDir    string   // moto package folder (contains ec2/)
	pricesDir  string   // ec2-instances-info module folder (contains data/)
	regions    []string // regions to cover
	families   *regexp.Regexp
	pricesVers string // version recorded for the price module
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	motoDir := fs.String("moto", "", "moto package folder (default: $MOTO_DIR, else found with python3)")
	pricesDir := fs.String("prices", "", "ec2-instances-info module folder (default: Go module cache at "+pricesVersion+")")
	download := fs.Bool("download", true, "download the price module into the module cache when it is missing")
	regions := fs.String("regions", defaultRegions, "comma-separated regions to cover")
	families := fs.String("families", defaultFamilies, "regular expression selecting instance families")
	out := fs.String("out", "catalog.json.gz", "output file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	re, err := regexp.Compile(*families)
	if err != nil {
		return fmt.Errorf("parsing -families: %w", err)
	}
	opts := options{regions: splitList(*regions), families: re, pricesVers: pricesVersion}
	if opts.motoDir, err = resolveMoto(*motoDir); err != nil {
		return err
	}
	if *pricesDir != "" {
		opts.pricesDir = *pricesDir
		opts.pricesVers = versionFromPath(*pricesDir)
	} else if opts.pricesDir, err = resolvePrices(*download); err != nil {
		return err
	}
	data, stats, err := generate(opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	fmt.Fprintf(os.Stderr, "gen: wrote %s (%d bytes): %s\n", *out, len(data), stats)
	return nil
}

// splitList splits a comma-separated list, dropping blanks, sorted and unique.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// versionFromPath extracts "vX" from a module-cache path ".../name@vX".
func versionFromPath(p string) string {
	base := filepath.Base(filepath.Clean(p))
	if i := strings.LastIndex(base, "@"); i >= 0 {
		return base[i+1:]
	}
	return "unknown"
}

// resolveMoto finds the moto package folder.
func resolveMoto(flagValue string) (string, error) {
	dir := flagValue
	if dir == "" {
		dir = os.Getenv("MOTO_DIR")
	}
	if dir == "" {
		out, err := exec.Command("python3", "-c", "import moto, os; print(os.path.dirname(moto.__file__))").Output()
		if err != nil {
			return "", fmt.Errorf("locating moto with python3 (set -moto or MOTO_DIR): %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(filepath.Join(dir, motoTypesFile)); err != nil {
		return "", fmt.Errorf("moto folder %q has no %s: %w", dir, motoTypesFile, err)
	}
	return dir, nil
}

// pricesCacheDir returns where the pinned price module lives in the module cache.
func pricesCacheDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("running go env GOMODCACHE: %w", err)
	}
	// The module path is all lower case, so no case-escaping is needed.
	return filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(pricesModule)+"@"+pricesVersion), nil
}

// resolvePrices finds (and optionally downloads) the pinned price module.
func resolvePrices(download bool) (string, error) {
	dir, err := pricesCacheDir()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, pricesDataFile)); err == nil {
		return dir, nil
	} else if !download {
		return "", fmt.Errorf("price module not in the module cache (%s): %w", dir, err)
	}
	return downloadPrices()
}

// downloadPrices runs `go mod download` in a throw-away module so that the
// project's go.mod is never touched.
func downloadPrices() (string, error) {
	tmp, err := os.MkdirTemp("", "catalog-gen-")
	if err != nil {
		return "", fmt.Errorf("creating temp folder: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module catalogprices\n\ngo 1.26\n"), 0o644); err != nil {
		return "", fmt.Errorf("writing temp go.mod: %w", err)
	}
	cmd := exec.Command("go", "mod", "download", "-json", pricesModule+"@"+pricesVersion)
	cmd.Dir = tmp
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", pricesModule, pricesVersion, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("parsing go mod download output: %w", err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", pricesModule, pricesVersion, info.Error)
	}
	return info.Dir, nil
}

// ---- moto input ----------------------------------------------------------

// motoType is the subset of a DescribeInstanceTypes record the catalog uses.
type motoType struct {
	InstanceType string
	Hypervisor   string
	BareMetal    bool
	VCpuInfo     struct{ DefaultVCpus int }
	MemoryInfo   struct{ SizeInMiB int64 }
	GpuInfo      *struct {
		Gpus []struct {
			Count        int
			Manufacturer string
			Name         string
			MemoryInfo   struct{ SizeInMiB int64 }
		}
	}
	InstanceStorageInfo *struct {
		TotalSizeInGB int64
		NvmeSupport   string
	}
	NetworkInfo struct {
		DefaultNetworkCardIndex   int
		Ipv4AddressesPerInterface int
		MaximumNetworkInterfaces  int
		NetworkCards              []struct {
			NetworkCardIndex         int
			MaximumNetworkInterfaces int
			BaselineBandwidthInGbps  float64
		}
	}
	ProcessorInfo struct {
		Manufacturer           string
		SupportedArchitectures []string
	}
	SupportedUsageClasses []string
}

type motoData struct {
	version   string
	types     map[string]motoType
	offerings map[string]map[string][]string // region -> type -> zones (sorted)
	zones     map[string][]schema.Zone       // region -> zones (sorted)
}

func readGzipJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("reading gzip %s: %w", path, err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

var (
	motoVersionRE = regexp.MustCompile(`(?m)^__version__\s*=\s*["']([^"']+)["']`)
	motoZoneRE    = regexp.MustCompile(`Zone\(\s*region_name="([^"]+)",\s*name="([^"]+)",\s*zone_id="([^"]+)"`)
)

func readMoto(dir string, regions []string) (*motoData, error) {
	d := &motoData{offerings: map[string]map[string][]string{}, zones: map[string][]schema.Zone{}}

	init, err := os.ReadFile(filepath.Join(dir, motoInitFile))
	if err != nil {
		return nil, fmt.Errorf("reading moto version: %w", err)
	}
	m := motoVersionRE.FindSubmatch(init)
	if m == nil {
		return nil, fmt.Errorf("no __version__ in %s", filepath.Join(dir, motoInitFile))
	}
	d.version = string(m[1])

	if err := readGzipJSON(filepath.Join(dir, motoTypesFile), &d.types); err != nil {
		return nil, err
	}

	src, err := os.ReadFile(filepath.Join(dir, motoZonesFile))
	if err != nil {
		return nil, fmt.Errorf("reading moto zones: %w", err)
	}
	for _, z := range motoZoneRE.FindAllStringSubmatch(string(src), -1) {
		if slices.Contains(regions, z[1]) {
			d.zones[z[1]] = append(d.zones[z[1]], schema.Zone{Name: z[2], ID: z[3]})
		}
	}
	zoneIDs := map[string]string{}
	for _, region := range regions {
		if len(d.zones[region]) == 0 {
			d.zones[region] = regularZones(region)
		}
		for _, z := range d.zones[region] {
			zoneIDs[z.Name] = z.ID
		}
	}

	for _, region := range regions {
		var offs []struct{ InstanceType, Location string }
		if err := readGzipJSON(filepath.Join(dir, motoOfferingsDir, region+".json.gz"), &offs); err != nil {
			return nil, err
		}
		byType := map[string][]string{}
		for _, o := range offs {
			byType[o.InstanceType] = append(byType[o.InstanceType], o.Location)
			if _, ok := zoneIDs[o.Location]; !ok || !strings.HasPrefix(o.Location, region) {
				return nil, fmt.Errorf("offering of %s in zone %s, which moto does not list for region %s", o.InstanceType, o.Location, region)
			}
		}
		for t, zs := range byType {
			slices.Sort(zs)
			byType[t] = slices.Compact(zs)
		}
		d.offerings[region] = byType
		sort.Slice(d.zones[region], func(i, j int) bool { return d.zones[region][i].Name < d.zones[region][j].Name })
	}
	return d, nil
}

// regularZones mirrors moto's rule for regions missing from its explicit zone
// table: zones a, b and c with IDs <shorthand>-az1..3, where the shorthand is
// the first part of the name, one letter per cardinal direction found in it
// (north, south, central, east, west, in that order) and the last part, e.g.
// us-east-2 -> use2, eu-central-1 -> euc1, ap-northeast-3 -> apne3.
func regularZones(region string) []schema.Zone {
	parts := strings.Split(region, "-")
	short := parts[0]
	if strings.HasPrefix(region, "us-gov") {
		short = "usg"
	}
	for _, c := range []string{"north", "south", "central", "east", "west"} {
		if strings.Contains(region, c) {
			short += c[:1]
		}
	}
	short += parts[len(parts)-1]
	zones := make([]schema.Zone, 0, 3)
	for i, letter := range []string{"a", "b", "c"} {
		zones = append(zones, schema.Zone{Name: region + letter, ID: fmt.Sprintf("%s-az%d", short, i+1)})
	}
	return zones
}

// ---- price input ---------------------------------------------------------

// numString is a price given as a JSON string (or number); invalid or absent
// values decode to 0.
type numString float64

// UnmarshalJSON accepts a quoted or bare number; anything unparseable or
// negative (e.g. "N/A") becomes 0, meaning "no price".
func (n *numString) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		*n = 0
		return nil
	}
	*n = numString(v)
	return nil
}

// linuxPrice is the Linux price block of one type in one region.
type linuxPrice struct {
	OnDemand numString   `json:"ondemand"`
	Spot     []numString `json:"spot"`
	SpotAvg  numString   `json:"spot_avg"`
}

type priceRecord struct {
	InstanceType string `json:"instance_type"`
	Pricing      map[string]struct {
		Linux *linuxPrice `json:"linux"`
	} `json:"pricing"`
}

// readPrices returns type -> region -> Linux prices.
func readPrices(dir string) (map[string]map[string]linuxPrice, error) {
	path := filepath.Join(dir, pricesDataFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading price data: %w", err)
	}
	var recs []priceRecord
	if err := json.Unmarshal(raw, &recs); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	out := make(map[string]map[string]linuxPrice, len(recs))
	for _, r := range recs {
		byRegion := map[string]linuxPrice{}
		for region, p := range r.Pricing {
			if p.Linux != nil {
				byRegion[region] = *p.Linux
			}
		}
		out[r.InstanceType] = byRegion
	}
	return out, nil
}

// ---- building ------------------------------------------------------------

var (
	familyRE         = regexp.MustCompile(`^([a-z]+)(\d+)`)
	leadingLettersRE = regexp.MustCompile(`^[a-z]+`)
)

// splitName splits "c7i-flex.2xlarge" into family "c7i-flex", size
// "2xlarge", category "c" and generation 7.
func splitName(name string) (category, family string, generation int, size string) {
	family, size, _ = strings.Cut(name, ".")
	if m := familyRE.FindStringSubmatch(family); m != nil {
		category = m[1]
		generation, _ = strconv.Atoi(m[2])
	} else {
		category = leadingLettersRE.FindString(family)
	}
	return category, family, generation, size
}

// kubeArch maps an EC2 architecture name to the Kubernetes one ("" = skip).
func kubeArch(a string) string {
	switch a {
	case "x86_64":
		return "amd64"
	case "arm64":
		return "arm64"
	}
	return ""
}

// unit maps s to a deterministic number in [0, 1).
func unit(s string) float64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return float64(h.Sum64()>>11) / float64(uint64(1)<<53)
}

// round4 rounds to 4 decimals, the precision of AWS spot prices, keeping
// the result at least 0.0001.
func round4(v float64) float64 {
	return math.Max(math.Round(v*1e4), 1) / 1e4
}

// spotPrices returns one spot price per zone (zones sorted by name) and how
// they were obtained.
//
//   - zonal: ec2instances.info lists the type's per-zone spot prices sorted
//     ascending, without zone names. The zones are ranked by FNV-1a of
//     "type|zone" and the rank-i zone gets list[i*len(list)/len(zones)], so
//     the whole list is used when the lengths match and spread evenly when
//     they differ.
//   - regional: only spot_avg is known; zone price = avg*(0.95+0.10*u).
//   - derived: no spot figure; zone price = onDemand*(0.30+0.30*u).
//
// u is FNV-1a of "spot|type|zone" mapped to [0,1). Derived prices are rounded
// to 4 decimals. With no figure at all every price is 0 (offering unavailable).
func spotPrices(typ string, zones []string, p linuxPrice) ([]float64, string) {
	out := make([]float64, len(zones))
	var list []float64
	for _, s := range p.Spot {
		if s > 0 {
			list = append(list, float64(s))
		}
	}
	switch {
	case len(list) > 0:
		slices.Sort(list)
		rank := make([]int, len(zones))
		for i := range rank {
			rank[i] = i
		}
		sort.SliceStable(rank, func(a, b int) bool {
			return unit("rank|"+typ+"|"+zones[rank[a]]) < unit("rank|"+typ+"|"+zones[rank[b]])
		})
		for r, zi := range rank {
			out[zi] = list[r*len(list)/len(zones)]
		}
		return out, schema.SpotZonal
	case p.SpotAvg > 0:
		for i, z := range zones {
			out[i] = round4(float64(p.SpotAvg) * (spotRegionalLow + spotRegionalRange*unit("spot|"+typ+"|"+z)))
		}
		return out, schema.SpotRegional
	case p.OnDemand > 0:
		for i, z := range zones {
			out[i] = round4(float64(p.OnDemand) * (spotDerivedLow + spotDerivedRange*unit("spot|"+typ+"|"+z)))
		}
		return out, schema.SpotDerived
	}
	return out, ""
}

// buildType converts a moto record; ok is false for types without a
// supported architecture.
func buildType(mt motoType) (schema.Type, bool) {
	category, family, generation, size := splitName(mt.InstanceType)
	t := schema.Type{
		Name:            mt.InstanceType,
		Category:        category,
		Family:          family,
		Generation:      generation,
		Size:            size,
		CPUManufacturer: mt.ProcessorInfo.Manufacturer,
		VCPU:            mt.VCpuInfo.DefaultVCpus,
		MemoryMiB:       mt.MemoryInfo.SizeInMiB,
		Hypervisor:      mt.Hypervisor,
		BareMetal:       mt.BareMetal,
		IPv4PerENI:      mt.NetworkInfo.Ipv4AddressesPerInterface,
		MaxENIs:         mt.NetworkInfo.MaximumNetworkInterfaces,
		SpotSupported:   slices.Contains(mt.SupportedUsageClasses, "spot"),
	}
	for _, a := range mt.ProcessorInfo.SupportedArchitectures {
		if k := kubeArch(a); k != "" {
			t.Architectures = append(t.Architectures, k)
		}
	}
	if len(t.Architectures) == 0 {
		return t, false
	}
	slices.Sort(t.Architectures)
	t.Architectures = slices.Compact(t.Architectures)

	for _, c := range mt.NetworkInfo.NetworkCards {
		if c.NetworkCardIndex == mt.NetworkInfo.DefaultNetworkCardIndex {
			t.MaxENIs = c.MaximumNetworkInterfaces
			t.NetworkBandwidthMbps = int64(math.Round(c.BaselineBandwidthInGbps * mbpsPerGbps))
		}
	}
	// ENI-limited pod density (AWS VPC CNI without prefix delegation): every
	// ENI gives IPv4PerENI-1 pod IPs (the first is the ENI's own), plus 2 for
	// host-network pods.
	if t.MaxENIs > 0 && t.IPv4PerENI > 0 {
		t.MaxPods = t.MaxENIs*(t.IPv4PerENI-1) + 2
	}
	if s := mt.InstanceStorageInfo; s != nil && s.NvmeSupport != "" && s.NvmeSupport != "unsupported" {
		t.LocalNVMeGB = s.TotalSizeInGB
	}
	if mt.GpuInfo != nil && len(mt.GpuInfo.Gpus) > 0 {
		g := mt.GpuInfo.Gpus[0]
		gpu := &schema.GPU{Name: g.Name, Manufacturer: g.Manufacturer, MemoryMiB: g.MemoryInfo.SizeInMiB}
		for _, x := range mt.GpuInfo.Gpus {
			gpu.Count += x.Count
		}
		t.GPU = gpu
	}
	return t, true
}

// stats summarises a generated catalog.
type stats struct {
	types, regions, zones, offerings, unavailable int
	spotSources                                   map[string]int
}

// String renders the summary printed after generation.
func (s stats) String() string {
	keys := make([]string, 0, len(s.spotSources))
	for k := range s.spotSources {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, s.spotSources[k]))
	}
	return fmt.Sprintf("%d types, %d regions, %d zones, %d offerings (%d unavailable), spot sources per type-region: %s",
		s.types, s.regions, s.zones, s.offerings, s.unavailable, strings.Join(parts, " "))
}

// build assembles the catalog from parsed inputs.
func build(opts options, moto *motoData, prices map[string]map[string]linuxPrice) (*schema.File, stats, error) {
	st := stats{spotSources: map[string]int{}}
	f := &schema.File{
		Schema: schema.Version,
		Sources: []schema.Source{
			{Name: motoName, Version: moto.version, License: motoLicense, Files: []string{
				motoTypesFile, motoOfferingsDir + "/<region>.json.gz", motoZonesFile,
			}},
			{Name: pricesModule, Version: opts.pricesVers, License: pricesLicense, Files: []string{pricesDataFile}},
		},
	}
	for _, r := range opts.regions {
		f.Regions = append(f.Regions, schema.Region{Name: r, Zones: moto.zones[r]})
		st.zones += len(moto.zones[r])
	}
	st.regions = len(f.Regions)

	names := make([]string, 0, len(moto.types))
	for name := range moto.types {
		if fam, _, _ := strings.Cut(name, "."); opts.families.MatchString(fam) {
			names = append(names, name)
		}
	}
	slices.Sort(names)

	for _, name := range names {
		t, ok := buildType(moto.types[name])
		if !ok {
			continue
		}
		priced := false
		for _, region := range opts.regions {
			zones := moto.offerings[region][name]
			if len(zones) == 0 {
				continue
			}
			p := prices[name][region]
			rp := schema.Prices{Region: region, OnDemand: float64(p.OnDemand), Zones: zones}
			if p.OnDemand > 0 {
				priced = true
			}
			if t.SpotSupported {
				rp.Spot, rp.SpotSource = spotPrices(name, zones, p)
			}
			t.Regions = append(t.Regions, rp)
		}
		// A type without any on-demand price in the covered regions cannot
		// be costed (mostly types newer than the price snapshot): skip it.
		if !priced {
			continue
		}
		for _, rp := range t.Regions {
			st.offerings += len(rp.Zones) + len(rp.Spot)
			if rp.OnDemand == 0 {
				st.unavailable += len(rp.Zones)
			}
			for _, s := range rp.Spot {
				if s == 0 {
					st.unavailable++
				}
			}
			if t.SpotSupported {
				st.spotSources[cmp.Or(rp.SpotSource, "none")]++
			}
		}
		f.Types = append(f.Types, t)
	}
	st.types = len(f.Types)
	if st.types == 0 {
		return nil, st, errors.New("no instance type matched the family filter and had a price")
	}
	return f, st, nil
}

// encode renders the catalog as gzip-compressed compact JSON. The gzip header
// carries no name and no timestamp, so equal catalogs give equal bytes.
func encode(f *schema.File) ([]byte, error) {
	raw, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encoding catalog: %w", err)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("creating gzip writer: %w", err)
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("compressing catalog: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing catalog: %w", err)
	}
	return buf.Bytes(), nil
}

// generate reads the inputs named by opts and returns the encoded catalog.
func generate(opts options) ([]byte, stats, error) {
	if len(opts.regions) == 0 {
		return nil, stats{}, errors.New("no regions selected")
	}
	moto, err := readMoto(opts.motoDir, opts.regions)
	if err != nil {
		return nil, stats{}, err
	}
	prices, err := readPrices(opts.pricesDir)
	if err != nil {
		return nil, stats{}, err
	}
	f, st, err := build(opts, moto, prices)
	if err != nil {
		return nil, st, err
	}
	data, err := encode(f)
	return data, st, err
}
