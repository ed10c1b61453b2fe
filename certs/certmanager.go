package certs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// CertManagerNotReadyRecheck is how often a Certificate that is not Ready is looked at again.
const CertManagerNotReadyRecheck = 15 * time.Second

// CertManagerOptions configure a CertManagerReconciler. Namespace, SecretName and at least one of
// ServiceName, DNSNames and IPAddresses are required; every other zero value means the documented default.
type CertManagerOptions struct {
	Target

	// CertificateName is the serving Certificate's name. Empty means SecretName.
	CertificateName string
	// IssuerRef, when set, names an existing Issuer (in Namespace) or ClusterIssuer that signs the serving
	// Certificate, and nothing else is created. Nil means a self-signed bootstrap chain is created:
	// Issuer <cert>-selfsigned, CA Certificate <cert>-ca (Secret <secret>-ca), CA Issuer <cert>-ca.
	IssuerRef *cmmeta.IssuerReference
	// Duration and RenewBefore of the serving Certificate. Zero leaves cert-manager's defaults (90 days,
	// renewed at two thirds).
	Duration, RenewBefore time.Duration
	// CADuration is the lifetime of the bootstrap CA Certificate. Zero means DefaultCAValidity. Keep it
	// long: when cert-manager renews that CA, cainjector replaces the caBundle with the new CA only,
	// and serving certificates signed by the old one are distrusted until they are reissued.
	CADuration time.Duration
}

func (o CertManagerOptions) withDefaults() (CertManagerOptions, error) {
	if err := o.check("cert-manager options"); err != nil {
		return o, err
	}
	if o.IssuerRef != nil && o.IssuerRef.Name == "" {
		return o, errors.New("cert-manager options: IssuerRef.Name is required when IssuerRef is set")
	}
	if o.IssuerRef != nil && o.IssuerRef.Kind != "" && o.IssuerRef.Kind != cmapi.IssuerKind && o.IssuerRef.Kind != cmapi.ClusterIssuerKind {
		return o, fmt.Errorf("cert-manager options: IssuerRef.Kind must be %s or %s, got %q", cmapi.IssuerKind, cmapi.ClusterIssuerKind, o.IssuerRef.Kind)
	}
	if o.Duration < 0 || o.RenewBefore < 0 || o.CADuration < 0 || o.ResyncPeriod < 0 {
		return o, errors.New("cert-manager options: durations must not be negative")
	}
	o.Target = o.Target.withDefaults()
	if o.CertificateName == "" {
		o.CertificateName = o.SecretName
	}
	if o.CADuration == 0 {
		o.CADuration = DefaultCAValidity
	}
	return o, nil
}

// RegisterCertManagerTypes adds cert-manager's v1 API types (Certificate, Issuer, ClusterIssuer, ...) to
// scheme. Only the cert-manager mode needs them; it is safe to call more than once.
func RegisterCertManagerTypes(scheme *runtime.Scheme) error {
	if scheme.Recognizes(cmapi.SchemeGroupVersion.WithKind(cmapi.CertificateKind)) {
		return nil
	}
	if err := cmapi.AddToScheme(scheme); err != nil {
		return fmt.Errorf("register cert-manager types: %w", err)
	}
	return nil
}

// CertManagerReconciler is the cert-manager mode: it creates (or brings back to the desired spec) the
// cert-manager objects that issue the serving certificate into SecretName, annotates Joiner's webhook
// configurations with cert-manager.io/inject-ca-from so cainjector fills their caBundle, and serves the
// Secret through a ServingCert. It never writes a caBundle itself. Run it in every replica.
type CertManagerReconciler struct {
	reconciler
	opts CertManagerOptions

	mu           sync.Mutex
	lastCA       []byte
	lastNotReady string
}

// NewCertManagerReconciler returns a reconciler that writes through c, reads through reader (the
// manager's APIReader) and serves through serving. c's scheme must know cert-manager's types
// (RegisterCertManagerTypes).
func NewCertManagerReconciler(c client.Client, reader client.Reader, serving *ServingCert, opts CertManagerOptions) (*CertManagerReconciler, error) {
	o, err := prepare("new cert-manager reconciler", c, reader, serving, opts.withDefaults)
	if err != nil {
		return nil, err
	}
	if !c.Scheme().Recognizes(cmapi.SchemeGroupVersion.WithKind(cmapi.CertificateKind)) {
		return nil, errors.New("new cert-manager reconciler: the client's scheme lacks cert-manager's types; call RegisterCertManagerTypes first")
	}
	r := &CertManagerReconciler{opts: o}
	r.init(c, reader, serving, o.Target, o.Log.WithValues("certificate", o.Namespace+"/"+o.CertificateName))
	return r, nil
}

// SetupWithManager registers cert-manager's types into mgr's scheme and the reconciler with mgr. Like
// the Rotator it watches, through a cache of its own, only the Secret, the serving Certificate and the
// named webhook configurations, and does not need leader election. It requires cert-manager's CRDs.
//
// RBAC it needs: get, list, watch on the Secret; get, list, watch, create, update on certificates and
// issuers.cert-manager.io in its namespace; get, list, watch, update on the webhook configurations;
// create on events.
func (r *CertManagerReconciler) SetupWithManager(mgr manager.Manager) error {
	if err := RegisterCertManagerTypes(mgr.GetScheme()); err != nil {
		return err
	}
	return r.setup(mgr, r.opts.Target, "webhook-certs-cert-manager-"+r.opts.SecretName, r,
		extraWatch{obj: &cmapi.Certificate{}, name: r.opts.CertificateName})
}

// InjectAnnotationValue is the value of cert-manager.io/inject-ca-from on Joiner's webhook configurations.
func (r *CertManagerReconciler) InjectAnnotationValue() string {
	return r.opts.Namespace + "/" + r.opts.CertificateName
}

// Reconcile makes the cert-manager objects and annotations what they must be and serves the Secret.
func (r *CertManagerReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	objs, err := CertManagerObjects(r.opts)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, obj := range objs {
		if err := r.apply(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.annotateConfigs(ctx); err != nil {
		return reconcile.Result{}, err
	}
	cert := &cmapi.Certificate{}
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: r.opts.Namespace, Name: r.opts.CertificateName}, cert); err != nil {
		return reconcile.Result{}, fmt.Errorf("read Certificate %s/%s: %w", r.opts.Namespace, r.opts.CertificateName, err)
	}
	if err := r.serve(ctx); err != nil {
		return reconcile.Result{}, err
	}

	problem := certificateNotReady(cert)
	if problem != "" {
		msg := fmt.Sprintf("Certificate %s/%s is not Ready: %s; the webhook stays unready until it is", cert.Namespace, cert.Name, problem)
		r.log.Info(msg)
		if msg != r.lastNotReady && r.recorder != nil {
			r.recorder.Eventf(cert, nil, corev1.EventTypeWarning, "CertificateNotReady", "Wait", "%s", msg)
		}
		r.lastNotReady = msg
	} else {
		r.lastNotReady = ""
		var err error
		if problem, err = trustProblem(ctx, r.reader, r.refs, r.serving.Leaf(), r.opts.Clock.Now()); err != nil {
			return reconcile.Result{}, err
		}
		if problem != "" {
			r.log.Info("waiting for cainjector", "problem", problem)
		}
	}
	r.ready.update(problem)
	if problem != "" {
		return reconcile.Result{RequeueAfter: min(r.opts.ResyncPeriod, CertManagerNotReadyRecheck)}, nil
	}
	return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
}

// certificateNotReady returns why cert is not Ready for its current generation, or "" when it is.
func certificateNotReady(cert *cmapi.Certificate) string {
	for _, c := range cert.Status.Conditions {
		if c.Type != cmapi.CertificateConditionReady {
			continue
		}
		switch {
		case c.Status != cmmeta.ConditionTrue:
			return fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
		case c.ObservedGeneration != 0 && c.ObservedGeneration < cert.Generation:
			return fmt.Sprintf("Ready was observed for generation %d, the spec is at %d", c.ObservedGeneration, cert.Generation)
		}
		return ""
	}
	return "it has no Ready condition yet (is cert-manager running?)"
}

// serve loads the Secret cert-manager wrote, when it holds a usable pair.
func (r *CertManagerReconciler) serve(ctx context.Context) error {
	s := &corev1.Secret{}
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: r.opts.Namespace, Name: r.opts.SecretName}, s); err != nil {
		if apierrors.IsNotFound(err) {
			r.log.V(1).Info("cert-manager has not written the Secret yet")
			return nil
		}
		return fmt.Errorf("read Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
	}
	pair, err := ParseKeyPair(s.Data[SecretKeyTLSCert], s.Data[SecretKeyTLSKey])
	if err != nil {
		r.log.Info("the Secret does not hold a usable serving certificate yet; keeping the current one", "problem", err.Error())
		return nil
	}
	hadLeaf := r.serving.Loaded()
	changed, err := r.serving.Set(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return err
	}
	if changed {
		r.log.Info("serving the certificate issued by cert-manager", "notAfter", pair.Cert.NotAfter.UTC(), "issuer", pair.Cert.Issuer.CommonName)
	}
	r.opts.Metrics.observe(certLabelLeaf, pair.Cert, changed && hadLeaf)
	if cas, err := ParseCertificates(s.Data[SecretKeyCACert]); err == nil {
		rotated := r.lastCA != nil && !slices.Equal(r.lastCA, cas[0].Raw)
		r.opts.Metrics.observe(certLabelCA, cas[0], rotated)
		r.lastCA = cas[0].Raw
	}
	return nil
}

// apply creates desired or, when it exists, replaces its labels-we-own and spec with desired's.
func (r *CertManagerReconciler) apply(ctx context.Context, desired client.Object) error {
	kind := "Certificate"
	if _, ok := desired.(*cmapi.Issuer); ok {
		kind = "Issuer"
	}
	existing := desired.DeepCopyObject().(client.Object)
	err := r.reader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	switch {
	case apierrors.IsNotFound(err):
		err := r.client.Create(ctx, desired)
		switch {
		case apierrors.IsAlreadyExists(err):
			return nil // another replica created it a moment ago; the next reconcile compares specs
		case err != nil:
			return fmt.Errorf("create %s %s: %w", kind, desired.GetName(), err)
		}
		r.log.Info("created cert-manager object", "kind", kind, "name", desired.GetName())
		return nil
	case err != nil:
		return fmt.Errorf("read %s %s: %w", kind, desired.GetName(), err)
	}
	updated := existing.DeepCopyObject().(client.Object)
	switch d := desired.(type) {
	case *cmapi.Issuer:
		updated.(*cmapi.Issuer).Spec = d.Spec
	case *cmapi.Certificate:
		updated.(*cmapi.Certificate).Spec = d.Spec
	}
	labels := updated.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = ManagedByValue
	updated.SetLabels(labels)
	if equality.Semantic.DeepEqual(existing, updated) {
		return nil
	}
	if err := r.client.Update(ctx, updated); err != nil {
		return fmt.Errorf("update %s %s: %w", kind, desired.GetName(), err)
	}
	r.log.Info("restored the spec of a cert-manager object", "kind", kind, "name", desired.GetName())
	return nil
}

// annotateConfigs puts cert-manager.io/inject-ca-from on every named configuration that exists.
func (r *CertManagerReconciler) annotateConfigs(ctx context.Context) error {
	want := r.InjectAnnotationValue()
	for _, ref := range r.refs {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := getConfig(ctx, r.reader, ref)
			if err != nil || obj == nil {
				return err
			}
			a := obj.GetAnnotations()
			if a[cmapi.WantInjectAnnotation] == want {
				return nil
			}
			if a == nil {
				a = map[string]string{}
			}
			a[cmapi.WantInjectAnnotation] = want
			obj.SetAnnotations(a)
			if err := r.client.Update(ctx, obj); err != nil {
				return err
			}
			r.log.Info("annotated webhook configuration for cainjector", "configuration", ref.String(), cmapi.WantInjectAnnotation, want)
			return nil
		})
		if err != nil {
			return fmt.Errorf("annotate %s: %w", ref, err)
		}
	}
	return nil
}

// CertManagerObjects returns the cert-manager objects the cert-manager mode keeps in the cluster for o,
// in creation order: without IssuerRef a self-signed Issuer, a CA Certificate, a CA Issuer and the
// serving Certificate; with IssuerRef only the serving Certificate. It is exported so that a chart or
// `make` target can render the same objects.
func CertManagerObjects(opts CertManagerOptions) ([]client.Object, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	labels := func() map[string]string { return map[string]string{ManagedByLabel: ManagedByValue} }
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: o.Namespace, Name: name, Labels: labels()}
	}
	ecdsa := &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmapi.RotationPolicyAlways}
	var objs []client.Object
	issuer := cmmeta.IssuerReference{Name: o.CertificateName + "-ca", Kind: cmapi.IssuerKind, Group: "cert-manager.io"}
	if o.IssuerRef != nil {
		issuer = *o.IssuerRef
		if issuer.Kind == "" {
			issuer.Kind = cmapi.IssuerKind
		}
		if issuer.Group == "" {
			issuer.Group = "cert-manager.io"
		}
	} else {
		selfSigned := o.CertificateName + "-selfsigned"
		caCert := o.CertificateName + "-ca"
		objs = append(objs,
			&cmapi.Issuer{ObjectMeta: meta(selfSigned), Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}},
			&cmapi.Certificate{ObjectMeta: meta(caCert), Spec: cmapi.CertificateSpec{
				IsCA:       true,
				CommonName: o.CertificateName + "-ca",
				SecretName: o.SecretName + "-ca",
				Duration:   &metav1.Duration{Duration: o.CADuration},
				PrivateKey: ecdsa.DeepCopy(),
				IssuerRef:  cmmeta.IssuerReference{Name: selfSigned, Kind: cmapi.IssuerKind, Group: "cert-manager.io"},
			}},
			&cmapi.Issuer{ObjectMeta: meta(issuer.Name), Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: o.SecretName + "-ca"}}}},
		)
	}
	serving := &cmapi.Certificate{ObjectMeta: meta(o.CertificateName), Spec: cmapi.CertificateSpec{
		SecretName: o.SecretName,
		DNSNames:   slices.Clone(o.DNSNames),
		Usages:     []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageDigitalSignature},
		PrivateKey: ecdsa.DeepCopy(),
		IssuerRef:  issuer,
	}}
	if len(o.DNSNames) > 0 {
		serving.Spec.CommonName = o.DNSNames[0]
	}
	for _, ip := range o.IPAddresses {
		serving.Spec.IPAddresses = append(serving.Spec.IPAddresses, ip.String())
	}
	if o.Duration > 0 {
		serving.Spec.Duration = &metav1.Duration{Duration: o.Duration}
	}
	if o.RenewBefore > 0 {
		serving.Spec.RenewBefore = &metav1.Duration{Duration: o.RenewBefore}
	}
	return append(objs, serving), nil
}
