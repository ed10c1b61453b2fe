package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Labels on the objects this package creates.
const (
	// ManagedByLabel is the label key marking objects created by this package.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "joiner"
)

// minRequeue keeps a reconciler that is waiting for something that is already due from spinning.
const minRequeue = 100 * time.Millisecond

// errStaleSecret says the Secret changed while this reconcile was using an older copy of it.
var errStaleSecret = errors.New("the Secret changed during the reconcile")

// Rotator is the self-managed mode: a reconciler that keeps a CA and a serving certificate in one
// Secret, injects the CA bundle into Joiner's own webhook configurations, and serves the certificate
// through a ServingCert. Run it in every replica (it does not need leader election); all replicas
// converge on one Secret.
type Rotator struct {
	reconciler
	opts Options

	mu     sync.Mutex // one reconcile at a time, also when called directly
	lastCA *x509.Certificate
}

// NewRotator returns a Rotator that writes through c, reads through reader (use the manager's
// APIReader: the Rotator's decisions must see the latest Secret, not a cached one) and serves through
// serving. It fails when opts are inconsistent.
func NewRotator(c client.Client, reader client.Reader, serving *ServingCert, opts Options) (*Rotator, error) {
	o, err := prepare("new certificate rotator", c, reader, serving, opts.withDefaults)
	if err != nil {
		return nil, err
	}
	r := &Rotator{opts: o}
	r.init(c, reader, serving, o.Target, o.Log.WithValues("secret", o.Namespace+"/"+o.SecretName))
	return r, nil
}

// Reconcile brings the Secret, the served certificate and the caBundles to where they must be now. The
// request is ignored: there is one Secret. The result asks to be called again at the next rotation step
// or after ResyncPeriod, whichever is sooner.
func (r *Rotator) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	secret, res, err := r.ensureSecret(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	next := res.next
	if err := r.serve(next); err != nil {
		return reconcile.Result{}, err
	}
	allHold, wrote, err := r.inject(ctx, secret, next.bundlePEM)
	if errors.Is(err, errStaleSecret) {
		r.log.V(1).Info("the Secret changed while injecting the caBundle; starting over with the new one")
		return reconcile.Result{RequeueAfter: minRequeue}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if allHold {
		if err := r.confirmInjected(ctx, secret, next.bundlePEM, wrote); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{RequeueAfter: minRequeue}, nil
			}
			return reconcile.Result{}, err
		}
	}
	problem, err := trustProblem(ctx, r.reader, r.refs, r.serving.Leaf(), r.opts.Clock.Now())
	if err != nil {
		return reconcile.Result{}, err
	}
	r.ready.update(problem)
	if problem != "" {
		r.log.V(1).Info("webhook certificate not trusted everywhere yet", "problem", problem)
	}
	return reconcile.Result{RequeueAfter: r.requeueAfter(res.wakeAt)}, nil
}

// ensureSecret reads the Secret, plans and writes it. When another replica wrote first (a Create that
// finds the Secret exists, an Update that conflicts), it reads the winner's Secret and plans again from
// it, which keeps the winner's CA: a valid CA is never replaced.
func (r *Rotator) ensureSecret(ctx context.Context) (*corev1.Secret, planResult, error) {
	const attempts = 4
	for attempt := 1; ; attempt++ {
		now := r.opts.Clock.Now()
		secret, err := r.getSecret(ctx)
		if err != nil {
			return nil, planResult{}, err
		}
		cur := readMaterial(secret, now)
		injected, err := configsHoldBundle(ctx, r.reader, r.refs, cur.bundlePEM)
		if err != nil {
			return nil, planResult{}, err
		}
		res, err := plan(now, cur, r.opts, injected)
		if err != nil {
			return nil, planResult{}, fmt.Errorf("plan webhook certificates for Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
		}
		if !res.changed {
			r.report(secret, res.actions)
			return secret, res, nil
		}
		written, err := r.writeSecret(ctx, secret, res.next)
		if err == nil {
			r.log.Info("wrote webhook certificates", "state", res.next.describe())
			r.report(written, res.actions)
			return written, res, nil
		}
		if (apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)) && attempt < attempts {
			r.log.Info("another replica wrote the Secret first; adopting its content instead of ours", "attempt", attempt)
			continue
		}
		return nil, planResult{}, err
	}
}

func (r *Rotator) getSecret(ctx context.Context) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: r.opts.Namespace, Name: r.opts.SecretName}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
	}
	return s, nil
}

// writeSecret creates the Secret or updates old. The update carries old's resourceVersion, so it fails
// with a conflict when anyone changed the Secret since it was read.
func (r *Rotator) writeSecret(ctx context.Context, old *corev1.Secret, m material) (*corev1.Secret, error) {
	if old == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   r.opts.Namespace,
				Name:        r.opts.SecretName,
				Labels:      map[string]string{ManagedByLabel: ManagedByValue},
				Annotations: map[string]string{AnnotationLeafIssuedAt: formatTime(m.leafIssuedAt)},
			},
			Type: corev1.SecretTypeTLS,
			Data: m.secretData(nil),
		}
		if err := r.client.Create(ctx, s); err != nil {
			return nil, fmt.Errorf("create Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
		}
		return s, nil
	}
	s := old.DeepCopy()
	s.Data = m.secretData(old.Data)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationLeafIssuedAt] = formatTime(m.leafIssuedAt)
	if err := r.client.Update(ctx, s); err != nil {
		return nil, fmt.Errorf("update Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
	}
	return s, nil
}

// serve loads m's leaf into the ServingCert and records the metrics.
func (r *Rotator) serve(m material) error {
	hadLeaf := r.serving.Loaded()
	changed, err := r.serving.Set(m.leaf.CertPEM, m.leaf.KeyPEM)
	if err != nil {
		return err
	}
	if changed {
		r.log.Info("serving a new webhook certificate", "notAfter", m.leaf.Cert.NotAfter.UTC(), "issuer", m.leaf.Cert.Issuer.CommonName)
	}
	r.opts.Metrics.observe(certLabelLeaf, m.leaf.Cert, changed && hadLeaf)
	caChanged := r.lastCA != nil && !bytes.Equal(r.lastCA.Raw, m.ca.Cert.Raw)
	r.opts.Metrics.observe(certLabelCA, m.ca.Cert, caChanged)
	r.lastCA = m.ca.Cert
	return nil
}

// inject writes bundle into every webhook of every named configuration that exists and lacks it. It
// reports whether all existing configurations hold bundle afterwards, and whether it had to write any
// (a new configuration, a new bundle, or a repaired one). Before each write it checks that
// the Secret is still the one bundle came from, so a replica with an old copy cannot put back a bundle
// that a newer serving certificate no longer chains to.
func (r *Rotator) inject(ctx context.Context, secret *corev1.Secret, bundle []byte) (allHold, wrote bool, err error) {
	for _, ref := range r.refs {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := getConfig(ctx, r.reader, ref)
			if err != nil {
				return err
			}
			if obj == nil {
				r.log.V(1).Info("webhook configuration does not exist; nothing to inject", "configuration", ref.String())
				return nil
			}
			var changed []string
			for _, wb := range caBundles(obj) {
				if bytes.Equal(*wb.bundle, bundle) {
					continue
				}
				state := "was empty"
				if len(*wb.bundle) > 0 {
					state = "differed from the Secret"
				}
				changed = append(changed, fmt.Sprintf("%s (%s)", wb.webhook, state))
				*wb.bundle = bytes.Clone(bundle)
			}
			if len(changed) == 0 {
				return nil
			}
			stale, err := r.secretChangedSince(ctx, secret)
			if err != nil {
				return err
			}
			if stale {
				return errStaleSecret
			}
			if err := r.client.Update(ctx, obj); err != nil {
				return err
			}
			wrote = true
			msg := fmt.Sprintf("set the caBundle of %s in %s", strings.Join(changed, ", "), ref)
			r.log.Info(msg)
			r.event(secret, corev1.EventTypeNormal, reasonBundleInjected, "Inject", msg)
			return nil
		})
		if err != nil {
			if errors.Is(err, errStaleSecret) {
				return false, wrote, err
			}
			return false, wrote, fmt.Errorf("inject caBundle into %s: %w", ref, err)
		}
	}
	allHold, err = configsHoldBundle(ctx, r.reader, r.refs, bundle)
	return allHold, wrote, err
}

func (r *Rotator) secretChangedSince(ctx context.Context, secret *corev1.Secret) (bool, error) {
	live, err := r.getSecret(ctx)
	if err != nil {
		return false, err
	}
	return live == nil || live.ResourceVersion != secret.ResourceVersion, nil
}

// confirmInjected records on the Secret that bundle is in every webhook configuration, and since when.
// The propagation delay before a leaf switch counts from this time, so it restarts when the bundle had
// to be written again (restart): a configuration created late or repaired after tampering.
func (r *Rotator) confirmInjected(ctx context.Context, secret *corev1.Secret, bundle []byte, restart bool) error {
	hash := bundleHash(bundle)
	if secret.Annotations[AnnotationInjectedBundle] == hash && !restart {
		return nil
	}
	s := secret.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationInjectedBundle] = hash
	s.Annotations[AnnotationInjectedAt] = formatTime(r.opts.Clock.Now())
	if err := r.client.Update(ctx, s); err != nil {
		return fmt.Errorf("record caBundle injection on Secret %s/%s: %w", r.opts.Namespace, r.opts.SecretName, err)
	}
	r.log.V(1).Info("caBundle is in every webhook configuration", "sha256", hash)
	return nil
}

// report logs every action and turns the non-quiet ones into Events on the Secret.
func (r *Rotator) report(secret *corev1.Secret, actions []action) {
	for _, a := range actions {
		switch {
		case a.quiet:
			r.log.V(1).Info(a.message, "reason", a.reason)
			continue
		case a.warning:
			r.log.Error(nil, a.message, "reason", a.reason)
		default:
			r.log.Info(a.message, "reason", a.reason)
		}
		t := corev1.EventTypeNormal
		if a.warning {
			t = corev1.EventTypeWarning
		}
		r.event(secret, t, a.reason, "Rotate", a.message)
	}
}

func (r *Rotator) event(secret *corev1.Secret, eventType, reason, act, msg string) {
	if r.recorder == nil || secret == nil {
		return
	}
	r.recorder.Eventf(secret, nil, eventType, reason, act, "%s", msg)
}

func (r *Rotator) requeueAfter(wakeAt time.Time) time.Duration {
	d := r.opts.ResyncPeriod
	if !wakeAt.IsZero() {
		d = min(d, wakeAt.Sub(r.opts.Clock.Now()))
	}
	return max(d, minRequeue)
}
