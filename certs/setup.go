package certs

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// EventRecorderName is the name the reconcilers of this package record Events under.
const EventRecorderName = "joiner-webhook-certs"

// SetupWithManager registers the Rotator with mgr. It watches, through a small cache of its own (so the
// manager's cache does not start listing every Secret in the cluster), the Secret by namespace and name
// and the named webhook configurations by name; it runs once at start and again at every rotation step
// or ResyncPeriod. It runs in every replica: it does not need leader election.
//
// RBAC it needs: get, list, watch, create, update on the Secret in its namespace; get, list, watch,
// update on mutating- and validatingwebhookconfigurations; create on events.
func (r *Rotator) SetupWithManager(mgr manager.Manager) error {
	return r.setup(mgr, r.opts.Target, "webhook-certs-"+r.opts.SecretName, r)
}

// watchSet is what one reconciler of this package watches; every event maps to the one request.
type watchSet struct {
	namespace  string
	secret     string
	mutating   []string
	validating []string
	// extra are further namespaced objects watched by name in namespace (cert-manager's Certificate).
	extra []extraWatch
}

type extraWatch struct {
	obj  client.Object
	name string
}

func (w watchSet) complete(mgr manager.Manager, name string, r reconcile.Reconciler) error {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.namespace, Name: w.secret}}
	enqueue := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{req}
	})
	byName := func(namespace string, names ...string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == namespace && slices.Contains(names, o.GetName())
		})
	}

	byObject := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{w.namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", w.secret),
		},
	}
	if len(w.mutating) == 1 {
		byObject[&admissionregistrationv1.MutatingWebhookConfiguration{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", w.mutating[0])}
	}
	if len(w.validating) == 1 {
		byObject[&admissionregistrationv1.ValidatingWebhookConfiguration{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", w.validating[0])}
	}
	for _, e := range w.extra {
		byObject[e.obj] = cache.ByObject{
			Namespaces: map[string]cache.Config{w.namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", e.name),
		}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		ByObject:   byObject,
	})
	if err != nil {
		return fmt.Errorf("create the cache of %s: %w", name, err)
	}
	if err := mgr.Add(ownCache{c}); err != nil {
		return fmt.Errorf("add the cache of %s to the manager: %w", name, err)
	}

	b := builder.ControllerManagedBy(mgr).
		Named(name).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1}).
		WatchesRawSource(source.Kind[client.Object](c, &corev1.Secret{}, enqueue, byName(w.namespace, w.secret))).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(req) // the first reconcile, also when none of the watched objects exists yet
			return nil
		}))
	if len(w.mutating) > 0 {
		b = b.WatchesRawSource(source.Kind[client.Object](c, &admissionregistrationv1.MutatingWebhookConfiguration{}, enqueue, byName("", w.mutating...)))
	}
	if len(w.validating) > 0 {
		b = b.WatchesRawSource(source.Kind[client.Object](c, &admissionregistrationv1.ValidatingWebhookConfiguration{}, enqueue, byName("", w.validating...)))
	}
	for _, e := range w.extra {
		b = b.WatchesRawSource(source.Kind[client.Object](c, e.obj, enqueue, byName(w.namespace, e.name)))
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("set up controller %s: %w", name, err)
	}
	return nil
}

// ownCache puts a reconciler's private cache into the manager's cache group, which starts and syncs
// before controllers and does not wait for leader election.
type ownCache struct{ cache.Cache }

// GetCache returns the wrapped cache.
func (c ownCache) GetCache() cache.Cache { return c.Cache }
