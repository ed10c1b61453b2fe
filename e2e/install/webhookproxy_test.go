package install_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/certs"
)

// serviceRoute is what stands in for the joiner-webhook Service, which cannot route here (no
// cluster network: the apiserver cannot reach a Service IP or resolve <svc>.<ns>.svc). The chart's
// webhook configurations are pointed at its URL (a loopback address) instead of the Service, and
// it does what the Service does: it forwards each admission review to a ready replica, in turn, at
// the container port the Service's targetPort names, and checks the replica's certificate for the
// Service's DNS name against the CA Joiner keeps in its Secret. The apiserver checks the proxy's own
// certificate against the caBundle Joiner injected into the configurations; the proxy signs it with
// that same CA (for 127.0.0.1), so what the apiserver trusts is still what Joiner set up.
type serviceRoute struct {
	url string
	// service is the Service stood in for; targetPort the pod port it routes to.
	service    *corev1.Service
	targetPort string

	mu       sync.Mutex
	backends []*replica
	next     int
	served   map[string]int
	caPEM    []byte
	leaf     *tls.Certificate
	upstream *http.Transport
	// saved are the configurations' Service references, by configuration and webhook name.
	saved map[string]*admissionregistrationv1.ServiceReference
	srv   *http.Server
}

// startServiceRoute serves the proxy on a free loopback port.
func startServiceRoute() (*serviceRoute, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook proxy: %w", err)
	}
	r := &serviceRoute{url: "https://" + l.Addr().String(), served: map[string]int{}, saved: map[string]*admissionregistrationv1.ServiceReference{}}
	proxy := &httputil.ReverseProxy{Rewrite: r.rewrite, Transport: roundTripperFunc(r.roundTrip),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}}
	r.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.certificate() }}}
	go func() { _ = r.srv.ServeTLS(l, "", "") }()
	return r, nil
}

func (r *serviceRoute) close() { _ = r.srv.Close() }

// serve starts standing in for svc: its targetPort is read from it.
func (r *serviceRoute) serve(svc *corev1.Service) error {
	if len(svc.Spec.Ports) != 1 {
		return fmt.Errorf("Service %s has %d ports; the stand-in routes one", svc.Name, len(svc.Spec.Ports))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.service, r.targetPort = svc, svc.Spec.Ports[0].TargetPort.String()
	return nil
}

// setBackends sets the ready replicas: the Service's endpoints.
func (r *serviceRoute) setBackends(replicas ...*replica) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backends = replicas
}

// servedBy returns how many reviews each stand-in pod was sent.
func (r *serviceRoute) servedBy() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.served {
		out[k] = v
	}
	return out
}

// rewrite sends the request to the next ready replica.
func (r *serviceRoute) rewrite(pr *httputil.ProxyRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.backends) == 0 {
		pr.Out.URL.Host = "" // roundTrip answers: no endpoints
		return
	}
	b := r.backends[r.next%len(r.backends)]
	r.next++
	r.served[b.pod]++
	pr.SetURL(&url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port(r.targetPort)))})
}

func (r *serviceRoute) roundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == "" {
		return nil, fmt.Errorf("Service %s has no ready endpoints", r.service.Name)
	}
	r.mu.Lock()
	t := r.upstream
	r.mu.Unlock()
	if t == nil {
		if _, err := r.certificate(); err != nil {
			return nil, err
		}
		r.mu.Lock()
		t = r.upstream
		r.mu.Unlock()
	}
	return t.RoundTrip(req)
}

// certificate returns the proxy's serving certificate, signed again whenever Joiner's CA changes.
func (r *serviceRoute) certificate() (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := &corev1.Secret{}
	r.mu.Lock()
	svc := r.service
	r.mu.Unlock()
	if svc == nil {
		return nil, errors.New("the webhook proxy routes no Service yet")
	}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: webhookSecret}, s); err != nil {
		return nil, fmt.Errorf("read Joiner's CA from Secret %s: %w", webhookSecret, err)
	}
	caPEM := s.Data[certs.SecretKeyCACert]
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leaf != nil && string(caPEM) == string(r.caPEM) {
		return r.leaf, nil
	}
	ca, err := certs.ParseKeyPair(caPEM, s.Data[certs.SecretKeyCAKey])
	if err != nil {
		return nil, fmt.Errorf("Joiner's CA in Secret %s: %w", webhookSecret, err)
	}
	leaf, err := certs.NewServingLeaf(time.Now(), time.Hour, ca, nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("webhook proxy certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	r.caPEM, r.leaf = caPEM, &pair
	r.upstream = &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool,
		ServerName: svc.Name + "." + svc.Namespace + ".svc"}}
	return r.leaf, nil
}

// pointConfigurations points every webhook of the release's configurations that calls the
// Service at the proxy instead, and remembers the Service reference.
func (r *serviceRoute) pointConfigurations(ctx context.Context) error {
	return r.editConfigurations(ctx, func(key string, cc *admissionregistrationv1.WebhookClientConfig) {
		if cc.Service == nil {
			return
		}
		r.saved[key] = cc.Service
		u := r.url + ptrOr(cc.Service.Path, "/")
		cc.URL, cc.Service = &u, nil
	})
}

// restoreConfigurations puts the Service references back, as the chart rendered them.
func (r *serviceRoute) restoreConfigurations(ctx context.Context) error {
	return r.editConfigurations(ctx, func(key string, cc *admissionregistrationv1.WebhookClientConfig) {
		if svc, ok := r.saved[key]; ok && cc.URL != nil {
			cc.URL, cc.Service = nil, svc
		}
	})
}

// editConfigurations applies edit to the client configuration of every webhook of the release's
// mutating and validating configurations (key: configuration/webhook), retrying on conflicts with
// Joiner's own updates of the caBundle.
func (r *serviceRoute) editConfigurations(ctx context.Context, edit func(key string, cc *admissionregistrationv1.WebhookClientConfig)) error {
	mutating, validating := &admissionregistrationv1.MutatingWebhookConfigurationList{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	for _, list := range []client.ObjectList{mutating, validating} {
		if err := cluster.Client.List(ctx, list, client.MatchingLabels{instanceLabel: releaseName}); err != nil {
			return fmt.Errorf("list the release's webhook configurations: %w", err)
		}
	}
	var objs []client.Object
	for i := range mutating.Items {
		objs = append(objs, &mutating.Items[i])
	}
	for i := range validating.Items {
		objs = append(objs, &validating.Items[i])
	}
	if len(objs) == 0 {
		return errors.New("the release has no webhook configurations")
	}
	for _, obj := range objs {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			switch o := obj.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				for i := range o.Webhooks {
					edit("mutating/"+o.Name+"/"+o.Webhooks[i].Name, &o.Webhooks[i].ClientConfig)
				}
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				for i := range o.Webhooks {
					edit("validating/"+o.Name+"/"+o.Webhooks[i].Name, &o.Webhooks[i].ClientConfig)
				}
			}
			return cluster.Client.Update(ctx, obj)
		})
		if err != nil {
			return fmt.Errorf("point webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

func ptrOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
