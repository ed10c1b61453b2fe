package certs

import (
	"errors"
	"net"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Target is what both modes share in their options (Options and CertManagerOptions embed it): the
// Secret the serving certificate is kept in, the names it carries, Joiner's webhook configurations
// that must trust it, and how the reconciler runs.
type Target struct {
	// Namespace of the Secret (and of the Service, when ServiceName is set; in cert-manager mode also
	// of the Certificate(s) and Issuer(s)). Required.
	Namespace string
	// SecretName is the Secret holding the serving certificate, which is served. Required. In
	// self-managed mode it also holds the CA and the bundle, and is created when missing (an existing
	// one, for example an empty one created by the Helm chart, is filled in); in cert-manager mode
	// cert-manager writes it.
	SecretName string
	// ServiceName, when set, puts <svc>, <svc>.<ns>, <svc>.<ns>.svc and <svc>.<ns>.svc.<ClusterDomain>
	// into the serving certificate.
	ServiceName string
	// ClusterDomain is the cluster's DNS domain. Empty means DefaultClusterDomain.
	ClusterDomain string
	// DNSNames are added to the serving certificate after the service names (for local runs).
	DNSNames []string
	// IPAddresses are put into the serving certificate, e.g. 127.0.0.1 for a webhook reached by URL.
	IPAddresses []net.IP

	// MutatingWebhookConfigurations are the names of Joiner's own MutatingWebhookConfigurations: in
	// self-managed mode every webhook in them gets the caBundle, in cert-manager mode they get the
	// cert-manager.io/inject-ca-from annotation. No other configuration is ever changed.
	MutatingWebhookConfigurations []string
	// ValidatingWebhookConfigurations are the names of Joiner's own ValidatingWebhookConfigurations.
	ValidatingWebhookConfigurations []string

	// ResyncPeriod is the longest time between two checks when nothing changes. Zero means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Clock tells the time. Nil means the real clock.
	Clock clock.PassiveClock
	// Log receives what the reconciler does (creation, rotation, injection, repair). The zero value
	// discards it.
	Log logr.Logger
	// Recorder receives Events on the Secret (self-managed) or the Certificate (cert-manager). Nil
	// means SetupWithManager uses the manager's recorder; without a manager, nil means no Events.
	Recorder events.EventRecorder
	// Metrics receives certificate expiry times and rotation counts. Nil means no metrics.
	Metrics *Metrics
}

// check reports a missing required field; what names the options in the error.
func (t Target) check(what string) error {
	if t.Namespace == "" || t.SecretName == "" {
		return errors.New(what + ": Namespace and SecretName are required")
	}
	if t.ServiceName == "" && len(t.DNSNames) == 0 && len(t.IPAddresses) == 0 {
		return errors.New(what + ": set ServiceName, DNSNames or IPAddresses so the serving certificate names the webhook")
	}
	return nil
}

// withDefaults returns t with the zero values filled in, the service names added to DNSNames and
// the name lists without duplicates.
func (t Target) withDefaults() Target {
	if t.ClusterDomain == "" {
		t.ClusterDomain = DefaultClusterDomain
	}
	if t.ResyncPeriod == 0 {
		t.ResyncPeriod = DefaultResyncPeriod
	}
	if t.Clock == nil {
		t.Clock = clock.RealClock{}
	}
	t.DNSNames = serviceDNSNames(t.ServiceName, t.Namespace, t.ClusterDomain, t.DNSNames)
	t.MutatingWebhookConfigurations = dedupe(t.MutatingWebhookConfigurations)
	t.ValidatingWebhookConfigurations = dedupe(t.ValidatingWebhookConfigurations)
	return t
}

// reconciler is what both modes' reconcilers hold: where they write, read and serve, the webhook
// configurations that must trust the served certificate, and their readiness.
type reconciler struct {
	client   client.Client
	reader   client.Reader
	serving  *ServingCert
	refs     []webhookConfigRef
	log      logr.Logger
	recorder events.EventRecorder
	ready    readiness
}

// prepare returns the options withDefaults makes, after it checked that c, reader and serving are
// set; what names the reconciler in that error.
func prepare[O any](what string, c client.Client, reader client.Reader, serving *ServingCert, withDefaults func() (O, error)) (O, error) {
	if c == nil || reader == nil || serving == nil {
		var zero O
		return zero, errors.New(what + ": client, reader and serving certificate are required")
	}
	return withDefaults()
}

// init fills r in for the target t, whose defaults are already filled in.
func (r *reconciler) init(c client.Client, reader client.Reader, serving *ServingCert, t Target, log logr.Logger) {
	r.client, r.reader, r.serving = c, reader, serving
	r.refs = configRefs(t.MutatingWebhookConfigurations, t.ValidatingWebhookConfigurations)
	r.log, r.recorder = log, t.Recorder
}

// ReadyzCheck returns a readiness check for the manager (mgr.AddReadyzCheck). It fails until the
// served certificate is in place and every webhook of every named configuration trusts it (in
// cert-manager mode also until the Certificate is Ready); once that has held it stays passing (see
// the note on rotations in the package's readiness type).
func (r *reconciler) ReadyzCheck() healthz.Checker { return r.ready.checker() }

// Ready reports whether ReadyzCheck passes.
func (r *reconciler) Ready() bool { return r.ready.isReady() }

// setup registers rec, whose state is r, with mgr as the controller name, watching t's Secret and
// webhook configurations and the extra objects; without a recorder it takes the manager's.
func (r *reconciler) setup(mgr manager.Manager, t Target, name string, rec reconcile.Reconciler, extra ...extraWatch) error {
	if r.recorder == nil {
		r.recorder = mgr.GetEventRecorder(EventRecorderName)
	}
	w := watchSet{
		namespace:  t.Namespace,
		secret:     t.SecretName,
		mutating:   t.MutatingWebhookConfigurations,
		validating: t.ValidatingWebhookConfigurations,
		extra:      extra,
	}
	return w.complete(mgr, name, rec)
}
