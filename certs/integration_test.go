package certs

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/joiner-dev/joiner/testbed"
)

// One control plane (etcd + kube-apiserver, with cert-manager's CRDs from the module cache) serves every
// integration test of the package; it starts on first use, so unit-test-only runs do not pay for it.
var shared struct {
	once sync.Once
	env  *testbed.Env
	err  error
}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // controller-runtime's own logger; ours go through testr
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop test bed: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func sharedEnv(t *testing.T) *testbed.Env {
	t.Helper()
	shared.once.Do(func() {
		dir, err := certManagerCRDs()
		if err != nil {
			shared.err = err
			return
		}
		shared.env, shared.err = testbed.Start(context.Background(), testbed.Options{CRDDirs: []string{dir}})
	})
	if shared.err != nil {
		t.Fatalf("start the test bed: %v", shared.err)
	}
	return shared.env
}

// certManagerCRDs copies the cert-manager.io CRDs shipped in the cert-manager module (already in the
// module cache, since go.mod requires it) into a temporary directory.
func certManagerCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return "", fmt.Errorf("locate the cert-manager module: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	dst, err := os.MkdirTemp("", "joiner-certs-crds-")
	if err != nil {
		return "", err
	}
	for _, f := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml", "cert-manager.io_clusterissuers.yaml", "cert-manager.io_certificaterequests.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("read cert-manager CRD: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o600); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// admissionCounter is a validating webhook handler that denies ConfigMaps named deny-* and counts the rest.
type admissionCounter struct {
	allowed atomic.Int64
	seen    sync.Map // name -> true
}

func (a *admissionCounter) Handle(_ context.Context, req admission.Request) admission.Response {
	a.seen.Store(req.Name, true)
	if strings.HasPrefix(req.Name, "deny-") {
		return admission.Denied("denied by the certs test webhook")
	}
	a.allowed.Add(1)
	return admission.Allowed("")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// newWebhookServer returns a controller-runtime webhook server on 127.0.0.1 serving serving's certificate
// at /validate. With closeConns every response closes its connection, so every admission request makes
// a new TLS handshake and sees the certificate served at that moment.
func newWebhookServer(t *testing.T, serving *ServingCert, h *admissionCounter, closeConns bool) (webhook.Server, int) {
	t.Helper()
	port := freePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: serving.TLSOpts(TLSOptions{})})
	hook := &admission.Webhook{Handler: h}
	srv.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closeConns {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
	return srv, port
}

// validatingConfig has one webhook per port, each sending ConfigMap creations in namespace ns to
// https://127.0.0.1:<port>/validate, failing closed.
func validatingConfig(name, ns string, ports ...int) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, port := range ports {
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:                    fmt.Sprintf("w%d.%s.certs.joiner.dev", i, ns),
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/validate", port))},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		})
	}
	return v
}

// fixture is a namespace and a ValidatingWebhookConfiguration of one test, removed at its end.
type fixture struct {
	t      *testing.T
	env    *testbed.Env
	c      client.Client
	ns     string
	config string
}

func newFixture(t *testing.T, ns string, scheme *runtime.Scheme) *fixture {
	t.Helper()
	env := sharedEnv(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000 // the client-side default (5/s) would be the bottleneck of the load test
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, env: env, c: c, ns: ns, config: ns + "-validating"}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: f.config}})
	})
	return f
}

func (f *fixture) createConfig(ports ...int) {
	f.t.Helper()
	if err := f.c.Create(context.Background(), validatingConfig(f.config, f.ns, ports...)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) options(name string) Options {
	return Options{
		Target: Target{
			Namespace:                       f.ns,
			SecretName:                      name,
			ServiceName:                     "joiner-webhook",
			IPAddresses:                     []net.IP{net.ParseIP("127.0.0.1")},
			ValidatingWebhookConfigurations: []string{f.config},
			Log:                             testr.NewWithOptions(f.t, testr.Options{Verbosity: 0}),
		},
	}
}

// startManager runs a manager (one "replica") until the test ends.
func (f *fixture) startManager(scheme *runtime.Scheme, srvs []webhook.Server, setup func(manager.Manager) error) {
	f.t.Helper()
	f.prepareManager(scheme, srvs, setup)()
}

// prepareManager sets a manager up and returns the function that starts it; it stops when the test ends.
func (f *fixture) prepareManager(scheme *runtime.Scheme, srvs []webhook.Server, setup func(manager.Manager) error) (start func()) {
	f.t.Helper()
	mgr, err := manager.New(f.env.Config, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)}, // several "replicas" in one process
		Logger:                 logr.Discard(),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, s := range srvs {
		if err := mgr.Add(s); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := setup(mgr); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	return func() {
		go func() { done <- mgr.Start(ctx) }()
		f.t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				f.t.Errorf("manager: %v", err)
			}
		})
	}
}

// eventually polls cond every 50 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) createConfigMap(name string) error {
	return f.c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}})
}

func (f *fixture) secret(name string) *corev1.Secret {
	s := &corev1.Secret{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, s); err != nil {
		return nil
	}
	return s
}

func (f *fixture) caBundles() [][]byte {
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: f.config}, v); err != nil {
		f.t.Fatal(err)
	}
	var out [][]byte
	for _, w := range v.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

// TestIntegrationApiserverCallsWebhookWithInjectedCA: the self-managed mode, with a scheme that does not
// know cert-manager, gets the apiserver to call a webhook over TLS; the webhook both allows and denies.
func TestIntegrationApiserverCallsWebhookWithInjectedCA(t *testing.T) {
	scheme := testScheme(t)
	f := newFixture(t, "certs-tls", scheme)
	serving, counter := NewServingCert(), &admissionCounter{}
	srv, port := newWebhookServer(t, serving, counter, false)
	f.createConfig(port)
	var rot *Rotator
	f.startManager(scheme, []webhook.Server{srv}, func(mgr manager.Manager) error {
		var err error
		if rot, err = NewRotator(mgr.GetClient(), mgr.GetAPIReader(), serving, f.options("webhook-certs")); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook-certs", rot.ReadyzCheck()); err != nil {
			return err
		}
		return rot.SetupWithManager(mgr)
	})
	eventually(t, 30*time.Second, "the Rotator to be ready", rot.Ready)

	tests := []struct {
		name     string
		wantDeny bool
	}{
		{"allowed-1", false},
		{"deny-me", true},
		{"allowed-2", false},
	}
	for _, tt := range tests {
		err := f.createConfigMap(tt.name)
		switch {
		case tt.wantDeny && (err == nil || !strings.Contains(err.Error(), "denied by the certs test webhook")):
			t.Errorf("%s: err = %v, want the webhook's denial", tt.name, err)
		case !tt.wantDeny && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		}
		if _, ok := counter.seen.Load(tt.name); !ok {
			t.Errorf("%s: the webhook never saw it", tt.name)
		}
	}
	s := f.secret("webhook-certs")
	if s == nil || s.Type != corev1.SecretTypeTLS {
		t.Fatalf("Secret: %+v", s)
	}
	for _, b := range f.caBundles() {
		if !bytes.Equal(b, s.Data[SecretKeyCABundle]) {
			t.Error("the caBundle is not the Secret's ca-bundle.crt")
		}
	}
}

// TestIntegrationRotationUnderLoad rotates the leaf every 2.5 s and the CA every 6 s while two clients
// create ConfigMaps without pause, each admission on a new TLS handshake; not one may fail.
func TestIntegrationRotationUnderLoad(t *testing.T) {
	scheme := testScheme(t)
	f := newFixture(t, "certs-rotation", scheme)
	serving, counter := NewServingCert(), &admissionCounter{}
	srv, port := newWebhookServer(t, serving, counter, true)
	f.createConfig(port)
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	o := f.options("rotating-certs")
	o.CAValidity, o.CARenewBefore = 12*time.Second, 6*time.Second
	o.LeafValidity, o.LeafRenewBefore = 5*time.Second, 2500*time.Millisecond
	o.PropagationDelay = time.Second
	o.Metrics = metrics
	var rot *Rotator
	f.startManager(scheme, []webhook.Server{srv}, func(mgr manager.Manager) error {
		var err error
		if rot, err = NewRotator(mgr.GetClient(), mgr.GetAPIReader(), serving, o); err != nil {
			return err
		}
		return rot.SetupWithManager(mgr)
	})
	eventually(t, 30*time.Second, "the Rotator to be ready", rot.Ready)
	firstCA := f.secret("rotating-certs").Data[SecretKeyCACert]

	const (
		workers  = 2
		duration = 15 * time.Second
	)
	var (
		ok, failed atomic.Int64
		mu         sync.Mutex
		failures   []string
		wg         sync.WaitGroup
	)
	stop := time.Now().Add(duration)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				if err := f.createConfigMap(fmt.Sprintf("load-%d-%d", w, i)); err != nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
					mu.Unlock()
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()

	leafRotations := gathered(t, reg, "joiner_webhook_cert_rotations_total", certLabelLeaf)
	caRotations := gathered(t, reg, "joiner_webhook_cert_rotations_total", certLabelCA)
	t.Logf("admissions: %d allowed, %d failed; served-leaf rotations %v, CA rotations %v", ok.Load(), failed.Load(), leafRotations, caRotations)
	if n := failed.Load(); n != 0 {
		t.Errorf("%d admissions failed during rotation, want 0; first ones: %v", n, failures[:min(len(failures), 5)])
	}
	if ok.Load() < 100 {
		t.Errorf("only %d admissions in %s: the load did not exercise the rotation", ok.Load(), duration)
	}
	if got := counter.allowed.Load(); got != ok.Load() {
		t.Errorf("the webhook allowed %d requests but the clients saw %d succeed", got, ok.Load())
	}
	if leafRotations < 4 || caRotations < 2 {
		t.Errorf("leaf rotations %v, CA rotations %v; want at least 4 and 2", leafRotations, caRotations)
	}
	if bytes.Equal(f.secret("rotating-certs").Data[SecretKeyCACert], firstCA) {
		t.Error("the CA never changed")
	}
}

// TestIntegrationTwoReplicasRace starts two managers at the same moment on one Secret. Each replica has
// its own webhook server and its own webhook in the configuration, so a ConfigMap creation only passes
// when the single caBundle trusts what both replicas serve.
func TestIntegrationTwoReplicasRace(t *testing.T) {
	scheme := testScheme(t)
	f := newFixture(t, "certs-race", scheme)
	const replicas = 2
	var (
		servings [replicas]*ServingCert
		rots     [replicas]*Rotator
		srvs     [replicas]webhook.Server
		ports    [replicas]int
		counters [replicas]*admissionCounter
	)
	for i := range replicas {
		servings[i], counters[i] = NewServingCert(), &admissionCounter{}
		srvs[i], ports[i] = newWebhookServer(t, servings[i], counters[i], false)
	}
	f.createConfig(ports[:]...)
	var starts [replicas]func()
	for i := range replicas {
		starts[i] = f.prepareManager(scheme, []webhook.Server{srvs[i]}, func(mgr manager.Manager) error {
			var err error
			o := f.options("raced-certs")
			o.Log = o.Log.WithValues("replica", i)
			if rots[i], err = NewRotator(mgr.GetClient(), mgr.GetAPIReader(), servings[i], o); err != nil {
				return err
			}
			return rots[i].SetupWithManager(mgr)
		})
	}
	for _, start := range starts { // the same moment, as far as one process can
		start()
	}
	eventually(t, 30*time.Second, "both replicas to be ready", func() bool { return rots[0].Ready() && rots[1].Ready() })
	eventually(t, 10*time.Second, "both replicas to serve the Secret's leaf and the configuration to hold its bundle", func() bool {
		s := f.secret("raced-certs")
		if s == nil {
			return false
		}
		stored, err := ParseCertificates(s.Data[SecretKeyTLSCert])
		if err != nil {
			return false
		}
		for i := range replicas {
			if !servings[i].Leaf().Equal(stored[0]) {
				return false
			}
		}
		for _, b := range f.caBundles() {
			if !bytes.Equal(b, s.Data[SecretKeyCABundle]) {
				return false
			}
		}
		return true
	})
	if bundle, _ := ParseCertificates(f.secret("raced-certs").Data[SecretKeyCABundle]); len(bundle) != 1 {
		t.Errorf("the bundle holds %d CAs after a race from nothing, want 1", len(bundle))
	}
	if err := f.createConfigMap("after-the-race"); err != nil {
		t.Fatalf("admission through both replicas: %v", err)
	}
	for i := range replicas {
		if _, ok := counters[i].seen.Load("after-the-race"); !ok {
			t.Errorf("replica %d's webhook was not called", i)
		}
	}
}

// TestIntegrationTamperedBundleIsRestored overwrites the injected caBundle; the watch on the
// configuration brings it back without waiting for a resync.
func TestIntegrationTamperedBundleIsRestored(t *testing.T) {
	scheme := testScheme(t)
	f := newFixture(t, "certs-tamper", scheme)
	serving, counter := NewServingCert(), &admissionCounter{}
	srv, port := newWebhookServer(t, serving, counter, false)
	f.createConfig(port)
	var rot *Rotator
	f.startManager(scheme, []webhook.Server{srv}, func(mgr manager.Manager) error {
		var err error
		if rot, err = NewRotator(mgr.GetClient(), mgr.GetAPIReader(), serving, f.options("tamper-certs")); err != nil {
			return err
		}
		return rot.SetupWithManager(mgr)
	})
	eventually(t, 30*time.Second, "the Rotator to be ready", rot.Ready)
	want := f.secret("tamper-certs").Data[SecretKeyCABundle]

	stranger, err := NewCA(time.Now(), time.Hour, "stranger")
	if err != nil {
		t.Fatal(err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: f.config}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks[0].ClientConfig.CABundle = stranger.CertPEM
	if err := f.c.Update(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the caBundle to be restored", func() bool { return bytes.Equal(f.caBundles()[0], want) })
	eventually(t, 10*time.Second, "admission to work again", func() bool { return f.createConfigMap(fmt.Sprintf("after-restore-%d", time.Now().UnixNano())) == nil })
}

// TestIntegrationCertManagerMode creates the cert-manager objects in a real apiserver (validated by
// cert-manager's CRDs), then plays cert-manager and cainjector: it fills the Secret, marks the Certificate
// Ready and sets the caBundle, and checks the apiserver calls the webhook served from that Secret.
func TestIntegrationCertManagerMode(t *testing.T) {
	scheme := testScheme(t)
	if err := RegisterCertManagerTypes(scheme); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "certs-cert-manager", scheme)
	ctx := context.Background()
	serving, counter := NewServingCert(), &admissionCounter{}
	srv, port := newWebhookServer(t, serving, counter, false)
	f.createConfig(port)
	var r *CertManagerReconciler
	f.startManager(scheme, []webhook.Server{srv}, func(mgr manager.Manager) error {
		var err error
		r, err = NewCertManagerReconciler(mgr.GetClient(), mgr.GetAPIReader(), serving, CertManagerOptions{
			Target: Target{
				Namespace:                       f.ns,
				SecretName:                      "cm-webhook-certs",
				ServiceName:                     "joiner-webhook",
				IPAddresses:                     []net.IP{net.ParseIP("127.0.0.1")},
				ValidatingWebhookConfigurations: []string{f.config},
				Log:                             testr.New(t),
			},
		})
		if err != nil {
			return err
		}
		return r.SetupWithManager(mgr)
	})

	cert := &cmapi.Certificate{}
	eventually(t, 30*time.Second, "the serving Certificate to be created", func() bool {
		return f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "cm-webhook-certs"}, cert) == nil
	})
	for _, obj := range []client.Object{
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cm-webhook-certs-selfsigned"}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cm-webhook-certs-ca"}},
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cm-webhook-certs-ca"}},
	} {
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T %s: %v", obj, obj.GetName(), err)
		}
	}
	eventually(t, 10*time.Second, "the inject-ca-from annotation", func() bool {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		return f.c.Get(ctx, client.ObjectKey{Name: f.config}, v) == nil && v.Annotations[cmapi.WantInjectAnnotation] == f.ns+"/cm-webhook-certs"
	})
	eventually(t, 20*time.Second, "a CertificateNotReady Event", func() bool {
		var evs eventsv1.EventList
		if err := f.c.List(ctx, &evs, client.InNamespace(f.ns)); err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "CertificateNotReady" && e.Regarding.Name == "cm-webhook-certs" {
				return true
			}
		}
		return false
	})
	if r.Ready() {
		t.Fatal("ready while the Certificate is not Ready")
	}

	// cert-manager: the Secret and the Ready condition.
	ca, err := NewCA(time.Now(), time.Hour, "cm-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := NewServingLeaf(time.Now(), time.Hour, ca, cert.Spec.DNSNames, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cm-webhook-certs"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{SecretKeyTLSCert: leaf.CertPEM, SecretKeyTLSKey: leaf.KeyPEM, SecretKeyCACert: ca.CertPEM}}); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Get(ctx, client.ObjectKeyFromObject(cert), cert); err != nil {
		t.Fatal(err)
	}
	cert.Status.Conditions = []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready", Message: "issued by the test", ObservedGeneration: cert.Generation}}
	if err := f.c.Status().Update(ctx, cert); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the Secret to be served", func() bool { return serving.Leaf() != nil && serving.Leaf().Equal(leaf.Cert) })

	// cainjector: the caBundle from the Certificate's Secret.
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := f.c.Get(ctx, client.ObjectKey{Name: f.config}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks[0].ClientConfig.CABundle = ca.CertPEM
	if err := f.c.Update(ctx, v); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "readiness after cainjector", r.Ready)
	eventually(t, 10*time.Second, "the apiserver to call the webhook", func() bool {
		err := f.createConfigMap("through-cert-manager")
		return err == nil || apierrors.IsAlreadyExists(err)
	})
	if _, ok := counter.seen.Load("through-cert-manager"); !ok {
		t.Error("the webhook did not see the ConfigMap")
	}
}
