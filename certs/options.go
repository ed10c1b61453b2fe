package certs

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Defaults of Options. Renewal lookaheads shrink to a third of the validity when the validity is short.
const (
	// DefaultCAValidity is how long a CA this package creates is valid.
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultCARenewBefore is how long before a CA expires its successor is created and published.
	DefaultCARenewBefore = 365 * 24 * time.Hour
	// DefaultLeafValidity is how long a serving certificate is valid.
	DefaultLeafValidity = 365 * 24 * time.Hour
	// DefaultLeafRenewBefore is how long before a serving certificate expires it is replaced.
	DefaultLeafRenewBefore = 30 * 24 * time.Hour
	// DefaultPropagationDelay is how long a new caBundle must have been in every webhook configuration
	// before a serving certificate that depends on it is served, and how long an old CA stays in the
	// bundle after the last certificate it signed stopped being the one in the Secret.
	DefaultPropagationDelay = time.Minute
	// DefaultResyncPeriod is how often the Secret and the webhook configurations are checked without an event.
	DefaultResyncPeriod = time.Hour
	// DefaultClusterDomain is the cluster DNS domain used for the fully qualified service name.
	DefaultClusterDomain = "cluster.local"
)

// Secret keys written by the Rotator. The kubernetes.io/tls keys hold the serving pair.
const (
	// SecretKeyCACert holds the CA that signs new serving certificates (PEM).
	SecretKeyCACert = "ca.crt"
	// SecretKeyCAKey holds the private key of SecretKeyCACert (PEM).
	SecretKeyCAKey = "ca.key"
	// SecretKeyCABundle holds every CA the apiserver must trust (PEM): the current one and, during a CA
	// rotation, the previous one. It is what goes into each caBundle.
	SecretKeyCABundle = "ca-bundle.crt"
	// SecretKeyTLSCert holds the serving certificate (PEM).
	SecretKeyTLSCert = "tls.crt"
	// SecretKeyTLSKey holds the serving certificate's private key (PEM).
	SecretKeyTLSKey = "tls.key"
)

// Annotations the Rotator keeps on its Secret to carry rotation state between reconciles and replicas.
const (
	// AnnotationInjectedBundle is the SHA-256 of the ca-bundle.crt that was last seen in every webhook
	// configuration.
	AnnotationInjectedBundle = "certs.joiner.dev/injected-bundle-sha256"
	// AnnotationInjectedAt is when AnnotationInjectedBundle was first seen in every webhook configuration (RFC 3339).
	AnnotationInjectedAt = "certs.joiner.dev/injected-at"
	// AnnotationLeafIssuedAt is when the serving certificate in the Secret was written (RFC 3339).
	AnnotationLeafIssuedAt = "certs.joiner.dev/leaf-issued-at"
)

// Options configure a Rotator. Namespace, SecretName and at least one of ServiceName, DNSNames and
// IPAddresses are required; every other zero value means the documented default.
type Options struct {
	Target

	// CAValidity is how long a new CA is valid. Zero means DefaultCAValidity.
	CAValidity time.Duration
	// CARenewBefore is how long before the current CA expires a new CA is created. Zero means
	// DefaultCARenewBefore or a third of CAValidity, whichever is shorter. It must be at least
	// LeafRenewBefore, so that a leaf is always renewed by a CA that is not itself about to be replaced.
	CARenewBefore time.Duration
	// LeafValidity is how long a new serving certificate is valid (never past its CA). Zero means
	// DefaultLeafValidity.
	LeafValidity time.Duration
	// LeafRenewBefore is how long before the serving certificate expires it is replaced. Zero means
	// DefaultLeafRenewBefore or a third of LeafValidity, whichever is shorter. It must exceed twice
	// PropagationDelay, so a leaf waiting for a new CA to propagate cannot expire meanwhile.
	LeafRenewBefore time.Duration
	// PropagationDelay is how long a changed caBundle must have been in every webhook configuration before
	// the leaf is switched to a CA it added, and how long an old CA is kept after the switch (for replicas
	// and apiservers that lag). Zero means DefaultPropagationDelay.
	PropagationDelay time.Duration
}

// withDefaults returns o with the zero values filled in, or an error naming the field to fix.
func (o Options) withDefaults() (Options, error) {
	if err := o.check("certs options"); err != nil {
		return o, err
	}
	o.Target = o.Target.withDefaults()
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.CARenewBefore == 0 {
		o.CARenewBefore = min(DefaultCARenewBefore, o.CAValidity/3)
	}
	if o.LeafValidity == 0 {
		o.LeafValidity = DefaultLeafValidity
	}
	if o.LeafRenewBefore == 0 {
		o.LeafRenewBefore = min(DefaultLeafRenewBefore, o.LeafValidity/3)
	}
	if o.PropagationDelay == 0 {
		o.PropagationDelay = DefaultPropagationDelay
	}
	switch {
	case o.CAValidity < 0 || o.CARenewBefore < 0 || o.LeafValidity < 0 || o.LeafRenewBefore < 0 || o.PropagationDelay < 0 || o.ResyncPeriod < 0:
		return o, errors.New("certs options: durations must not be negative")
	case o.CARenewBefore >= o.CAValidity:
		return o, fmt.Errorf("certs options: CARenewBefore (%s) must be shorter than CAValidity (%s)", o.CARenewBefore, o.CAValidity)
	case o.LeafRenewBefore >= o.LeafValidity:
		return o, fmt.Errorf("certs options: LeafRenewBefore (%s) must be shorter than LeafValidity (%s)", o.LeafRenewBefore, o.LeafValidity)
	case o.LeafRenewBefore > o.CARenewBefore:
		return o, fmt.Errorf("certs options: LeafRenewBefore (%s) must not exceed CARenewBefore (%s)", o.LeafRenewBefore, o.CARenewBefore)
	case o.LeafRenewBefore <= 2*o.PropagationDelay:
		return o, fmt.Errorf("certs options: LeafRenewBefore (%s) must exceed twice PropagationDelay (%s)", o.LeafRenewBefore, o.PropagationDelay)
	}
	return o, nil
}

// serviceDNSNames returns the names a Service is reached by in-cluster, followed by extra, without duplicates.
func serviceDNSNames(svc, ns, domain string, extra []string) []string {
	var names []string
	if svc != "" {
		names = append(names, svc, svc+"."+ns, svc+"."+ns+".svc", svc+"."+ns+".svc."+domain)
	}
	return dedupe(append(names, extra...))
}

func dedupe(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
