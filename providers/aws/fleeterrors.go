package aws

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// EC2 error codes that mean "no capacity for this request right now": the offering (or subnet,
// or capacity type) is marked unavailable and the launch tries another.
const (
	codeInsufficientInstanceCapacity      = "InsufficientInstanceCapacity"
	codeMaxSpotInstanceCountExceeded      = "MaxSpotInstanceCountExceeded"
	codeVcpuLimitExceeded                 = "VcpuLimitExceeded"
	codeUnfulfillableCapacity             = "UnfulfillableCapacity"
	codeUnsupported                       = "Unsupported"
	codeInsufficientFreeAddressesInSubnet = "InsufficientFreeAddressesInSubnet"
	codeMaxFleetCountExceeded             = "MaxFleetCountExceeded"
	codeReservationCapacityExceeded       = "ReservationCapacityExceeded"
	// codeSpotServiceLinkedRole means the account cannot use spot at all until the spot
	// service-linked role exists.
	codeSpotServiceLinkedRole = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
)

// Other EC2 error codes the provider acts on.
const (
	codeInstanceNotFound       = "InvalidInstanceID.NotFound"
	codeLaunchTemplateNotFound = "InvalidLaunchTemplateName.NotFoundException"
	codeLaunchTemplateIDNotFnd = "InvalidLaunchTemplateId.NotFound"
	codeLaunchTemplateIDMalf   = "InvalidLaunchTemplateId.Malformed"
	codeLaunchTemplateExists   = "InvalidLaunchTemplateName.AlreadyExistsException"
)

var capacityCodes = []string{
	codeInsufficientInstanceCapacity, codeMaxSpotInstanceCountExceeded, codeVcpuLimitExceeded,
	codeUnfulfillableCapacity, codeUnsupported, codeInsufficientFreeAddressesInSubnet,
	codeMaxFleetCountExceeded, codeReservationCapacityExceeded, codeSpotServiceLinkedRole,
}

// IsCapacityCode reports whether an EC2 error code means a lack of capacity (or of a limit that
// behaves like it), which routes the launch to another offering instead of failing it.
func IsCapacityCode(code string) bool { return slices.Contains(capacityCodes, code) }

// FleetError is one entry of CreateFleet's Errors, with the override it refers to.
type FleetError struct {
	// Code and Message are EC2's.
	Code, Message string
	// InstanceType, Zone and SubnetID name the override; Zone is filled from the subnet when
	// EC2 left it out.
	InstanceType, Zone, SubnetID string
	// CapacityType is "spot" or "on-demand".
	CapacityType string
}

// Error returns "<code>: <message> (<type> in <zone>, <capacity type>)".
func (e FleetError) Error() string {
	return fmt.Sprintf("%s: %s (%s in %s, %s)", e.Code, e.Message, e.InstanceType, e.Zone, e.CapacityType)
}

// ParseFleetErrors turns CreateFleet's Errors into FleetErrors. capacityType is the fleet's
// target capacity type, used when an entry has no lifecycle; zoneOfSubnet resolves the zone of
// an override that names only its subnet (nil for none).
func ParseFleetErrors(errs []ec2types.CreateFleetError, capacityType string, zoneOfSubnet func(string) string) []FleetError {
	out := make([]FleetError, 0, len(errs))
	for _, e := range errs {
		fe := FleetError{Code: aws.ToString(e.ErrorCode), Message: aws.ToString(e.ErrorMessage), CapacityType: capacityType}
		switch e.Lifecycle {
		case ec2types.InstanceLifecycleSpot:
			fe.CapacityType = karpv1.CapacityTypeSpot
		case ec2types.InstanceLifecycleOnDemand:
			fe.CapacityType = karpv1.CapacityTypeOnDemand
		}
		if lto := e.LaunchTemplateAndOverrides; lto != nil && lto.Overrides != nil {
			o := lto.Overrides
			fe.InstanceType = string(o.InstanceType)
			fe.Zone = aws.ToString(o.AvailabilityZone)
			fe.SubnetID = aws.ToString(o.SubnetId)
		}
		if fe.Zone == "" && fe.SubnetID != "" && zoneOfSubnet != nil {
			fe.Zone = zoneOfSubnet(fe.SubnetID)
		}
		out = append(out, fe)
	}
	return out
}

// Record marks what each capacity error of a fleet refused: the subnet for
// InsufficientFreeAddressesInSubnet, the whole capacity type for account-wide spot limits, else
// the offering. It returns how many entries it recorded; other errors are ignored.
func (u *UnavailableOfferings) Record(errs []FleetError) int {
	n := 0
	for _, e := range errs {
		switch {
		case !IsCapacityCode(e.Code):
			continue
		case e.Code == codeInsufficientFreeAddressesInSubnet && e.SubnetID != "":
			u.MarkSubnetUnavailable(e.SubnetID)
		case e.Code == codeMaxSpotInstanceCountExceeded || e.Code == codeSpotServiceLinkedRole:
			u.MarkCapacityTypeUnavailable(karpv1.CapacityTypeSpot)
		case e.InstanceType != "" && e.Zone != "":
			u.MarkUnavailable(e.InstanceType, e.Zone, e.CapacityType)
		default:
			continue
		}
		n++
	}
	return n
}

// errorCode returns the AWS error code of err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// hasCode reports whether err is an AWS error with one of the codes.
func hasCode(err error, codes ...string) bool {
	code := errorCode(err)
	return code != "" && slices.Contains(codes, code)
}

// summarizeFleetErrors returns the distinct codes with a count, for messages: "InsufficientInstanceCapacity x3, Unsupported".
func summarizeFleetErrors(errs []FleetError) string {
	counts := map[string]int{}
	var order []string
	for _, e := range errs {
		if counts[e.Code] == 0 {
			order = append(order, e.Code)
		}
		counts[e.Code]++
	}
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = c
		if counts[c] > 1 {
			parts[i] += fmt.Sprintf(" x%d", counts[c])
		}
	}
	return strings.Join(parts, ", ")
}
