package certs

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func cmScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := testScheme(t)
	if err := RegisterCertManagerTypes(s); err != nil {
		t.Fatal(err)
	}
	if err := RegisterCertManagerTypes(s); err != nil {
		t.Fatalf("registering twice: %v", err)
	}
	return s
}

func cmOptions() CertManagerOptions {
	return CertManagerOptions{
		Target: Target{
			Namespace:                       testNamespace,
			SecretName:                      testSecret,
			ServiceName:                     testService,
			IPAddresses:                     []net.IP{net.ParseIP("127.0.0.1")},
			MutatingWebhookConfigurations:   []string{testMutating},
			ValidatingWebhookConfigurations: []string{testValidating},
		},
	}
}

func TestCertManagerObjects(t *testing.T) {
	svcNames := []string{testService, testService + "." + testNamespace, testService + "." + testNamespace + ".svc", testService + "." + testNamespace + ".svc.cluster.local"}
	tests := []struct {
		name       string
		mutate     func(*CertManagerOptions)
		wantKinds  []string // "Kind/name" in order
		wantIssuer cmmeta.IssuerReference
	}{
		{
			name: "self-signed bootstrap chain",
			wantKinds: []string{
				"Issuer/" + testSecret + "-selfsigned", "Certificate/" + testSecret + "-ca", "Issuer/" + testSecret + "-ca", "Certificate/" + testSecret,
			},
			wantIssuer: cmmeta.IssuerReference{Name: testSecret + "-ca", Kind: "Issuer", Group: "cert-manager.io"},
		},
		{
			name: "user Issuer, custom certificate name",
			mutate: func(o *CertManagerOptions) {
				o.IssuerRef, o.CertificateName = &cmmeta.IssuerReference{Name: "corp-ca"}, "joiner-serving"
			},
			wantKinds:  []string{"Certificate/joiner-serving"},
			wantIssuer: cmmeta.IssuerReference{Name: "corp-ca", Kind: "Issuer", Group: "cert-manager.io"},
		},
		{
			name: "user ClusterIssuer",
			mutate: func(o *CertManagerOptions) {
				o.IssuerRef = &cmmeta.IssuerReference{Name: "vault", Kind: "ClusterIssuer"}
			},
			wantKinds:  []string{"Certificate/" + testSecret},
			wantIssuer: cmmeta.IssuerReference{Name: "vault", Kind: "ClusterIssuer", Group: "cert-manager.io"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := cmOptions()
			o.Duration, o.RenewBefore = 48*time.Hour, 12*time.Hour
			if tt.mutate != nil {
				tt.mutate(&o)
			}
			objs, err := CertManagerObjects(o)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, obj := range objs {
				kind := "Certificate"
				if _, ok := obj.(*cmapi.Issuer); ok {
					kind = "Issuer"
				}
				kinds = append(kinds, kind+"/"+obj.GetName())
				if obj.GetNamespace() != testNamespace || obj.GetLabels()[ManagedByLabel] != ManagedByValue {
					t.Errorf("%s: namespace %q labels %v", obj.GetName(), obj.GetNamespace(), obj.GetLabels())
				}
			}
			if !slices.Equal(kinds, tt.wantKinds) {
				t.Fatalf("objects = %v, want %v", kinds, tt.wantKinds)
			}
			serving := objs[len(objs)-1].(*cmapi.Certificate).Spec
			if serving.SecretName != testSecret || serving.IsCA {
				t.Errorf("serving Certificate: secretName %q isCA %v", serving.SecretName, serving.IsCA)
			}
			if !slices.Equal(serving.DNSNames, svcNames) || !slices.Equal(serving.IPAddresses, []string{"127.0.0.1"}) {
				t.Errorf("serving Certificate names: %v %v", serving.DNSNames, serving.IPAddresses)
			}
			if !slices.Contains(serving.Usages, cmapi.UsageServerAuth) {
				t.Errorf("usages %v lack server auth", serving.Usages)
			}
			if serving.PrivateKey == nil || serving.PrivateKey.Algorithm != cmapi.ECDSAKeyAlgorithm || serving.PrivateKey.Size != 256 {
				t.Errorf("private key %+v, want ECDSA 256", serving.PrivateKey)
			}
			if serving.IssuerRef != tt.wantIssuer {
				t.Errorf("issuerRef = %+v, want %+v", serving.IssuerRef, tt.wantIssuer)
			}
			if serving.Duration.Duration != 48*time.Hour || serving.RenewBefore.Duration != 12*time.Hour {
				t.Errorf("duration %v renewBefore %v", serving.Duration, serving.RenewBefore)
			}
			if len(objs) == 4 {
				selfSigned, caCert, caIssuer := objs[0].(*cmapi.Issuer), objs[1].(*cmapi.Certificate), objs[2].(*cmapi.Issuer)
				if selfSigned.Spec.SelfSigned == nil {
					t.Error("first Issuer is not self-signed")
				}
				if !caCert.Spec.IsCA || caCert.Spec.SecretName != testSecret+"-ca" || caCert.Spec.IssuerRef.Name != selfSigned.Name ||
					caCert.Spec.Duration.Duration != DefaultCAValidity {
					t.Errorf("CA Certificate spec %+v", caCert.Spec)
				}
				if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != caCert.Spec.SecretName {
					t.Errorf("CA Issuer does not sign with the CA Certificate's Secret: %+v", caIssuer.Spec)
				}
			}
		})
	}
}

func TestCertManagerOptionsValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*CertManagerOptions)
		want   string
	}{
		{"no secret", func(o *CertManagerOptions) { o.SecretName = "" }, "SecretName are required"},
		{"issuer without name", func(o *CertManagerOptions) { o.IssuerRef = &cmmeta.IssuerReference{} }, "IssuerRef.Name"},
		{"unknown issuer kind", func(o *CertManagerOptions) { o.IssuerRef = &cmmeta.IssuerReference{Name: "x", Kind: "Vault"} }, "Issuer or ClusterIssuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := cmOptions()
			tt.mutate(&o)
			c := fake.NewClientBuilder().WithScheme(cmScheme(t)).Build()
			if _, err := NewCertManagerReconciler(c, c, NewServingCert(), o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	if _, err := NewCertManagerReconciler(c, c, NewServingCert(), cmOptions()); err == nil || !strings.Contains(err.Error(), "RegisterCertManagerTypes") {
		t.Fatalf("a scheme without cert-manager types: err = %v", err)
	}
}

func TestCertificateNotReady(t *testing.T) {
	cond := func(status cmmeta.ConditionStatus, observed int64) []cmapi.CertificateCondition {
		return []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: status, Reason: "R", Message: "M", ObservedGeneration: observed}}
	}
	tests := []struct {
		name       string
		generation int64
		conds      []cmapi.CertificateCondition
		want       string
	}{
		{"no conditions", 1, nil, "no Ready condition"},
		{"Ready=False", 1, cond(cmmeta.ConditionFalse, 1), "Ready=False (R: M)"},
		{"Ready for an older spec", 3, cond(cmmeta.ConditionTrue, 2), "generation 2"},
		{"Ready", 3, cond(cmmeta.ConditionTrue, 3), ""},
		{"Ready without observedGeneration", 3, cond(cmmeta.ConditionTrue, 0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Generation: tt.generation}, Status: cmapi.CertificateStatus{Conditions: tt.conds}}
			got := certificateNotReady(c)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("certificateNotReady = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCertManagerReconciler plays cert-manager and cainjector by hand against a fake client.
func TestCertManagerReconciler(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(cmScheme(t)).WithObjects(webhookConfigs()...).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	rec, logs, serving := &recorder{}, &logBuffer{}, NewServingCert()
	o := cmOptions()
	o.Clock, o.Log, o.Recorder = clk, logs.logger(), rec
	r, err := NewCertManagerReconciler(c, c, serving, o)
	if err != nil {
		t.Fatal(err)
	}
	reconcileOnce := func() reconcile.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, reconcile.Request{})
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		return res
	}

	// 1. Objects and annotations, and "not Ready" said once per distinct reason.
	res := reconcileOnce()
	reconcileOnce()
	for _, want := range []client.Object{
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret + "-selfsigned"}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret + "-ca"}},
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret + "-ca"}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), want); err != nil {
			t.Errorf("%T %s was not created: %v", want, want.GetName(), err)
		}
	}
	for _, ref := range r.refs {
		obj, _ := getConfig(ctx, c, ref)
		if got := obj.GetAnnotations()[cmapi.WantInjectAnnotation]; got != testNamespace+"/"+testSecret {
			t.Errorf("%s: inject-ca-from = %q", ref, got)
		}
		for _, wb := range caBundles(obj) {
			if len(*wb.bundle) != 0 {
				t.Errorf("%s: the cert-manager mode wrote a caBundle itself", ref)
			}
		}
	}
	foreign := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: foreignConfig}, foreign); err != nil {
		t.Fatal(err)
	}
	if _, ok := foreign.Annotations[cmapi.WantInjectAnnotation]; ok {
		t.Error("annotated a configuration that is not ours")
	}
	if r.Ready() || serving.Loaded() {
		t.Error("ready or serving before cert-manager issued anything")
	}
	if n := len(rec.find("Warning CertificateNotReady")); n != 1 {
		t.Errorf("%d CertificateNotReady Events over two reconciles, want 1", n)
	}
	if !logs.contains("is not Ready") {
		t.Error("no log line saying the Certificate is not Ready")
	}
	if res.RequeueAfter != CertManagerNotReadyRecheck {
		t.Errorf("RequeueAfter while not Ready = %s, want %s", res.RequeueAfter, CertManagerNotReadyRecheck)
	}

	// 2. cert-manager issues: the Secret is filled and the Certificate turns Ready.
	ca := mustCA(t, clk.Now(), 100*time.Hour)
	leaf := mustLeaf(t, clk.Now(), 10*time.Hour, ca, testService+"."+testNamespace+".svc")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{SecretKeyTLSCert: leaf.CertPEM, SecretKeyTLSKey: leaf.KeyPEM, SecretKeyCACert: ca.CertPEM}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cert := &cmapi.Certificate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: testSecret}, cert); err != nil {
		t.Fatal(err)
	}
	cert.Status.Conditions = []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue}}
	if err := c.Update(ctx, cert); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if !serving.Loaded() || !serving.Leaf().Equal(leaf.Cert) {
		t.Fatal("the Secret cert-manager wrote is not served")
	}
	if err := r.ReadyzCheck()(nil); err == nil || !strings.Contains(err.Error(), "has no usable caBundle") {
		t.Fatalf("readiness before cainjector ran = %v, want not ready", err)
	}

	// 3. cainjector fills the caBundles.
	for _, ref := range r.refs {
		obj, _ := getConfig(ctx, c, ref)
		for _, wb := range caBundles(obj) {
			*wb.bundle = ca.CertPEM
		}
		if err := c.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	res = reconcileOnce()
	if err := r.ReadyzCheck()(nil); err != nil {
		t.Fatalf("readiness after cainjector = %v", err)
	}
	if res.RequeueAfter != DefaultResyncPeriod {
		t.Errorf("RequeueAfter when ready = %s, want %s", res.RequeueAfter, DefaultResyncPeriod)
	}

	// 4. Someone edits the serving Certificate: its spec is restored; an unchanged one is not rewritten.
	cert = &cmapi.Certificate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: testSecret}, cert); err != nil {
		t.Fatal(err)
	}
	cert.Spec.DNSNames = []string{"evil.example.com"}
	if err := c.Update(ctx, cert); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: testSecret}, cert); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(cert.Spec.DNSNames, "evil.example.com") {
		t.Error("the edited spec was not restored")
	}
	rv := cert.ResourceVersion
	reconcileOnce()
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: testSecret}, cert); err != nil {
		t.Fatal(err)
	}
	if cert.ResourceVersion != rv {
		t.Error("an unchanged Certificate was rewritten")
	}

	// 5. cert-manager renews: the new leaf is served without a restart.
	renewed := mustLeaf(t, clk.Now(), 10*time.Hour, ca, testService+"."+testNamespace+".svc")
	secret.Data[SecretKeyTLSCert], secret.Data[SecretKeyTLSKey] = renewed.CertPEM, renewed.KeyPEM
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	reconcileOnce()
	if !serving.Leaf().Equal(renewed.Cert) {
		t.Error("the renewed certificate is not served")
	}
}
