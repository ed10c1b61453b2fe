// Package localrun runs Joiner in-process against a local control plane, as `make run` and the e2e
// tests do: it installs the webhook configurations of config/webhook with their service reference
// replaced by a URL on 127.0.0.1, starts the operator, waits until it is ready, and on stop removes
// the webhook configurations before the webhook server goes away, so the apiserver is never left
// calling a webhook that is gone.
package localrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/local"
)

// Options configure a local run.
type Options struct {
	// WebhookDir holds the webhook configuration manifests (default config/webhook, found from
	// the working directory upwards).
	WebhookDir string
	// Operator are passed to operator.New; the webhook address, probe address, namespace and
	// leader election are set by Start, and a nil CloudProvider means the local provider.
	Operator operator.Options
	// ReadyTimeout bounds the wait for readiness (default 60s).
	ReadyTimeout time.Duration
	// Log receives progress messages.
	Log logr.Logger
}

// Run is a started, ready operator.
type Run struct {
	// Operator is the running operator (its Engine and Manager).
	Operator *operator.Operator
	// WebhookURL is the base URL the apiserver calls.
	WebhookURL string
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// MetricsURL is the Prometheus metrics endpoint ("" when Options.Operator.MetricsAddr is "0").
	MetricsURL string

	cfg     *rest.Config
	cancel  context.CancelFunc
	done    chan error
	configs []client.Object
	c       client.Client
}

// Start installs the webhook configurations and starts the operator, returning once it is ready.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (_ *Run, err error) {
	webhookPort, err := freePort()
	if err != nil {
		return nil, err
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	o := opts.Operator
	o.WebhookHost, o.WebhookPort = "127.0.0.1", webhookPort
	o.WebhookIPs = append(o.WebhookIPs, net.ParseIP("127.0.0.1"))
	o.ProbeAddr = "127.0.0.1:" + strconv.Itoa(probePort)
	if o.MetricsAddr == "" {
		metricsPort, err := freePort()
		if err != nil {
			return nil, err
		}
		o.MetricsAddr = "127.0.0.1:" + strconv.Itoa(metricsPort)
	}
	o.LeaderElect = false
	if o.Namespace == "" {
		o.Namespace = operator.DefaultNamespace
	}
	if o.Log.GetSink() == nil {
		o.Log = opts.Log
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.CloudProvider == nil {
		o.CloudProvider = local.Factory(local.Options{Log: o.Log.WithName("local-provider")})
	}
	// controller-runtime logs through its own root logger too (webhook requests); route it here.
	ctrllog.SetLogger(o.Log)
	scheme, err := apischeme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	r := &Run{cfg: cfg, c: c, WebhookURL: fmt.Sprintf("https://127.0.0.1:%d", webhookPort), ProbeAddr: o.ProbeAddr}
	if o.MetricsAddr != "0" {
		r.MetricsURL = "http://" + o.MetricsAddr + "/metrics"
	}
	defer func() {
		if err != nil {
			_ = r.Stop(context.Background())
		}
	}()
	if err := ensureNamespace(ctx, c, o.Namespace); err != nil {
		return nil, err
	}
	dir := opts.WebhookDir
	if dir == "" {
		if dir, err = findUp(filepath.Join("config", "webhook")); err != nil {
			return nil, err
		}
	}
	if r.configs, err = LoadWebhookConfigurations(dir, r.WebhookURL); err != nil {
		return nil, err
	}
	for _, obj := range r.configs {
		if err := installWebhookConfiguration(ctx, c, obj.DeepCopyObject().(client.Object)); err != nil {
			return nil, err
		}
	}
	op, err := operator.New(cfg, o)
	if err != nil {
		return nil, err
	}
	r.Operator = op
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan error, 1)
	go func() { r.done <- op.Start(runCtx) }()

	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	if err := r.waitReady(ctx, timeout); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Run) waitReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-r.done:
			return false, fmt.Errorf("operator stopped before it was ready: %w", err)
		default:
		}
		resp, err := http.Get("http://" + r.ProbeAddr + "/readyz?verbose")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer func() { _ = resp.Body.Close() }()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		last = b.String()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("operator not ready within %s (last /readyz: %s): %w", timeout, last, err)
	}
	return nil
}

// Stop removes the webhook configurations, then stops the operator and waits for it to exit.
func (r *Run) Stop(ctx context.Context) error {
	var errs []error
	for _, obj := range r.configs {
		if err := r.c.Delete(ctx, obj.DeepCopyObject().(client.Object)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", obj.GetName(), err))
		}
	}
	if r.cancel != nil {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-time.After(45 * time.Second):
			errs = append(errs, errors.New("operator did not stop within 45s"))
		}
	}
	return errors.Join(errs...)
}

// LoadWebhookConfigurations reads the webhook configurations in dir and points every webhook at
// baseURL + its service path instead of the in-cluster Service.
func LoadWebhookConfigurations(dir, baseURL string) ([]client.Object, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []client.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var raw map[string]any
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, errIOEOF) {
					break
				}
				return nil, fmt.Errorf("decode %s: %w", f, err)
			}
			if raw == nil {
				continue
			}
			kind, _ := raw["kind"].(string)
			obj, err := webhookObject(kind, raw, baseURL)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if obj != nil {
				out = append(out, obj)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no webhook configurations in %s", dir)
	}
	return out, nil
}

// installWebhookConfiguration creates the webhook configuration obj or, when one of that name is
// left behind (by a process that was killed before it could remove it, still pointing at that
// process's port), replaces its webhooks with obj's, keeping the caBundle each webhook had so that
// the apiserver trusts the restarted operator at once (it serves from the same CA Secret).
func installWebhookConfiguration(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Create(ctx, obj)
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("install %s: %w", obj.GetName(), err)
		}
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return fmt.Errorf("install %s: %w", obj.GetName(), err)
	}
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), have); err != nil {
		return fmt.Errorf("install %s: read the one left behind: %w", obj.GetName(), err)
	}
	bundles := map[string]any{}
	old, _, _ := unstructured.NestedSlice(have.Object, "webhooks")
	for _, w := range old {
		if m, ok := w.(map[string]any); ok {
			if b, found, _ := unstructured.NestedFieldNoCopy(m, "clientConfig", "caBundle"); found {
				bundles[fmt.Sprint(m["name"])] = b
			}
		}
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("install %s: %w", obj.GetName(), err)
	}
	webhooks, _, _ := unstructured.NestedSlice(want, "webhooks")
	for _, w := range webhooks {
		if m, ok := w.(map[string]any); ok {
			if b, ok := bundles[fmt.Sprint(m["name"])]; ok {
				_ = unstructured.SetNestedField(m, b, "clientConfig", "caBundle")
			}
		}
	}
	if err := unstructured.SetNestedSlice(have.Object, webhooks, "webhooks"); err != nil {
		return fmt.Errorf("install %s: %w", obj.GetName(), err)
	}
	if err := c.Update(ctx, have); err != nil {
		return fmt.Errorf("install %s: replace the one left behind: %w", obj.GetName(), err)
	}
	return nil
}

func url(base string, svc *admissionregistrationv1.ServiceReference) *string {
	u := base
	if svc != nil && svc.Path != nil {
		u += *svc.Path
	}
	return &u
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// findUp returns rel joined to the nearest parent of the working directory that has it.
func findUp(rel string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, rel)); err == nil {
			return filepath.Join(d, rel), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s not found above %s", rel, wd)
		}
	}
}
