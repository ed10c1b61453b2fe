package local

import (
	"regexp"
	"testing"
)

func TestParseProviderID(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    InstanceID
		wantErr bool
	}{
		{in: "local:///us-east-1/us-east-1a/i-0123456789abcdef0", want: InstanceID{Region: "us-east-1", Zone: "us-east-1a", ID: "i-0123456789abcdef0"}},
		{in: "aws:///us-east-1a/i-0123456789abcdef0", wantErr: true},
		{in: "local:///us-east-1/i-0123", wantErr: true},
		{in: "local:///us-east-1//i-0123", wantErr: true},
		{in: "local:///a/b/c/d", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := ParseProviderID(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseProviderID(%q) error = %v, want error %t", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && (got != tc.want || got.ProviderID() != tc.in) {
			t.Errorf("ParseProviderID(%q) = %+v (round trip %q), want %+v", tc.in, got, got.ProviderID(), tc.want)
		}
	}
}

func TestNewInstanceID(t *testing.T) {
	pattern := regexp.MustCompile(`^i-[0-9a-f]{17}$`)
	seen := map[string]bool{}
	for range 1000 {
		id, err := newInstanceID()
		if err != nil {
			t.Fatal(err)
		}
		if !pattern.MatchString(id) {
			t.Fatalf("instance id %q does not look like an EC2 instance id", id)
		}
		if seen[id] {
			t.Fatalf("instance id %q repeated", id)
		}
		seen[id] = true
	}
}
