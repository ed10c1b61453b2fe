package awstest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// This file is test support filling a moto gap: moto's ec2:DescribeInstanceStatus reports both
// status checks of every running instance "ok", never a scheduled event, and ignores the status
// and event filters and MaxResults (it answers every instance on one page). The front answers
// DescribeInstanceStatus itself: it takes the instances (and their state and zone) from moto,
// lays the health set with SetInstanceHealth over them, applies EC2's filters and pages the answer
// as EC2 does, in EC2's XML shape.

// InstanceHealth is what DescribeInstanceStatus reports of one instance beyond moto.
type InstanceHealth struct {
	// InstanceStatus and SystemStatus replace the status of the instance and system checks:
	// "ok", "impaired", "insufficient-data", "not-applicable" or "initializing"; empty keeps
	// moto's ("ok" for a running instance).
	InstanceStatus, SystemStatus string
	// ImpairedSince is reported on the failed reachability detail of an impaired check, as EC2
	// does; zero leaves it out.
	ImpairedSince time.Time
	// Events are the instance's scheduled events.
	Events []InstanceEvent
}

// InstanceEvent is a scheduled event of an instance, as EC2 reports retirements and maintenance.
type InstanceEvent struct {
	// Code is instance-reboot, system-reboot, system-maintenance, instance-retirement or
	// instance-stop.
	Code string
	// Description defaults to one naming the code.
	Description string
	// NotBefore and NotAfter bound the event's window; a zero NotAfter is left out.
	NotBefore, NotAfter time.Time
	// ID ("instance-event-" and 17 hex digits) is generated when empty.
	ID string
}

// SetInstanceHealth makes DescribeInstanceStatus report h for the instance (replacing what was
// set before) until ClearInstanceHealth.
func (m *Moto) SetInstanceHealth(instanceID string, h InstanceHealth) {
	f := m.front
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range h.Events {
		e := &h.Events[i]
		if e.ID == "" {
			f.seq++
			sum := sha256.Sum256(fmt.Appendf(nil, "%p/%d", f, f.seq))
			e.ID = "instance-event-" + hex.EncodeToString(sum[:])[:17]
		}
		if e.Description == "" {
			e.Description = fmt.Sprintf("The instance is scheduled for %s (injected by awstest)", e.Code)
		}
	}
	h.Events = append([]InstanceEvent(nil), h.Events...)
	if f.health == nil {
		f.health = map[string]InstanceHealth{}
	}
	f.health[instanceID] = h
}

// ClearInstanceHealth makes DescribeInstanceStatus report moto's health for the instance again.
func (m *Moto) ClearInstanceHealth(instanceID string) {
	m.front.mu.Lock()
	defer m.front.mu.Unlock()
	delete(m.front.health, instanceID)
}

// instanceStatusXML is one item of instanceStatusSet, in EC2's shape.
type instanceStatusXML struct {
	InstanceID       string             `xml:"instanceId"`
	AvailabilityZone string             `xml:"availabilityZone"`
	State            instanceStateXML   `xml:"instanceState"`
	SystemStatus     statusSummaryXML   `xml:"systemStatus"`
	InstanceStatus   statusSummaryXML   `xml:"instanceStatus"`
	Events           []instanceEventXML `xml:"eventsSet>item,omitempty"`
}

type instanceStateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type statusSummaryXML struct {
	Status  string            `xml:"status"`
	Details []statusDetailXML `xml:"details>item,omitempty"`
}

type statusDetailXML struct {
	Name          string `xml:"name"`
	Status        string `xml:"status"`
	ImpairedSince string `xml:"impairedSince,omitempty"`
}

type instanceEventXML struct {
	ID          string `xml:"instanceEventId"`
	Code        string `xml:"code"`
	Description string `xml:"description"`
	NotBefore   string `xml:"notBefore"`
	NotAfter    string `xml:"notAfter,omitempty"`
}

type describeInstanceStatusResponse struct {
	XMLName   xml.Name            `xml:"DescribeInstanceStatusResponse"`
	XMLNS     string              `xml:"xmlns,attr,omitempty"`
	RequestID string              `xml:"requestId"`
	Items     []instanceStatusXML `xml:"instanceStatusSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

// ec2Time is how EC2 writes timestamps.
func ec2Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// instanceStatusPageBounds are EC2's bounds of MaxResults.
const minInstanceStatusPage, maxInstanceStatusPage = 5, 1000

// describeInstanceStatus serves ec2:DescribeInstanceStatus over moto's instances.
func (f *front) describeInstanceStatus(w http.ResponseWriter, r *http.Request, form url.Values) {
	if form.Get("DryRun") == "true" {
		writeError(w, "ec2", http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
		return
	}
	ids := indexed(form, "InstanceId.%d")
	page, offset, err := instanceStatusPaging(form, len(ids) > 0)
	if err != nil {
		writeError(w, "ec2", http.StatusBadRequest, err.code, err.message)
		return
	}
	ask := url.Values{"Action": {"DescribeInstanceStatus"}, "Version": {form.Get("Version")}, "IncludeAllInstances": {form.Get("IncludeAllInstances")}}
	for i, id := range ids {
		ask.Set("InstanceId."+strconv.Itoa(i+1), id)
	}
	resp, body, callErr := f.callMoto(r, []byte(ask.Encode()))
	if callErr != nil {
		if r.Context().Err() == nil {
			http.Error(w, "awstest: forward DescribeInstanceStatus to moto: "+callErr.Error(), http.StatusBadGateway)
		}
		return
	}
	if resp.StatusCode != http.StatusOK {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	var fromMoto describeInstanceStatusResponse
	if err := xml.Unmarshal(body, &fromMoto); err != nil {
		writeError(w, "ec2", http.StatusInternalServerError, "InternalError", "awstest: read moto's DescribeInstanceStatus answer: "+err.Error())
		return
	}
	filters := filtersOf(form)
	var matched []instanceStatusXML
	f.mu.Lock()
	for _, item := range fromMoto.Items {
		if h, ok := f.health[item.InstanceID]; ok {
			item = withHealth(item, h)
		}
		ok, err := matchesStatusFilters(item, filters)
		if err != nil {
			f.mu.Unlock()
			writeError(w, "ec2", http.StatusBadRequest, "InvalidParameterValue", err.Error())
			return
		}
		if ok {
			matched = append(matched, item)
		}
	}
	f.mu.Unlock()
	out := describeInstanceStatusResponse{XMLNS: "http://ec2.amazonaws.com/doc/2016-11-15/", RequestID: fmt.Sprintf("awstest-%d", time.Now().UnixNano())}
	offset = min(offset, len(matched))
	end := len(matched)
	if page > 0 && offset+page < end {
		end = offset + page
		out.NextToken = instanceStatusToken(end)
	}
	out.Items = matched[offset:end]
	writeXML(w, out)
}

type ec2Error struct{ code, message string }

// instanceStatusPaging reads MaxResults (0: all on one page) and the offset NextToken holds,
// refusing what EC2 refuses.
func instanceStatusPaging(form url.Values, withIDs bool) (page, offset int, err *ec2Error) {
	if v := form.Get("MaxResults"); v != "" {
		if withIDs {
			return 0, 0, &ec2Error{"InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults"}
		}
		n, convErr := strconv.Atoi(v)
		if convErr != nil || n < minInstanceStatusPage || n > maxInstanceStatusPage {
			return 0, 0, &ec2Error{"InvalidParameterValue", fmt.Sprintf("Value ( %s ) for parameter maxResults is invalid. Expecting a value between %d and %d.", v, minInstanceStatusPage, maxInstanceStatusPage)}
		}
		page = n
	}
	if t := form.Get("NextToken"); t != "" {
		raw, decErr := base64.RawURLEncoding.DecodeString(t)
		n, convErr := strconv.Atoi(strings.TrimPrefix(string(raw), instanceStatusTokenPrefix))
		if decErr != nil || convErr != nil || !strings.HasPrefix(string(raw), instanceStatusTokenPrefix) || n < 0 {
			return 0, 0, &ec2Error{"InvalidParameterValue", fmt.Sprintf("The token '%s' is invalid.", t)}
		}
		offset = n
	}
	return page, offset, nil
}

const instanceStatusTokenPrefix = "awstest-instance-status:"

func instanceStatusToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(instanceStatusTokenPrefix + strconv.Itoa(offset)))
}

// withHealth lays h over moto's report of an instance.
func withHealth(item instanceStatusXML, h InstanceHealth) instanceStatusXML {
	check := func(s *statusSummaryXML, status string) {
		if status == "" {
			return
		}
		detail := statusDetailXML{Name: "reachability", Status: "passed"}
		switch status {
		case "impaired":
			detail.Status = "failed"
			if !h.ImpairedSince.IsZero() {
				detail.ImpairedSince = ec2Time(h.ImpairedSince)
			}
		case "insufficient-data", "initializing", "not-applicable":
			detail.Status = status
		}
		*s = statusSummaryXML{Status: status, Details: []statusDetailXML{detail}}
	}
	check(&item.InstanceStatus, h.InstanceStatus)
	check(&item.SystemStatus, h.SystemStatus)
	item.Events = nil
	for _, e := range h.Events {
		ev := instanceEventXML{ID: e.ID, Code: e.Code, Description: e.Description, NotBefore: ec2Time(e.NotBefore)}
		if !e.NotAfter.IsZero() {
			ev.NotAfter = ec2Time(e.NotAfter)
		}
		item.Events = append(item.Events, ev)
	}
	return item
}

// matchesStatusFilters applies the DescribeInstanceStatus filters the front knows.
func matchesStatusFilters(item instanceStatusXML, filters map[string][]string) (bool, error) {
	for name, values := range filters {
		var got []string
		switch name {
		case "availability-zone":
			got = []string{item.AvailabilityZone}
		case "instance-state-name":
			got = []string{item.State.Name}
		case "instance-state-code":
			got = []string{strconv.Itoa(item.State.Code)}
		case "instance-status.status":
			got = []string{item.InstanceStatus.Status}
		case "system-status.status":
			got = []string{item.SystemStatus.Status}
		case "instance-status.reachability":
			got = detailStatuses(item.InstanceStatus)
		case "system-status.reachability":
			got = detailStatuses(item.SystemStatus)
		case "event.code", "event.description", "event.instance-event-id":
			for _, e := range item.Events {
				got = append(got, map[string]string{"event.code": e.Code, "event.description": e.Description, "event.instance-event-id": e.ID}[name])
			}
		default:
			return false, fmt.Errorf("the filter '%s' is invalid", name)
		}
		if !anyMatch(values, got) {
			return false, nil
		}
	}
	return true, nil
}

func detailStatuses(s statusSummaryXML) []string {
	var out []string
	for _, d := range s.Details {
		if d.Name == "reachability" {
			out = append(out, d.Status)
		}
	}
	return out
}
