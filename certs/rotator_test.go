package certs

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRotatorCreatesSecretAndInjectsOnlyOurConfigs(t *testing.T) {
	h := newHarness(t)
	if err := h.rot.ReadyzCheck()(nil); err == nil || !strings.Contains(err.Error(), "not reconciled yet") {
		t.Fatalf("readiness before the first reconcile = %v, want not ready", err)
	}
	res := h.settle()

	s := h.secret()
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type = %q, want %q", s.Type, corev1.SecretTypeTLS)
	}
	for _, k := range []string{SecretKeyCACert, SecretKeyCAKey, SecretKeyCABundle, SecretKeyTLSCert, SecretKeyTLSKey} {
		if len(s.Data[k]) == 0 {
			t.Errorf("Secret lacks %s", k)
		}
	}
	st := h.state()
	if !st.ca.IsCA || len(st.bundle) != 1 || !st.bundle[0].Equal(st.ca) || !st.leafByCurrent {
		t.Fatalf("fresh Secret: want one CA in the bundle that signed the leaf, got %d CAs, leaf by current CA = %v", len(st.bundle), st.leafByCurrent)
	}
	wantNames := []string{testService, testService + "." + testNamespace, testService + "." + testNamespace + ".svc", testService + "." + testNamespace + ".svc.cluster.local"}
	if !sameNames(st.leaf, wantNames, []net.IP{net.ParseIP("127.0.0.1")}) {
		t.Errorf("leaf names = %v %v, want %v and 127.0.0.1", st.leaf.DNSNames, st.leaf.IPAddresses, wantNames)
	}
	for name, b := range h.bundles() {
		if !bytes.Equal(b, s.Data[SecretKeyCABundle]) {
			t.Errorf("%s: caBundle is not the Secret's ca-bundle.crt", name)
		}
	}
	if len(h.bundles()) != 4 {
		t.Errorf("injected into %d webhooks, want 4", len(h.bundles()))
	}
	foreign := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := h.client.Get(context.Background(), client.ObjectKey{Name: foreignConfig}, foreign); err != nil {
		t.Fatal(err)
	}
	if string(foreign.Webhooks[0].ClientConfig.CABundle) != "not ours" {
		t.Errorf("the caBundle of a configuration that is not ours was changed")
	}
	if s.Annotations[AnnotationInjectedBundle] != bundleHash(s.Data[SecretKeyCABundle]) {
		t.Errorf("injection not recorded on the Secret: %v", s.Annotations)
	}
	if !h.rot.Ready() {
		t.Errorf("not ready after the caBundle was injected: %v", h.rot.ReadyzCheck()(nil))
	}
	for _, reason := range []string{reasonCACreated, reasonLeafIssued, reasonBundleInjected} {
		if len(h.rec.find(reason)) == 0 {
			t.Errorf("no %s Event; events: %v", reason, h.rec.events)
		}
	}
	// Next wake-up: the leaf's renewal time, 10h-3h after creation.
	if res.RequeueAfter != 7*time.Hour {
		t.Errorf("RequeueAfter = %s, want 7h (leaf renewal)", res.RequeueAfter)
	}
}

func TestRotatorKeepsValidCAAndRenewsLeafAhead(t *testing.T) {
	tests := []struct {
		name          string
		advance       time.Duration
		wantLeafNew   bool
		wantCAChanged bool
	}{
		{"an hour later nothing changes", time.Hour, false, false},
		{"just before the leaf's renewal window", 7*time.Hour - time.Second, false, false},
		{"inside the leaf's renewal window", 7 * time.Hour, true, false},
		{"after the leaf expired (process was down)", 11 * time.Hour, true, false},
		{"just before the CA's renewal window", 70*time.Hour - time.Second, true, false},
		{"inside the CA's renewal window", 70 * time.Hour, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.settle()
			before := h.state()
			h.clock.Step(tt.advance)
			h.settle()
			after := h.state()
			if got := !after.leaf.Equal(before.leaf); got != tt.wantLeafNew {
				t.Errorf("leaf replaced = %v, want %v", got, tt.wantLeafNew)
			}
			if got := !after.ca.Equal(before.ca); got != tt.wantCAChanged {
				t.Errorf("CA replaced = %v, want %v", got, tt.wantCAChanged)
			}
			if tt.wantCAChanged {
				// The old CA must still be trusted: it is in the bundle next to the new one.
				if len(after.bundle) != 2 || !after.bundle[1].Equal(before.ca) {
					t.Errorf("after the CA rotation started, the bundle has %d CAs; want the new and the old", len(after.bundle))
				}
			}
		})
	}
}

// phaseOf names where a Secret is in a CA rotation.
func phaseOf(st secretState) string {
	switch {
	case len(st.bundle) == 1 && st.leafByCurrent:
		return "one CA"
	case len(st.bundle) == 2 && !st.leafByCurrent:
		return "old+new CA, leaf by old"
	case len(st.bundle) == 2 && st.leafByCurrent:
		return "old+new CA, leaf by new"
	}
	return "unexpected"
}

// TestRotatorCARotationPhases drives the Rotator the way the controller would (wake at RequeueAfter,
// reconcile again after every Secret change) through three CA rotations, and checks after every single
// reconcile that the served leaf verifies against every caBundle.
func TestRotatorCARotationPhases(t *testing.T) {
	h := newHarness(t)
	o := h.rot.opts
	res := h.settle()
	var (
		phases  []string
		entered []time.Time
		reconc  int
	)
	for end := t0.Add(250 * time.Hour); h.clock.Now().Before(end); {
		h.clock.Step(res.RequeueAfter)
		res = h.settle() // asserts the trust invariant after every reconcile
		reconc++
		now, st := h.clock.Now(), h.state()
		if p := phaseOf(st); len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
			entered = append(entered, now)
		}
		if !now.Before(st.ca.NotAfter.Add(-o.CARenewBefore)) {
			t.Fatalf("at %s the current CA is inside its renewal window: the rotation is late", now.Sub(t0))
		}
		if st.leafByCurrent && !now.Before(st.leaf.NotAfter.Add(-o.LeafRenewBefore)) {
			t.Fatalf("at %s the leaf is inside its renewal window: the renewal is late", now.Sub(t0))
		}
	}
	want := []string{"one CA", "old+new CA, leaf by old", "old+new CA, leaf by new"}
	if len(phases) < 7 {
		t.Fatalf("phases = %v, want at least three full rotations", phases)
	}
	for i, p := range phases {
		if p != want[i%3] {
			t.Fatalf("phase %d = %q, want %q; all phases: %v", i, p, want[i%3], phases)
		}
		if i > 0 && p != "one CA" && i+1 < len(phases) {
			if d := entered[i+1].Sub(entered[i]); d < o.PropagationDelay {
				t.Errorf("phase %q lasted %s, less than the propagation delay %s", p, d, o.PropagationDelay)
			}
		}
	}
	t.Logf("%d wake-ups, phases: %v", reconc, phases)
	if n := len(h.rec.find(reasonCARetired)); n < 3 {
		t.Errorf("%d %s Events, want at least 3", n, reasonCARetired)
	}
}

func TestRotatorReplacesGarbage(t *testing.T) {
	other := mustCA(t, t0, time.Hour)
	tests := []struct {
		name       string
		corrupt    func(s *corev1.Secret)
		wantLog    string
		wantCAKept bool
		// wantLeafKept: the valid leaf stays until the new CA has propagated.
		wantLeafKept bool
		// lost: nothing in the Secret still vouches for the served leaf, so a window until the new
		// bundle is injected cannot be avoided.
		lost bool
	}{
		{name: "tls.crt is not PEM", corrupt: func(s *corev1.Secret) { s.Data[SecretKeyTLSCert] = []byte("garbage") },
			wantLog: "tls.crt/tls.key: no PEM CERTIFICATE", wantCAKept: true},
		{name: "tls.key belongs to another certificate", corrupt: func(s *corev1.Secret) { s.Data[SecretKeyTLSKey] = other.KeyPEM },
			wantLog: "does not match", wantCAKept: true},
		{name: "ca.key is corrupt", corrupt: func(s *corev1.Secret) {
			s.Data[SecretKeyCAKey] = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		}, wantLog: "ca.crt/ca.key", wantLeafKept: true},
		{name: "ca.crt is not a CA", corrupt: func(s *corev1.Secret) {
			s.Data[SecretKeyCACert], s.Data[SecretKeyCAKey] = s.Data[SecretKeyTLSCert], s.Data[SecretKeyTLSKey]
		}, wantLog: "not a CA certificate", wantLeafKept: true},
		{name: "ca-bundle.crt is garbage", corrupt: func(s *corev1.Secret) { s.Data[SecretKeyCABundle] = []byte("{}") },
			wantLog: "ca-bundle.crt: no PEM", wantCAKept: true, wantLeafKept: true},
		{name: "everything is garbage", corrupt: func(s *corev1.Secret) {
			for k := range s.Data {
				s.Data[k] = []byte("x")
			}
		}, wantLog: "holds unusable data", lost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.settle()
			before := h.state()
			h.updateSecret(tt.corrupt)
			h.clock.Step(time.Second)
			h.unguarded = tt.lost

			h.reconcile() // must not fail or panic
			if !h.logs.contains("holds unusable data", tt.wantLog) {
				t.Errorf("no log line explaining %q; logs: %v", tt.wantLog, h.logs.lines)
			}
			if len(h.rec.find("Warning "+reasonInvalidData)) == 0 {
				t.Errorf("no Warning %s Event", reasonInvalidData)
			}
			after := h.state()
			if got := after.ca.Equal(before.ca); got != tt.wantCAKept {
				t.Errorf("CA kept = %v, want %v", got, tt.wantCAKept)
			}
			if got := after.leaf.Equal(before.leaf); got != tt.wantLeafKept {
				t.Errorf("leaf kept = %v, want %v", got, tt.wantLeafKept)
			}
			h.assertServedLeafTrusted()

			// It converges to a clean state.
			res := h.settle()
			for i := 0; i < 5 && phaseOf(h.state()) != "one CA"; i++ {
				h.clock.Step(res.RequeueAfter)
				res = h.settle()
			}
			if p := phaseOf(h.state()); p != "one CA" {
				t.Errorf("did not converge: %s", p)
			}
		})
	}
}

func TestRotatorFillsSecretPreparedByTheChart(t *testing.T) {
	empty := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret, Labels: map[string]string{"helm": "yes"}},
		Data: map[string][]byte{"unrelated": []byte("keep me")}}
	h := newHarness(t, withObjects(empty))
	h.settle()
	s := h.secret()
	if string(s.Data["unrelated"]) != "keep me" || s.Labels["helm"] != "yes" {
		t.Errorf("the Rotator dropped data or labels it does not own: %v %v", s.Labels, s.Data["unrelated"])
	}
	if phaseOf(h.state()) != "one CA" {
		t.Errorf("Secret not filled")
	}
	if len(h.rec.find(reasonInvalidData)) != 0 {
		t.Errorf("an empty Secret is not garbage, got %v", h.rec.find(reasonInvalidData))
	}
}

func TestRotatorRestoresTamperedBundle(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(*admissionregistrationv1.ValidatingWebhookConfiguration)
	}{
		{"overwritten with another CA", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[1].ClientConfig.CABundle = mustCA(t, t0, time.Hour).CertPEM
		}},
		{"emptied", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].ClientConfig.CABundle = nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.settle()
			want := h.secret().Data[SecretKeyCABundle]
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := h.client.Get(context.Background(), client.ObjectKey{Name: testValidating}, v); err != nil {
				t.Fatal(err)
			}
			tt.tamper(v)
			h.unguarded = true // the tampering itself breaks trust until it is repaired
			if err := h.client.Update(context.Background(), v); err != nil {
				t.Fatal(err)
			}
			h.clock.Step(time.Minute)
			h.settle()
			for name, b := range h.bundles() {
				if !bytes.Equal(b, want) {
					t.Errorf("%s: caBundle not restored", name)
				}
			}
			if !h.rot.Ready() {
				t.Error("readiness dropped")
			}
			if len(h.rec.find(reasonBundleInjected)) < 2 {
				t.Errorf("no Event for the restore; events: %v", h.rec.events)
			}
		})
	}
}

// TestRotatorTamperDuringRotationRestartsTheDelay puts a bundle with only the old CA back into a
// configuration after the new CA was published: the leaf must not move to the new CA until the repaired
// bundle has been in place for a full propagation delay again.
func TestRotatorTamperDuringRotationRestartsTheDelay(t *testing.T) {
	h := newHarness(t)
	d := h.rot.opts.PropagationDelay
	res := h.settle()
	for i := 0; phaseOf(h.state()) != "old+new CA, leaf by old"; i++ {
		if i > 100 {
			t.Fatal("the CA rotation never started")
		}
		h.clock.Step(res.RequeueAfter)
		res = h.settle()
	}
	during := h.state()
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := h.client.Get(context.Background(), client.ObjectKey{Name: testValidating}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks[0].ClientConfig.CABundle = EncodeCertificates(during.bundle[1:]) // the old CA only
	h.unguarded = true
	if err := h.client.Update(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(d + time.Second) // the first propagation delay is over
	h.reconcile()
	h.reconcile()
	if !h.state().leaf.Equal(during.leaf) {
		t.Fatal("the leaf moved to the new CA right after a tampered caBundle was repaired")
	}
	h.unguarded = false
	h.assertServedLeafTrusted()
	h.clock.Step(d)
	h.settle()
	if p := phaseOf(h.state()); p != "old+new CA, leaf by new" {
		t.Fatalf("a propagation delay after the repair: %s, want the leaf on the new CA", p)
	}
}

// TestRotatorAdoptsTheWinner makes another replica win the race right before this one writes.
func TestRotatorAdoptsTheWinner(t *testing.T) {
	tests := []struct {
		name string
		// advance happens after both saw a settled Secret and before the race; 0 races the creation.
		advance time.Duration
		hook    func(*interceptor.Funcs, func())
	}{
		{"both create the Secret", 0, func(f *interceptor.Funcs, winnerRuns func()) {
			f.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*corev1.Secret); ok {
					winnerRuns()
				}
				return c.Create(ctx, obj, opts...)
			}
		}},
		{"both renew the leaf", 8 * time.Hour, func(f *interceptor.Funcs, winnerRuns func()) {
			f.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if _, ok := obj.(*corev1.Secret); ok {
					winnerRuns()
				}
				return c.Update(ctx, obj, opts...)
			}
		}},
		{"both start a CA rotation", 71 * time.Hour, func(f *interceptor.Funcs, winnerRuns func()) {
			f.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if _, ok := obj.(*corev1.Secret); ok {
					winnerRuns()
				}
				return c.Update(ctx, obj, opts...)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(webhookConfigs()...).Build()
			clk := clocktesting.NewFakeClock(t0) // both replicas share the time
			newRot := func(c client.Client, logs *logBuffer) (*Rotator, *ServingCert) {
				o := testOptions()
				o.Clock, o.Log = clk, logs.logger()
				s := NewServingCert()
				r, err := NewRotator(c, c, s, o)
				if err != nil {
					t.Fatal(err)
				}
				return r, s
			}
			winnerLogs, loserLogs := &logBuffer{}, &logBuffer{}
			winner, winnerServing := newRot(base, winnerLogs)
			armed := false
			funcs := interceptor.Funcs{}
			tt.hook(&funcs, func() {
				if !armed {
					return
				}
				armed = false
				if _, err := winner.Reconcile(context.Background(), reconcile.Request{}); err != nil {
					t.Fatalf("winner: %v", err)
				}
			})
			loser, loserServing := newRot(interceptor.NewClient(base, funcs), loserLogs)
			if tt.advance > 0 {
				mustReconcile(t, winner)
				mustReconcile(t, loser)
				clk.Step(tt.advance)
			}
			armed = true
			mustReconcile(t, loser)
			if armed {
				t.Fatal("the race did not happen: the loser never wrote the Secret")
			}
			if !loserLogs.contains("adopting its content") {
				t.Errorf("the loser did not say it adopted the winner's Secret; logs: %v", loserLogs.lines)
			}
			s := &corev1.Secret{}
			if err := base.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: testSecret}, s); err != nil {
				t.Fatal(err)
			}
			stored, _ := ParseCertificates(s.Data[SecretKeyTLSCert])
			if !winnerServing.Leaf().Equal(stored[0]) || !loserServing.Leaf().Equal(stored[0]) {
				t.Errorf("the replicas do not both serve the Secret's leaf")
			}
			mustReconcile(t, winner)
			mustReconcile(t, loser)
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := base.Get(context.Background(), client.ObjectKey{Name: testValidating}, v); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, s.Data[SecretKeyCABundle]) {
				t.Errorf("the injected caBundle is not the winner's")
			}
		})
	}
}

func mustReconcile(t *testing.T, r reconcile.Reconciler) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

func TestRotatorReadinessWaitsForConfigsAndLatches(t *testing.T) {
	h := newHarness(t, withOptions(func(o *Options) {
		o.ValidatingWebhookConfigurations = append(o.ValidatingWebhookConfigurations, "created-later")
	}))
	h.settle()
	err := h.rot.ReadyzCheck()(nil)
	if err == nil || !strings.Contains(err.Error(), "created-later does not exist yet") {
		t.Fatalf("readiness with a missing configuration = %v", err)
	}
	later := webhookConfigs()[1].(*admissionregistrationv1.ValidatingWebhookConfiguration)
	later.Name, later.ResourceVersion = "created-later", ""
	if err := h.client.Create(context.Background(), later); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if err := h.rot.ReadyzCheck()(nil); err != nil {
		t.Fatalf("readiness once every configuration trusts the leaf = %v", err)
	}
	// During a CA rotation every replica stays ready.
	h.clock.Step(70 * time.Hour)
	h.reconcile()
	if err := h.rot.ReadyzCheck()(nil); err != nil {
		t.Fatalf("readiness during a rotation = %v", err)
	}
}

func TestRotatorMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering the metrics twice in one registry succeeded")
	}
	h := newHarness(t, withOptions(func(o *Options) { o.Metrics = m }))
	h.settle()
	st := h.state()
	if got := gathered(t, reg, "joiner_webhook_cert_expiry_timestamp_seconds", certLabelLeaf); got != float64(st.leaf.NotAfter.Unix()) {
		t.Errorf("leaf expiry = %v, want %v", got, st.leaf.NotAfter.Unix())
	}
	if got := gathered(t, reg, "joiner_webhook_cert_expiry_timestamp_seconds", certLabelCA); got != float64(st.ca.NotAfter.Unix()) {
		t.Errorf("CA expiry = %v, want %v", got, st.ca.NotAfter.Unix())
	}
	if got := gathered(t, reg, "joiner_webhook_cert_rotations_total", certLabelLeaf); got != 0 {
		t.Errorf("leaf rotations after the first load = %v, want 0", got)
	}
	h.clock.Step(8 * time.Hour)
	h.settle()
	if got := gathered(t, reg, "joiner_webhook_cert_rotations_total", certLabelLeaf); got != 1 {
		t.Errorf("leaf rotations after one renewal = %v, want 1", got)
	}
	h.clock.Step(63 * time.Hour)
	h.settle()
	if got := gathered(t, reg, "joiner_webhook_cert_rotations_total", certLabelCA); got != 1 {
		t.Errorf("CA rotations after one CA rotation = %v, want 1", got)
	}
}

// gathered reads one sample from reg, as a scrape would; a missing sample reads as 0.
func gathered(t *testing.T, reg *prometheus.Registry, name, cert string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cert" && l.GetValue() == cert {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func TestOptionsValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"valid", func(*Options) {}, ""},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "Namespace and SecretName are required"},
		{"no names", func(o *Options) { o.ServiceName, o.IPAddresses = "", nil }, "set ServiceName, DNSNames or IPAddresses"},
		{"CA renew longer than its life", func(o *Options) { o.CARenewBefore = o.CAValidity }, "CARenewBefore"},
		{"leaf renew longer than its life", func(o *Options) { o.LeafRenewBefore = o.LeafValidity }, "LeafRenewBefore"},
		{"leaf lookahead beyond the CA's", func(o *Options) { o.LeafRenewBefore, o.LeafValidity = 40*time.Hour, 90*time.Hour }, "must not exceed CARenewBefore"},
		{"propagation delay too long", func(o *Options) { o.PropagationDelay = 2 * time.Hour }, "twice PropagationDelay"},
		{"negative", func(o *Options) { o.ResyncPeriod = -1 }, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			tt.mutate(&o)
			_, err := NewRotator(fake.NewClientBuilder().Build(), fake.NewClientBuilder().Build(), NewServingCert(), o)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	tests := []struct {
		name                 string
		o                    Options
		wantCARenew, wantLRB time.Duration
	}{
		{"zero values", Options{}, DefaultCARenewBefore, DefaultLeafRenewBefore},
		{"short lifetimes use a third", Options{CAValidity: 30 * time.Second, LeafValidity: 9 * time.Second, PropagationDelay: time.Second}, 10 * time.Second, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Namespace, o.SecretName, o.ServiceName = "ns", "s", "svc"
			got, err := o.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if got.CARenewBefore != tt.wantCARenew || got.LeafRenewBefore != tt.wantLRB {
				t.Errorf("renew before: CA %s leaf %s, want %s %s", got.CARenewBefore, got.LeafRenewBefore, tt.wantCARenew, tt.wantLRB)
			}
			if len(got.DNSNames) != 4 || got.DNSNames[3] != "svc.ns.svc.cluster.local" {
				t.Errorf("DNS names = %v", got.DNSNames)
			}
		})
	}
}
