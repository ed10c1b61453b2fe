package local

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// ProviderIDPrefix starts the provider ID of every local instance.
const ProviderIDPrefix = "local:///"

// InstanceID is the parsed provider ID of a local instance, local:///<region>/<zone>/<id>.
type InstanceID struct {
	// Region is the instance's region, such as "us-east-1".
	Region string
	// Zone is the instance's zone, such as "us-east-1a".
	Zone string
	// ID is the instance's ID, such as "i-0123456789abcdef0"; it is also the name of its Node.
	ID string
}

// ProviderID returns the provider ID, local:///<region>/<zone>/<id>.
func (id InstanceID) ProviderID() string {
	return ProviderIDPrefix + id.Region + "/" + id.Zone + "/" + id.ID
}

// ParseProviderID parses a provider ID of the form local:///<region>/<zone>/<id>.
func ParseProviderID(providerID string) (InstanceID, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return InstanceID{}, fmt.Errorf("provider id %q is not a local instance: it does not start with %q", providerID, ProviderIDPrefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return InstanceID{}, fmt.Errorf("provider id %q is not of the form %s<region>/<zone>/<instance id>", providerID, ProviderIDPrefix)
	}
	return InstanceID{Region: parts[0], Zone: parts[1], ID: parts[2]}, nil
}

// newInstanceID returns a random EC2-style instance ID, "i-" and 17 hex digits.
func newInstanceID() (string, error) {
	var b [9]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate instance id: %w", err)
	}
	return "i-" + hex.EncodeToString(b[:])[:17], nil
}
