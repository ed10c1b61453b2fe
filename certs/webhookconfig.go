package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookConfigRef names one of Joiner's own webhook configurations.
type webhookConfigRef struct {
	mutating bool
	name     string
}

func (r webhookConfigRef) kind() string {
	if r.mutating {
		return "MutatingWebhookConfiguration"
	}
	return "ValidatingWebhookConfiguration"
}

func (r webhookConfigRef) String() string { return r.kind() + "/" + r.name }

func (r webhookConfigRef) newObject() client.Object {
	if r.mutating {
		return &admissionregistrationv1.MutatingWebhookConfiguration{}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{}
}

func configRefs(mutating, validating []string) []webhookConfigRef {
	refs := make([]webhookConfigRef, 0, len(mutating)+len(validating))
	for _, n := range mutating {
		refs = append(refs, webhookConfigRef{mutating: true, name: n})
	}
	for _, n := range validating {
		refs = append(refs, webhookConfigRef{name: n})
	}
	return refs
}

// webhookBundle points at the caBundle of one webhook inside a configuration object.
type webhookBundle struct {
	webhook string
	bundle  *[]byte
}

// caBundles returns pointers to the caBundle of every webhook in obj, a webhook configuration.
func caBundles(obj client.Object) []webhookBundle {
	var out []webhookBundle
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			out = append(out, webhookBundle{webhook: o.Webhooks[i].Name, bundle: &o.Webhooks[i].ClientConfig.CABundle})
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			out = append(out, webhookBundle{webhook: o.Webhooks[i].Name, bundle: &o.Webhooks[i].ClientConfig.CABundle})
		}
	}
	return out
}

// getConfig reads one configuration; it returns nil, nil when the configuration does not exist.
func getConfig(ctx context.Context, reader client.Reader, ref webhookConfigRef) (client.Object, error) {
	obj := ref.newObject()
	if err := reader.Get(ctx, types.NamespacedName{Name: ref.name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	return obj, nil
}

// configsHoldBundle reports whether every existing configuration among refs has exactly bundle in every
// webhook. A missing configuration calls nobody and so does not count against it.
func configsHoldBundle(ctx context.Context, reader client.Reader, refs []webhookConfigRef, bundle []byte) (bool, error) {
	if len(bundle) == 0 {
		return false, nil
	}
	for _, ref := range refs {
		obj, err := getConfig(ctx, reader, ref)
		if err != nil {
			return false, err
		}
		if obj == nil {
			continue
		}
		for _, wb := range caBundles(obj) {
			if !bytes.Equal(*wb.bundle, bundle) {
				return false, nil
			}
		}
	}
	return true, nil
}

// trustProblem checks what the apiserver would check: that every webhook of every configuration in refs
// exists and has a caBundle that verifies leaf at now. It returns "" when all do, else what is missing.
func trustProblem(ctx context.Context, reader client.Reader, refs []webhookConfigRef, leaf *x509.Certificate, now time.Time) (string, error) {
	if leaf == nil {
		return "the serving certificate is not loaded", nil
	}
	for _, ref := range refs {
		obj, err := getConfig(ctx, reader, ref)
		if err != nil {
			return "", err
		}
		if obj == nil {
			return fmt.Sprintf("%s does not exist yet", ref), nil
		}
		for _, wb := range caBundles(obj) {
			roots, err := ParseCertificates(*wb.bundle)
			if err != nil {
				return fmt.Sprintf("webhook %q in %s has no usable caBundle: %v", wb.webhook, ref, err), nil
			}
			if !verifiesWith(leaf, roots, now) {
				return fmt.Sprintf("the caBundle of webhook %q in %s does not trust the served certificate", wb.webhook, ref), nil
			}
		}
	}
	return "", nil
}
