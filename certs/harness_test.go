package certs

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	testNamespace  = "joiner-system"
	testSecret     = "joiner-webhook-certs"
	testService    = "joiner-webhook"
	testMutating   = "joiner-mutating"
	testValidating = "joiner-validating"
	foreignConfig  = "someone-elses-webhook"
)

// recorder collects Events as "Type Reason note"; unlike events.FakeRecorder it never blocks.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason+" "+fmt.Sprintf(note, args...))
}

func (r *recorder) find(substr string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if strings.Contains(e, substr) {
			out = append(out, e)
		}
	}
	return out
}

// logBuffer is a logr sink that keeps every line.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
}

func (b *logBuffer) contains(substrs ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
next:
	for _, l := range b.lines {
		for _, s := range substrs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		return true
	}
	return false
}

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// testOptions are hours-scale lifetimes, driven by the fake clock.
func testOptions() Options {
	return Options{
		Target: Target{
			Namespace:                       testNamespace,
			SecretName:                      testSecret,
			ServiceName:                     testService,
			IPAddresses:                     []net.IP{net.ParseIP("127.0.0.1")},
			ResyncPeriod:                    1000 * time.Hour,
			MutatingWebhookConfigurations:   []string{testMutating},
			ValidatingWebhookConfigurations: []string{testValidating},
		},
		CAValidity:       100 * time.Hour,
		CARenewBefore:    30 * time.Hour,
		LeafValidity:     10 * time.Hour,
		LeafRenewBefore:  3 * time.Hour,
		PropagationDelay: time.Minute,
	}
}

func webhookConfigs() []client.Object {
	sideEffects := admissionregistrationv1.SideEffectClassNone
	cc := func() admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/x")}
	}
	return []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: testMutating},
			Webhooks: []admissionregistrationv1.MutatingWebhook{
				{Name: "m1.joiner.dev", ClientConfig: cc(), SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}},
				{Name: "m2.joiner.dev", ClientConfig: cc(), SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}},
			},
		},
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: testValidating},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{
				{Name: "v1.joiner.dev", ClientConfig: cc(), SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}},
				{Name: "v2.joiner.dev", ClientConfig: cc(), SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}},
			},
		},
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: foreignConfig},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{
				{Name: "other.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://example.com"), CABundle: []byte("not ours")}, SideEffects: &sideEffects, AdmissionReviewVersions: []string{"v1"}},
			},
		},
	}
}

// harness runs a Rotator against a fake client and a fake clock.
type harness struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	client  client.WithWatch
	serving *ServingCert
	rot     *Rotator
	rec     *recorder
	logs    *logBuffer
	// unguarded turns off the between-writes check, for tests that break trust on purpose.
	unguarded bool
}

type harnessOption func(*fake.ClientBuilder, *Options)

func withObjects(objs ...client.Object) harnessOption {
	return func(b *fake.ClientBuilder, _ *Options) { b.WithObjects(objs...) }
}

func withOptions(f func(*Options)) harnessOption {
	return func(_ *fake.ClientBuilder, o *Options) { f(o) }
}

func newHarness(t *testing.T, hopts ...harnessOption) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(t0), serving: NewServingCert(), rec: &recorder{}, logs: &logBuffer{}}
	b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(webhookConfigs()...)
	o := testOptions()
	for _, f := range hopts {
		f(b, &o)
	}
	// Every write is intercepted to check the invariant in the state just before it: a window in which
	// the served leaf is not trusted would show up between two writes of one reconcile.
	h.client = b.WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			h.checkBetweenWrites(c)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			h.checkBetweenWrites(c)
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	o.Clock, o.Log, o.Recorder = h.clock, h.logs.logger(), h.rec
	rot, err := NewRotator(h.client, h.client, h.serving, o)
	if err != nil {
		t.Fatalf("NewRotator: %v", err)
	}
	h.rot = rot
	return h
}

// checkBetweenWrites fails the test when the served leaf is not trusted by a caBundle in c right now.
func (h *harness) checkBetweenWrites(c client.Reader) {
	leaf := h.serving.Leaf()
	if leaf == nil || h.rot == nil || !h.rot.Ready() || h.unguarded {
		return // before trust was first established there is nothing to keep
	}
	if now := h.clock.Now(); now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return // the clock jumped past the leaf's life (a process that was down): nothing valid to keep
	}
	for _, ref := range h.rot.refs {
		obj, err := getConfig(context.Background(), c, ref)
		if err != nil || obj == nil {
			continue
		}
		for _, wb := range caBundles(obj) {
			roots, err := ParseCertificates(*wb.bundle)
			if err != nil || !verifiesWith(leaf, roots, h.clock.Now()) {
				h.t.Errorf("at %s, between two writes: the served leaf (issuer %q) is not trusted by webhook %s in %s",
					h.clock.Now().Sub(t0), leaf.Issuer.CommonName, wb.webhook, ref)
			}
		}
	}
}

func (h *harness) reconcile() reconcile.Result {
	h.t.Helper()
	res, err := h.rot.Reconcile(context.Background(), reconcile.Request{})
	if err != nil {
		h.t.Fatalf("Reconcile at %s: %v", h.clock.Now().Sub(t0), err)
	}
	return res
}

// settle reconciles until the Secret stops changing, as the Secret watch would, checking the
// trust invariant after every step.
func (h *harness) settle() reconcile.Result {
	h.t.Helper()
	var res reconcile.Result
	for i := 0; i < 10; i++ {
		before := h.secret().ResourceVersion
		res = h.reconcile()
		h.assertServedLeafTrusted()
		if h.secret().ResourceVersion == before {
			return res
		}
	}
	h.t.Fatalf("the Secret kept changing at %s", h.clock.Now().Sub(t0))
	return res
}

func (h *harness) secret() *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: testNamespace, Name: testSecret}, s); err != nil {
		return &corev1.Secret{}
	}
	return s
}

func (h *harness) updateSecret(mutate func(*corev1.Secret)) {
	h.t.Helper()
	s := h.secret()
	mutate(s)
	if err := h.client.Update(context.Background(), s); err != nil {
		h.t.Fatal(err)
	}
}

// bundles returns the caBundle of every webhook in every configuration named in the options.
func (h *harness) bundles() map[string][]byte {
	h.t.Helper()
	out := map[string][]byte{}
	for _, ref := range h.rot.refs {
		obj, err := getConfig(context.Background(), h.client, ref)
		if err != nil {
			h.t.Fatalf("read %s: %v", ref, err)
		}
		if obj == nil {
			continue // a configuration that does not exist calls nobody
		}
		for _, wb := range caBundles(obj) {
			out[ref.String()+"/"+wb.webhook] = *wb.bundle
		}
	}
	return out
}

// assertServedLeafTrusted is the invariant of the package: what the server presents verifies against
// every caBundle the apiserver would use, and is what the Secret holds.
func (h *harness) assertServedLeafTrusted() {
	h.t.Helper()
	now := h.clock.Now()
	leaf := h.serving.Leaf()
	if leaf == nil {
		h.t.Fatalf("at %s: nothing is served", now.Sub(t0))
	}
	for name, b := range h.bundles() {
		roots, err := ParseCertificates(b)
		if err != nil {
			h.t.Fatalf("at %s: %s has no usable caBundle: %v", now.Sub(t0), name, err)
		}
		if !verifiesWith(leaf, roots, now) {
			h.t.Fatalf("at %s: the served leaf (issuer %q) does not verify against the caBundle of %s (%d CAs)",
				now.Sub(t0), leaf.Issuer.CommonName, name, len(roots))
		}
	}
	s := h.secret()
	stored, err := ParseCertificates(s.Data[SecretKeyTLSCert])
	if err != nil || !stored[0].Equal(leaf) {
		h.t.Fatalf("at %s: the served leaf is not the one in the Secret", now.Sub(t0))
	}
}

// state summarises the Secret: the current CA, how many CAs the bundle has, and whether the leaf is
// signed by the current CA.
type secretState struct {
	ca            *x509.Certificate
	bundle        []*x509.Certificate
	leaf          *x509.Certificate
	leafByCurrent bool
}

func (h *harness) state() secretState {
	h.t.Helper()
	s := h.secret()
	ca, err := ParseCertificates(s.Data[SecretKeyCACert])
	if err != nil {
		h.t.Fatalf("ca.crt: %v", err)
	}
	bundle, err := ParseCertificates(s.Data[SecretKeyCABundle])
	if err != nil {
		h.t.Fatalf("ca-bundle.crt: %v", err)
	}
	leaf, err := ParseCertificates(s.Data[SecretKeyTLSCert])
	if err != nil {
		h.t.Fatalf("tls.crt: %v", err)
	}
	return secretState{ca: ca[0], bundle: bundle, leaf: leaf[0], leafByCurrent: leaf[0].CheckSignatureFrom(ca[0]) == nil}
}
