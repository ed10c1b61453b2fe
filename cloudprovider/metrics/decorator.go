// Package metrics decorates a cloud provider with Karpenter's cloud provider metrics: every call
// is timed in karpenter_cloudprovider_duration_seconds and every error counted in
// karpenter_cloudprovider_errors_total, labelled with the calling controller, the method and the
// provider's name.
//
// The operator wraps the provider once (Decorate) and each controller gets its own view of it
// (ForController), which names the controller in the metrics' controller label.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// Method label values, the names of the cloudprovider.CloudProvider methods.
const (
	MethodCreate           = "Create"
	MethodDelete           = "Delete"
	MethodGet              = "Get"
	MethodList             = "List"
	MethodGetInstanceTypes = "GetInstanceTypes"
	MethodIsDrifted        = "IsDrifted"
	MethodName             = "Name"
)

// Decorated is a cloud provider whose calls are measured. It is safe for concurrent use, like the
// provider it wraps. The zero value is not usable; build one with Decorate.
type Decorated struct {
	cloud      cloudprovider.CloudProvider
	metrics    *Metrics
	controller string
}

var _ cloudprovider.CloudProvider = (*Decorated)(nil)

// Decorate wraps cloud so that its calls are measured, registering the metrics with reg (nil
// skips registration; metrics already registered with reg are reused). The result labels its
// calls with controller ""; give each caller its own view with For or ForController.
func Decorate(cloud cloudprovider.CloudProvider, reg prometheus.Registerer) (*Decorated, error) {
	if cloud == nil {
		return nil, errors.New("decorate cloud provider with metrics: no provider")
	}
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("decorate cloud provider with metrics: %w", err)
	}
	return &Decorated{cloud: cloud, metrics: m}, nil
}

// For returns a view of the provider whose calls are labelled controller=name. The views share
// the wrapped provider and the metrics.
func (d *Decorated) For(name string) cloudprovider.CloudProvider {
	view := *d
	view.controller = name
	return &view
}

// Unwrap returns the wrapped provider.
func (d *Decorated) Unwrap() cloudprovider.CloudProvider { return d.cloud }

// ForController returns cp's view for the controller called name when cp is a *Decorated, and
// cp unchanged otherwise (so callers need not know whether the provider is measured).
func ForController(cp cloudprovider.CloudProvider, name string) cloudprovider.CloudProvider {
	if d, ok := cp.(*Decorated); ok {
		return d.For(name)
	}
	return cp
}

// Create measures the wrapped provider's Create.
func (d *Decorated) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	defer d.observe(MethodCreate, time.Now())
	out, err := d.cloud.Create(ctx, nodeClaim)
	d.countError(MethodCreate, err)
	return out, err
}

// Delete measures the wrapped provider's Delete. A *NodeClaimNotFoundError counts as an error,
// as it is one to the provider, even though callers treat it as success.
func (d *Decorated) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	defer d.observe(MethodDelete, time.Now())
	err := d.cloud.Delete(ctx, nodeClaim)
	d.countError(MethodDelete, err)
	return err
}

// Get measures the wrapped provider's Get.
func (d *Decorated) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	defer d.observe(MethodGet, time.Now())
	out, err := d.cloud.Get(ctx, providerID)
	d.countError(MethodGet, err)
	return out, err
}

// List measures the wrapped provider's List.
func (d *Decorated) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	defer d.observe(MethodList, time.Now())
	out, err := d.cloud.List(ctx)
	d.countError(MethodList, err)
	return out, err
}

// GetInstanceTypes measures the wrapped provider's GetInstanceTypes.
func (d *Decorated) GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	defer d.observe(MethodGetInstanceTypes, time.Now())
	out, err := d.cloud.GetInstanceTypes(ctx, nodePool)
	d.countError(MethodGetInstanceTypes, err)
	return out, err
}

// IsDrifted measures the wrapped provider's IsDrifted.
func (d *Decorated) IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	defer d.observe(MethodIsDrifted, time.Now())
	out, err := d.cloud.IsDrifted(ctx, nodeClaim)
	d.countError(MethodIsDrifted, err)
	return out, err
}

// RepairPolicies returns the wrapped provider's policies (a static list: not measured).
func (d *Decorated) RepairPolicies() []cloudprovider.RepairPolicy {
	return d.cloud.RepairPolicies()
}

// Name measures the wrapped provider's Name (it cannot fail).
func (d *Decorated) Name() string {
	defer d.observe(MethodName, time.Now())
	return d.cloud.Name()
}

// observe records the duration of a call to method that started at start.
func (d *Decorated) observe(method string, start time.Time) {
	d.metrics.Duration.WithLabelValues(d.controller, method, d.cloud.Name()).Observe(time.Since(start).Seconds())
}

func (d *Decorated) countError(method string, err error) {
	if err == nil {
		return
	}
	d.metrics.Errors.WithLabelValues(d.controller, method, d.cloud.Name(), ErrorType(err)).Inc()
}

// ErrorType is the error label of err: the name of the cloudprovider error type in its chain
// ("InsufficientCapacityError", "NodeClaimNotFoundError", "NodeClassNotReadyError",
// "CreateError"), or "" for any other error.
func ErrorType(err error) string {
	var (
		ice *cloudprovider.InsufficientCapacityError
		nf  *cloudprovider.NodeClaimNotFoundError
		ncr *cloudprovider.NodeClassNotReadyError
		ce  *cloudprovider.CreateError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ice):
		return "InsufficientCapacityError"
	case errors.As(err, &nf):
		return "NodeClaimNotFoundError"
	case errors.As(err, &ncr):
		return "NodeClassNotReadyError"
	case errors.As(err, &ce):
		return "CreateError"
	default:
		return ""
	}
}
