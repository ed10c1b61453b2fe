package aws

import (
	"fmt"
	"strings"
)

// ProviderIDPrefix starts the provider ID of every EC2 instance, as the kubelet's AWS cloud
// integration writes it: aws:///<zone>/<instance id>.
const ProviderIDPrefix = "aws:///"

// ProviderID returns the provider ID of the instance in zone.
func ProviderID(zone, instanceID string) string {
	return ProviderIDPrefix + zone + "/" + instanceID
}

// ParseProviderID returns the instance ID of a provider ID of the form aws:///<zone>/<id> (the
// zone may be empty: aws:///<id> is accepted too).
func ParseProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return "", fmt.Errorf("provider id %q is not an EC2 instance: it does not start with %q", providerID, ProviderIDPrefix)
	}
	parts := strings.Split(rest, "/")
	id := parts[len(parts)-1]
	if len(parts) > 2 || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider id %q is not of the form %s<zone>/i-<id>", providerID, ProviderIDPrefix)
	}
	return id, nil
}
