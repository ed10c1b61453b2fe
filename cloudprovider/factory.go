package cloudprovider

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Controller is a controller that a provider brings with it, such as the status controller of
// its node class. The operator wires it together with every other controller.
type Controller interface {
	// SetupWithManager registers the controller with mgr.
	SetupWithManager(mgr manager.Manager) error
}

// InstrumentedController is a Controller with Prometheus metrics of its own. The operator calls
// RegisterMetrics with its registerer (nil when metrics are off) before SetupWithManager, so the
// provider's metrics are served, and listed, with the operator's.
type InstrumentedController interface {
	Controller
	// RegisterMetrics registers the controller's metrics with reg; a nil reg registers none.
	RegisterMetrics(reg prometheus.Registerer) error
}

// Factory builds a provider on the operator's cached client, once the manager exists. ctx bounds
// the provider's background work and ends when the operator stops. It returns the provider and
// the controllers the provider owns. The binaries choose a Factory from their flags; the
// operator never names a provider.
type Factory func(ctx context.Context, kube client.Client) (CloudProvider, []Controller, error)

// Static returns a Factory for a provider that is already built, with the controllers it owns
// (tests use it with the fake provider).
func Static(cp CloudProvider, controllers ...Controller) Factory {
	return func(context.Context, client.Client) (CloudProvider, []Controller, error) {
		return cp, controllers, nil
	}
}
