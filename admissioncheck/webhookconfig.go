package admissioncheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	webhookconfig "github.com/joiner-dev/joiner/config/webhook"
)

// hook is one webhook of Joiner's webhook configurations, as the apiserver calls it.
type hook struct {
	name     string // the webhook's name, which the apiserver quotes in a denial
	path     string // the handler's path (webhooks.Path...)
	rules    []admissionregistrationv1.RuleWithOperations
	nsSel    labels.Selector // nil: every namespace
	objSel   labels.Selector // nil: every object
	mutating bool
}

// hooks are the webhooks in the order the apiserver calls them: mutating ones first, each kind of
// configuration sorted by configuration name, webhooks in the order listed.
type hooks []hook

// loadHooks reads the webhook configurations Joiner installs (config/webhook, embedded).
func loadHooks() (hooks, error) {
	var mutating []admissionregistrationv1.MutatingWebhookConfiguration
	var validating []admissionregistrationv1.ValidatingWebhookConfiguration
	err := fs.WalkDir(webhookconfig.Manifests, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(webhookconfig.Manifests, path)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := dec.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			switch tm.Kind {
			case "MutatingWebhookConfiguration":
				var c admissionregistrationv1.MutatingWebhookConfiguration
				if err := yaml.UnmarshalStrict(doc, &c); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				mutating = append(mutating, c)
			case "ValidatingWebhookConfiguration":
				var c admissionregistrationv1.ValidatingWebhookConfiguration
				if err := yaml.UnmarshalStrict(doc, &c); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				validating = append(validating, c)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read webhook configurations: %w", err)
	}
	sort.Slice(mutating, func(i, j int) bool { return mutating[i].Name < mutating[j].Name })
	sort.Slice(validating, func(i, j int) bool { return validating[i].Name < validating[j].Name })
	var out hooks
	var errs []error
	add := func(h hook, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		out = append(out, h)
	}
	for _, c := range mutating {
		for _, w := range c.Webhooks {
			add(newHook(w.Name, w.ClientConfig, w.Rules, w.NamespaceSelector, w.ObjectSelector, true))
		}
	}
	for _, c := range validating {
		for _, w := range c.Webhooks {
			add(newHook(w.Name, w.ClientConfig, w.Rules, w.NamespaceSelector, w.ObjectSelector, false))
		}
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return out, nil
}

func newHook(name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations, nsSel, objSel *metav1.LabelSelector, mutating bool) (hook, error) {
	h := hook{name: name, rules: rules, mutating: mutating}
	if cc.Service == nil || cc.Service.Path == nil {
		return h, fmt.Errorf("webhook %s: no service path", name)
	}
	h.path = *cc.Service.Path
	var err error
	if nsSel != nil {
		if h.nsSel, err = metav1.LabelSelectorAsSelector(nsSel); err != nil {
			return h, fmt.Errorf("webhook %s: namespaceSelector: %w", name, err)
		}
	}
	if objSel != nil {
		if h.objSel, err = metav1.LabelSelectorAsSelector(objSel); err != nil {
			return h, fmt.Errorf("webhook %s: objectSelector: %w", name, err)
		}
	}
	return h, nil
}

// matches reports whether the apiserver sends a request for resource gvr, in a namespace with nsLabels
// (see namespaceLabels), for an object with objLabels, to h. It reads the rules and the selectors; matchConditions
// are not evaluated (Joiner's only exempt its own service account, which joiner check never is).
func (h *hook) matches(gvr schema.GroupVersionResource, namespaced bool, op admissionregistrationv1.OperationType, nsLabels, objLabels map[string]string) bool {
	if !slices.ContainsFunc(h.rules, func(r admissionregistrationv1.RuleWithOperations) bool { return ruleMatches(r, gvr, namespaced, op) }) {
		return false
	}
	if h.nsSel != nil && namespaced && !h.nsSel.Matches(labels.Set(nsLabels)) {
		return false
	}
	if h.objSel != nil && !h.objSel.Matches(labels.Set(objLabels)) {
		return false
	}
	return true
}

func ruleMatches(r admissionregistrationv1.RuleWithOperations, gvr schema.GroupVersionResource, namespaced bool, op admissionregistrationv1.OperationType) bool {
	anyOf := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	if !anyOf(r.APIGroups, gvr.Group) || !anyOf(r.APIVersions, gvr.Version) || !anyOf(r.Resources, gvr.Resource) {
		return false
	}
	if !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) && !slices.Contains(r.Operations, op) {
		return false
	}
	if r.Scope != nil {
		switch *r.Scope {
		case admissionregistrationv1.ClusterScope:
			return !namespaced
		case admissionregistrationv1.NamespacedScope:
			return namespaced
		}
	}
	return true
}

// namespaceLabels returns the labels the apiserver matches a namespaceSelector against: the
// namespace's own, plus kubernetes.io/metadata.name, which the apiserver always sets.
func namespaceLabels(ns string, own map[string]string) map[string]string {
	out := make(map[string]string, len(own)+1)
	for k, v := range own {
		out[k] = v
	}
	out["kubernetes.io/metadata.name"] = ns
	return out
}
