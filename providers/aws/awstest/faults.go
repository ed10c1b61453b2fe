package awstest

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// CapacityFault makes CreateFleet refuse the overrides it matches, as EC2 does when a pool has no
// capacity. Empty fields match any value.
type CapacityFault struct {
	// InstanceType, Zone and CapacityType ("spot" or "on-demand") select the overrides.
	InstanceType, Zone, CapacityType string
	// SubnetID selects overrides by subnet (for InsufficientFreeAddressesInSubnet).
	SubnetID string
	// Code is the error code; empty means InsufficientInstanceCapacity.
	Code string
}

func (c CapacityFault) matches(o FleetOverride, capacityType string) bool {
	return (c.InstanceType == "" || c.InstanceType == o.InstanceType) &&
		(c.Zone == "" || c.Zone == o.Zone) &&
		(c.CapacityType == "" || c.CapacityType == capacityType) &&
		(c.SubnetID == "" || c.SubnetID == o.SubnetID)
}

// FleetOverride is one override of a CreateFleet request.
type FleetOverride struct {
	LaunchTemplate, InstanceType, Zone, SubnetID string
	Priority                                     float64
}

// FleetCall is what one CreateFleet asked for and what came of it.
type FleetCall struct {
	// CapacityType is the request's default target capacity type.
	CapacityType string
	// Overrides are the request's overrides, in order.
	Overrides []FleetOverride
	// Refused are the overrides a CapacityFault refused, with the code.
	Refused map[FleetOverride]string
	// Forwarded tells whether any override was left to send to moto.
	Forwarded bool
}

// Faults is an http.RoundTripper for the SDK clients of a test (put it in aws.Config.HTTPClient
// with Apply) that fills what moto's CreateFleet lacks: it removes the overrides that a
// CapacityFault matches from the request before moto sees it, and reports them in the response's
// Errors, the way EC2 reports a pool without capacity (when every override is refused, it answers
// itself with no instance and only errors). It records every CreateFleet (Fleets) and counts
// every request by operation (Calls), so tests can count the AWS calls per launched node.
type Faults struct {
	next http.RoundTripper

	mu     sync.Mutex
	faults []CapacityFault
	fleets []FleetCall
	calls  map[string]int
}

// NewFaults returns a Faults in front of next (http.DefaultTransport when nil).
func NewFaults(next http.RoundTripper) *Faults {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Faults{next: next, calls: map[string]int{}}
}

// Apply returns cfg with its HTTP client going through f.
func (f *Faults) Apply(cfg aws.Config) aws.Config {
	cfg = cfg.Copy()
	cfg.HTTPClient = &http.Client{Transport: f}
	return cfg
}

// AddCapacityFault makes CreateFleet refuse the matching overrides until cleared.
func (f *Faults) AddCapacityFault(c CapacityFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, c)
}

// ClearCapacityFaults removes every CapacityFault.
func (f *Faults) ClearCapacityFaults() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Fleets returns the CreateFleet calls so far.
func (f *Faults) Fleets() []FleetCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fleets)
}

// Calls returns the requests per operation ("ec2:CreateFleet", "eks:DescribeCluster", ...)
// that went through f, failed ones included.
func (f *Faults) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.calls))
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

// ResetCalls zeroes the counts and forgets the recorded fleets.
func (f *Faults) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = map[string]int{}
	f.fleets = nil
}

// RoundTrip counts the request and rewrites CreateFleet.
func (f *Faults) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	service, action, form := awsCall(req, body)
	if service == "eks" && req.Header.Get("X-Amz-Target") == "" {
		// EKS is a REST API: the method and path name the call.
		action, form = req.Method+" "+req.URL.Path, nil
	}
	f.mu.Lock()
	f.calls[service+":"+action]++
	f.mu.Unlock()
	if service == "ec2" && action == "CreateFleet" && form.Get("DryRun") != "true" {
		return f.createFleet(req, form)
	}
	return f.forward(req, body)
}

func (f *Faults) forward(req *http.Request, body []byte) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return f.next.RoundTrip(out)
}

var overrideKey = regexp.MustCompile(`^LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.(.+)$`)
var configKey = regexp.MustCompile(`^LaunchTemplateConfigs\.(\d+)\.(.+)$`)

// createFleet removes refused overrides, forwards the rest and adds the refusals to the answer.
func (f *Faults) createFleet(req *http.Request, form url.Values) (*http.Response, error) {
	capacityType := form.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	if capacityType == "" {
		capacityType = "on-demand"
	}
	// configs[i] holds the non-override fields of LaunchTemplateConfigs.i; overrides[i][j] the
	// fields of its override j.
	configs := map[int]map[string]string{}
	overrides := map[int]map[int]map[string]string{}
	rest := url.Values{}
	for k, vs := range form {
		if m := overrideKey.FindStringSubmatch(k); m != nil {
			i, _ := strconv.Atoi(m[1])
			j, _ := strconv.Atoi(m[2])
			if overrides[i] == nil {
				overrides[i] = map[int]map[string]string{}
			}
			if overrides[i][j] == nil {
				overrides[i][j] = map[string]string{}
			}
			overrides[i][j][m[3]] = vs[0]
			continue
		}
		if m := configKey.FindStringSubmatch(k); m != nil {
			i, _ := strconv.Atoi(m[1])
			if configs[i] == nil {
				configs[i] = map[string]string{}
			}
			configs[i][m[2]] = vs[0]
			continue
		}
		rest[k] = vs
	}
	call := FleetCall{CapacityType: capacityType, Refused: map[FleetOverride]string{}}
	f.mu.Lock()
	faults := slices.Clone(f.faults)
	f.mu.Unlock()

	kept := url.Values{}
	for k, vs := range rest {
		kept[k] = vs
	}
	var refusedXML strings.Builder
	newConfig := 0
	for _, i := range slices.Sorted(maps.Keys(configs)) {
		lt := configs[i]["LaunchTemplateSpecification.LaunchTemplateName"]
		newOverride := 0
		var keptOverrides []map[string]string
		for _, j := range slices.Sorted(maps.Keys(overrides[i])) {
			o := overrides[i][j]
			prio, _ := strconv.ParseFloat(o["Priority"], 64)
			fo := FleetOverride{LaunchTemplate: lt, InstanceType: o["InstanceType"], Zone: o["AvailabilityZone"], SubnetID: o["SubnetId"], Priority: prio}
			call.Overrides = append(call.Overrides, fo)
			code := ""
			for _, c := range faults {
				if c.matches(fo, capacityType) {
					code = c.Code
					if code == "" {
						code = "InsufficientInstanceCapacity"
					}
					break
				}
			}
			if code != "" {
				call.Refused[fo] = code
				fmt.Fprintf(&refusedXML, "<item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateName>%s</launchTemplateName><version>$Latest</version></launchTemplateSpecification>"+
					"<overrides><instanceType>%s</instanceType><subnetId>%s</subnetId><availabilityZone>%s</availabilityZone></overrides></launchTemplateAndOverrides>"+
					"<lifecycle>%s</lifecycle><errorCode>%s</errorCode><errorMessage>There is no %s capacity for %s in %s (injected by awstest.Faults).</errorMessage></item>",
					xmlEscape(lt), xmlEscape(fo.InstanceType), xmlEscape(fo.SubnetID), xmlEscape(fo.Zone), xmlEscape(capacityType), xmlEscape(code),
					xmlEscape(capacityType), xmlEscape(fo.InstanceType), xmlEscape(fo.Zone))
				continue
			}
			keptOverrides = append(keptOverrides, o)
		}
		if len(keptOverrides) == 0 && len(overrides[i]) > 0 {
			continue
		}
		newConfig++
		for k, v := range configs[i] {
			kept.Set(fmt.Sprintf("LaunchTemplateConfigs.%d.%s", newConfig, k), v)
		}
		for _, o := range keptOverrides {
			newOverride++
			for k, v := range o {
				kept.Set(fmt.Sprintf("LaunchTemplateConfigs.%d.Overrides.%d.%s", newConfig, newOverride, k), v)
			}
		}
	}
	errorSet := ""
	if refusedXML.Len() > 0 {
		errorSet = "<errorSet>" + refusedXML.String() + "</errorSet>"
	}
	call.Forwarded = newConfig > 0
	f.mu.Lock()
	f.fleets = append(f.fleets, call)
	f.mu.Unlock()

	if !call.Forwarded {
		xml := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>awstest-%d</requestId><fleetId>fleet-awstest-%d</fleetId>%s<fleetInstanceSet/></CreateFleetResponse>`,
			time.Now().UnixNano(), time.Now().UnixNano(), errorSet)
		return &http.Response{
			StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"text/xml"}}, Body: io.NopCloser(strings.NewReader(xml)),
			ContentLength: int64(len(xml)), Request: req,
		}, nil
	}
	resp, err := f.forward(req, []byte(kept.Encode()))
	if err != nil || resp.StatusCode != http.StatusOK || errorSet == "" {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	text := string(b)
	if i := strings.LastIndex(text, "</CreateFleetResponse>"); i >= 0 {
		text = text[:i] + errorSet + text[i:]
	}
	resp.Body = io.NopCloser(strings.NewReader(text))
	resp.ContentLength = int64(len(text))
	resp.Header.Set("Content-Length", strconv.Itoa(len(text)))
	return resp, nil
}
