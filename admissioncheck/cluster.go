package admissioncheck

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/webhooks"
	"github.com/joiner-dev/joiner/webhooks/admissioncatalog"
)

// session is one Check: the webhooks' handlers over the cluster the checked objects make up.
type session struct {
	c        *Checker
	handlers map[string]webhooks.DecodedHandler
	// namespaceLabels are the labels of the Namespaces among the objects, by name.
	namespaceLabels map[string]map[string]string
}

// contextKinds are the kinds the webhooks read from the cluster (node classes for nodeClassRef and the
// catalog, NodePools and Namespaces for Pod tenancy), and so the kinds a check's objects provide.
var contextKinds = map[string]bool{"NodePool": true, "EC2NodeClass": true, "LocalNodeClass": true, "Namespace": true}

// newSession builds the cluster the webhooks see from the items read: their node classes, NodePools and
// Namespaces, as stored (decoded with the schema's defaults), serve the webhooks' reads, the local
// provider's catalog (as on a cluster running `joiner controller --cloud-provider local`) and the
// policies' data.inventory. When two items name the same object, the later one wins, as when they are
// applied in order. Objects that cannot be read as their kind are left out; their own check reports why.
func (c *Checker) newSession(ctx context.Context, passes []*pass) (*session, error) {
	type key struct {
		gvk             schema.GroupVersionKind
		namespace, name string
	}
	var order []key
	stored := map[key]map[string]any{}
	for _, p := range passes {
		if p.kindErr != nil || !contextKinds[p.t.gvk.Kind] {
			continue
		}
		obj := p.item.Object
		if p.t.crd != nil {
			if p.u == nil {
				continue
			}
			obj = p.u.Object
		}
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		namespace, _ := meta["namespace"].(string)
		if name == "" {
			continue
		}
		k := key{gvk: p.t.gvk, namespace: namespace, name: name}
		if _, seen := stored[k]; !seen {
			order = append(order, k)
		}
		stored[k] = obj
	}
	s := &session{c: c, namespaceLabels: map[string]map[string]string{}}
	var inventory []map[string]any
	var objects []client.Object
	for _, k := range order {
		obj := stored[k]
		typed, err := c.typed(k.gvk, obj)
		if err != nil {
			continue
		}
		objects = append(objects, typed)
		if policy.InventoryKind(k.gvk.Kind) {
			inventory = append(inventory, obj)
		}
		if k.gvk.Kind == "Namespace" {
			s.namespaceLabels[k.name] = typed.GetLabels()
		}
	}
	if err := c.engine.SetInventory(ctx, inventory); err != nil {
		return nil, fmt.Errorf("set the policies' inventory: %w", err)
	}
	kube := fake.NewClientBuilder().WithScheme(c.scheme).WithObjects(objects...).Build()
	provider, err := local.New(ctx, kube, local.Options{Catalog: c.catalog, Log: c.opts.Logger.WithName("local-provider")})
	if err != nil {
		return nil, fmt.Errorf("instance types: %w", err)
	}
	s.handlers, err = webhooks.NewHandlers(webhooks.Dependencies{
		Engine:        c.engine,
		Reader:        kube,
		InstanceTypes: admissioncatalog.Lister(provider),
		Logger:        c.opts.Logger.WithName("webhooks"),
	})
	if err != nil {
		return nil, fmt.Errorf("webhook handlers: %w", err)
	}
	return s, nil
}

// typed converts an unstructured object to its Go type, for the in-memory cluster.
func (c *Checker) typed(gvk schema.GroupVersionKind, obj map[string]any) (client.Object, error) {
	o, err := c.scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, o); err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	co, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not a client.Object", gvk)
	}
	return co, nil
}
