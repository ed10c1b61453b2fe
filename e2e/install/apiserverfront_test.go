package install_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/certs"
	"github.com/joiner-dev/joiner/testbed"
)

// apiserverFront is what helm reaches the apiserver through. The test bed's kube-apiserver is built
// from Go modules without the version stamps of a release, so it reports its gitVersion as
// v0.0.0-master (its major and minor are right): helm then refuses the chart (kubeVersion >=1.30).
// The front answers /version with the version the test bed was built from (its assets folder,
// k8s-vX.Y.Z_...) when the apiserver's own is not a release's, and forwards every other request
// unchanged (bearer tokens included: helm authenticates with a token, which passes through, not
// with a client certificate, which would not). Joiner and the hook talk to the apiserver directly.
type apiserverFront struct {
	url   string
	caPEM []byte
	srv   *http.Server
}

var assetsVersion = regexp.MustCompile(`k8s-v(\d+)\.(\d+)\.(\d+)`)

// startAPIServerFront serves the front of env's apiserver on a free loopback port.
func startAPIServerFront(env *testbed.Env) (*apiserverFront, error) {
	info, err := servedVersion()
	if err != nil {
		return nil, err
	}
	upstream, err := url.Parse(env.Config.Host)
	if err != nil || upstream.Host == "" {
		upstream = &url.URL{Scheme: "https", Host: env.Config.Host}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.Config.CAData) {
		return nil, fmt.Errorf("apiserver front: the test bed's CA does not parse")
	}
	ca, err := certs.NewCA(time.Now(), 24*time.Hour, "joiner-e2e-apiserver-front")
	if err != nil {
		return nil, err
	}
	leaf, err := certs.NewServingLeaf(time.Now(), 24*time.Hour, ca, nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("apiserver front certificate: %w", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upstream); pr.Out.Host = upstream.Host },
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, ForceAttemptHTTP2: true},
		FlushInterval: -1, // watches stream
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(info)
	})
	mux.Handle("/", proxy)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("apiserver front: %w", err)
	}
	f := &apiserverFront{url: "https://" + l.Addr().String(), caPEM: ca.CertPEM,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}}}
	go func() { _ = f.srv.ServeTLS(l, "", "") }()
	return f, nil
}

func (f *apiserverFront) close() { _ = f.srv.Close() }

// servedVersion is the apiserver's version, with the test bed's from its assets folder when the
// apiserver's gitVersion is not a release's.
func servedVersion() (*version.Info, error) {
	info, err := clientset.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("the apiserver's version: %w", err)
	}
	if v, err := utilversion.ParseSemantic(info.GitVersion); err == nil && v.Major() > 0 {
		return info, nil
	}
	assets, err := testbed.FindAssets("")
	if err != nil {
		return nil, err
	}
	// make test names the folder through the symlink .cache/testbed/current: read its target.
	if resolved, err := filepath.EvalSymlinks(assets); err == nil {
		assets = resolved
	}
	m := assetsVersion.FindStringSubmatch(filepath.Base(assets))
	if m == nil {
		return nil, fmt.Errorf("the apiserver reports version %q and the test bed's folder %s names none", info.GitVersion, assets)
	}
	info.Major, info.Minor, info.GitVersion = m[1], m[2], "v"+strings.Join(m[1:], ".")
	return info, nil
}

// adminToken returns a token of a cluster-admin ServiceAccount, the identity helm runs as (the
// front passes tokens through, not the test bed's admin client certificate).
func adminToken(ctx context.Context) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "e2e-helm-user"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-helm-user"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, binding} {
		if err := cluster.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create the helm user's %T: %w", obj, err)
		}
	}
	return serviceAccountToken(ctx, sa)
}
