package cloudprovider

import (
	"errors"
	"fmt"
)

// InsufficientCapacityError reports that the cloud had no capacity for an offering. It names the
// offering, so the caller can mark it unavailable for a while and try another.
type InsufficientCapacityError struct {
	// InstanceType, Zone and CapacityType name the offering; any may be "" when the provider
	// could not tell (for instance a whole zone ran out).
	InstanceType, Zone, CapacityType string
	// Err is the provider's error.
	Err error
}

// NewInsufficientCapacityError returns an *InsufficientCapacityError for the offering.
func NewInsufficientCapacityError(instanceType, zone, capacityType string, err error) error {
	return &InsufficientCapacityError{InstanceType: instanceType, Zone: zone, CapacityType: capacityType, Err: err}
}

// Error says which offering ran out.
func (e *InsufficientCapacityError) Error() string {
	return withCause(fmt.Sprintf("insufficient capacity for instance type %q in zone %q (capacity type %q)", e.InstanceType, e.Zone, e.CapacityType), e.Err)
}

// Unwrap returns the provider's error.
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// IsInsufficientCapacity reports whether err is or wraps an *InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	_, ok := AsInsufficientCapacity(err)
	return ok
}

// AsInsufficientCapacity returns the *InsufficientCapacityError in err's chain, if any.
func AsInsufficientCapacity(err error) (*InsufficientCapacityError, bool) {
	var e *InsufficientCapacityError
	ok := errors.As(err, &e)
	return e, ok
}

// NodeClaimNotFoundError reports that the machine of a NodeClaim does not exist (any more).
type NodeClaimNotFoundError struct {
	// Err is the provider's error.
	Err error
}

// NewNodeClaimNotFoundError returns a *NodeClaimNotFoundError wrapping err.
func NewNodeClaimNotFoundError(err error) error {
	return &NodeClaimNotFoundError{Err: err}
}

// Error says the machine was not found.
func (e *NodeClaimNotFoundError) Error() string { return withCause("nodeclaim not found", e.Err) }

// Unwrap returns the provider's error.
func (e *NodeClaimNotFoundError) Unwrap() error { return e.Err }

// IsNodeClaimNotFound reports whether err is or wraps a *NodeClaimNotFoundError.
func IsNodeClaimNotFound(err error) bool { return isA[*NodeClaimNotFoundError](err) }

// IgnoreNodeClaimNotFound returns nil when err is a *NodeClaimNotFoundError, else err.
func IgnoreNodeClaimNotFound(err error) error {
	if IsNodeClaimNotFound(err) {
		return nil
	}
	return err
}

// NodeClassNotReadyError reports that a NodeClaim's node class exists but cannot be used yet
// (its status is not Ready), so launching should wait rather than fail for good.
type NodeClassNotReadyError struct {
	// Err says what is not ready.
	Err error
}

// NewNodeClassNotReadyError returns a *NodeClassNotReadyError wrapping err.
func NewNodeClassNotReadyError(err error) error {
	return &NodeClassNotReadyError{Err: err}
}

// Error says the node class is not ready.
func (e *NodeClassNotReadyError) Error() string { return withCause("node class not ready", e.Err) }

// Unwrap returns the wrapped error.
func (e *NodeClassNotReadyError) Unwrap() error { return e.Err }

// IsNodeClassNotReady reports whether err is or wraps a *NodeClassNotReadyError.
func IsNodeClassNotReady(err error) bool { return isA[*NodeClassNotReadyError](err) }

// CreateError is a launch failure with a short machine-readable reason and a message for the
// NodeClaim's Launched condition.
type CreateError struct {
	// Reason is a CamelCase condition reason, such as "LaunchTemplateNotFound".
	Reason string
	// Message is the condition message.
	Message string
	// Err is the underlying error.
	Err error
}

// NewCreateError returns a *CreateError.
func NewCreateError(err error, reason, message string) error {
	return &CreateError{Reason: reason, Message: message, Err: err}
}

// Error returns the message and the underlying error.
func (e *CreateError) Error() string { return withCause(e.Message, e.Err) }

// Unwrap returns the underlying error.
func (e *CreateError) Unwrap() error { return e.Err }

// withCause returns msg, followed by ": " and the cause when there is one.
func withCause(msg string, cause error) string {
	if cause == nil {
		return msg
	}
	return msg + ": " + cause.Error()
}

// isA reports whether err is or wraps an error of type E.
func isA[E error](err error) bool {
	var e E
	return errors.As(err, &e)
}
