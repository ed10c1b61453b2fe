package awstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// CapacityReservation is an EC2 capacity reservation the front serves through
// ec2:DescribeCapacityReservations (moto does not implement it).
type CapacityReservation struct {
	// ID is generated ("cr-" and 17 hex digits) when empty.
	ID                 string
	InstanceType       string
	AvailabilityZone   string
	AvailabilityZoneID string
	// OwnerID defaults to AccountID.
	OwnerID string
	// InstanceMatchCriteria is "open" (the default) or "targeted".
	InstanceMatchCriteria string
	// State defaults to "active".
	State string
	// ReservationType is "default" (the default) or "capacity-block".
	ReservationType        string
	TotalInstanceCount     int32
	AvailableInstanceCount int32
	EndDate                *time.Time
	Interruptible          bool
	Tags                   map[string]string
}

// AddCapacityReservation adds a reservation with the defaults above filled in, and returns it.
func (m *Moto) AddCapacityReservation(cr CapacityReservation) CapacityReservation {
	f := m.front
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	if cr.ID == "" {
		sum := sha256.Sum256(fmt.Appendf(nil, "%p/%d", f, f.seq))
		cr.ID = "cr-" + hex.EncodeToString(sum[:])[:17]
	}
	if cr.OwnerID == "" {
		cr.OwnerID = AccountID
	}
	if cr.InstanceMatchCriteria == "" {
		cr.InstanceMatchCriteria = "open"
	}
	if cr.State == "" {
		cr.State = "active"
	}
	if cr.ReservationType == "" {
		cr.ReservationType = "default"
	}
	f.reservations = append(f.reservations, cr)
	return cr
}

// UpdateCapacityReservation changes the reservation with the ID in place (for instance its
// available count or state) and reports whether it exists.
func (m *Moto) UpdateCapacityReservation(id string, update func(*CapacityReservation)) bool {
	f := m.front
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.reservations {
		if f.reservations[i].ID == id {
			update(&f.reservations[i])
			return true
		}
	}
	return false
}

// describeCapacityReservations serves ec2:DescribeCapacityReservations: the IDs asked for (an
// unknown one is InvalidCapacityReservationId.NotFound, as in EC2) filtered by the request's
// filters, all on one page.
func (f *front) describeCapacityReservations(w http.ResponseWriter, form url.Values) {
	if form.Get("DryRun") == "true" {
		writeError(w, "ec2", http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
		return
	}
	ids := indexed(form, "CapacityReservationId.%d")
	filters := filtersOf(form)
	f.mu.Lock()
	all := append([]CapacityReservation(nil), f.reservations...)
	f.mu.Unlock()

	for _, id := range ids {
		if !slices.ContainsFunc(all, func(cr CapacityReservation) bool { return cr.ID == id }) {
			writeError(w, "ec2", http.StatusBadRequest, "InvalidCapacityReservationId.NotFound",
				fmt.Sprintf("The capacity reservation ID '%s' does not exist", id))
			return
		}
	}
	var items []capacityReservationXML
	for _, cr := range all {
		if len(ids) > 0 && !slices.ContainsFunc(ids, func(id string) bool { return id == cr.ID }) {
			continue
		}
		ok, err := matchesFilters(cr, filters)
		if err != nil {
			writeError(w, "ec2", http.StatusBadRequest, "InvalidParameterValue", err.Error())
			return
		}
		if ok {
			items = append(items, toXML(cr))
		}
	}
	out := describeCapacityReservationsResponse{
		XMLNS: "http://ec2.amazonaws.com/doc/2016-11-15/", RequestID: fmt.Sprintf("awstest-%d", time.Now().UnixNano()), Items: items,
	}
	writeXML(w, out)
}

// writeXML answers an EC2 request with v marshalled.
func writeXML(w http.ResponseWriter, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		writeError(w, "ec2", http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

func indexed(form url.Values, format string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[fmt.Sprintf(format, i)]
		if !ok || len(v) == 0 {
			return out
		}
		out = append(out, v[0])
	}
}

// filtersOf reads an EC2 request's Filter.N.Name and Filter.N.Value.M into values by name.
func filtersOf(form url.Values) map[string][]string {
	filters := map[string][]string{}
	for i := 1; ; i++ {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			return filters
		}
		filters[name] = indexed(form, fmt.Sprintf("Filter.%d.Value.%%d", i))
	}
}

// matchesFilters applies EC2 filter semantics: filters are ANDed, values of one filter ORed,
// and values may hold the wildcards * and ?.
func matchesFilters(cr CapacityReservation, filters map[string][]string) (bool, error) {
	for name, values := range filters {
		var got []string
		switch {
		case name == "instance-type":
			got = []string{cr.InstanceType}
		case name == "availability-zone":
			got = []string{cr.AvailabilityZone}
		case name == "owner-id":
			got = []string{cr.OwnerID}
		case name == "state":
			got = []string{cr.State}
		case name == "instance-match-criteria":
			got = []string{cr.InstanceMatchCriteria}
		case name == "tag-key":
			for k := range cr.Tags {
				got = append(got, k)
			}
		case strings.HasPrefix(name, "tag:"):
			if v, ok := cr.Tags[strings.TrimPrefix(name, "tag:")]; ok {
				got = []string{v}
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

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			// path.Match's * does not cross "/", EC2's does: match segment-free strings.
			if ok, _ := path.Match(strings.ReplaceAll(p, "/", "\x00"), strings.ReplaceAll(v, "/", "\x00")); ok {
				return true
			}
		}
	}
	return false
}

type describeCapacityReservationsResponse struct {
	XMLName   xml.Name                 `xml:"DescribeCapacityReservationsResponse"`
	XMLNS     string                   `xml:"xmlns,attr"`
	RequestID string                   `xml:"requestId"`
	Items     []capacityReservationXML `xml:"capacityReservationSet>item"`
}

type capacityReservationXML struct {
	ID                     string   `xml:"capacityReservationId"`
	OwnerID                string   `xml:"ownerId"`
	ARN                    string   `xml:"capacityReservationArn"`
	AvailabilityZoneID     string   `xml:"availabilityZoneId,omitempty"`
	InstanceType           string   `xml:"instanceType"`
	InstancePlatform       string   `xml:"instancePlatform"`
	AvailabilityZone       string   `xml:"availabilityZone"`
	Tenancy                string   `xml:"tenancy"`
	TotalInstanceCount     int32    `xml:"totalInstanceCount"`
	AvailableInstanceCount int32    `xml:"availableInstanceCount"`
	State                  string   `xml:"state"`
	EndDate                string   `xml:"endDate,omitempty"`
	EndDateType            string   `xml:"endDateType"`
	InstanceMatchCriteria  string   `xml:"instanceMatchCriteria"`
	CreateDate             string   `xml:"createDate"`
	ReservationType        string   `xml:"reservationType"`
	Interruptible          bool     `xml:"interruptible"`
	Tags                   []tagXML `xml:"tagSet>item"`
}

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func toXML(cr CapacityReservation) capacityReservationXML {
	out := capacityReservationXML{
		ID: cr.ID, OwnerID: cr.OwnerID, ARN: "arn:aws:ec2:" + Region + ":" + cr.OwnerID + ":capacity-reservation/" + cr.ID,
		AvailabilityZoneID: cr.AvailabilityZoneID, InstanceType: cr.InstanceType, InstancePlatform: "Linux/UNIX",
		AvailabilityZone: cr.AvailabilityZone, Tenancy: "default", TotalInstanceCount: cr.TotalInstanceCount,
		AvailableInstanceCount: cr.AvailableInstanceCount, State: cr.State, EndDateType: "unlimited",
		InstanceMatchCriteria: cr.InstanceMatchCriteria, CreateDate: "2026-09-01T00:00:00.000Z",
		ReservationType: cr.ReservationType, Interruptible: cr.Interruptible,
	}
	if cr.EndDate != nil {
		out.EndDate = cr.EndDate.UTC().Format("2006-01-02T15:04:05.000Z")
		out.EndDateType = "limited"
	}
	keys := make([]string, 0, len(cr.Tags))
	for k := range cr.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Tags = append(out.Tags, tagXML{Key: k, Value: cr.Tags[k]})
	}
	return out
}
