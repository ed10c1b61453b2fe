package policy

import (
	"context"
	"fmt"
	"maps"

	"github.com/open-policy-agent/opa/v1/storage"
)

// The inventory document, shaped like Gatekeeper's synced data so cross-object policies port over:
//
//	data.inventory.cluster["<group>/<version>"]["<Kind>"]["<name>"] = object            (cluster-scoped)
//	data.inventory.namespace["<ns>"]["<group>/<version>"]["<Kind>"]["<name>"] = object  (namespaced)
//
// Objects are stored as OPA AST values, converted once on write, so a policy reading data.inventory pays no
// conversion per evaluation. metadata.managedFields is dropped: it is large and no policy needs it.
//
// At admission the reviewed object is not yet (CREATE) or not as reviewed (UPDATE) in the inventory, while
// in audit and offline checks it is. Cross-object policies should therefore skip the entry with the
// reviewed object's own name and count input.review.object instead; the library's cpu-limit policy does.
const inventoryRoot = "inventory"

func emptyInventory() map[string]any {
	return map[string]any{inventoryRoot: map[string]any{"cluster": map[string]any{}, "namespace": map[string]any{}}}
}

// inventoryPath returns the storage path of obj inside data.inventory.
func inventoryPath(obj map[string]any) (storage.Path, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	return inventoryPathFor(apiVersion, kind, namespace, name)
}

func inventoryPathFor(apiVersion, kind, namespace, name string) (storage.Path, error) {
	if apiVersion == "" || kind == "" || name == "" {
		return nil, fmt.Errorf("inventory object %s %q: apiVersion, kind and metadata.name are required", kind, name)
	}
	if namespace == "" {
		return storage.Path{inventoryRoot, "cluster", apiVersion, kind, name}, nil
	}
	return storage.Path{inventoryRoot, "namespace", namespace, apiVersion, kind, name}, nil
}

// inventoryCopy returns obj without metadata.managedFields, leaving obj itself untouched.
func inventoryCopy(obj map[string]any) map[string]any {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	if _, has := meta["managedFields"]; !has {
		return obj
	}
	out := maps.Clone(obj)
	meta = maps.Clone(meta)
	delete(meta, "managedFields")
	out["metadata"] = meta
	return out
}

// SetInventory replaces data.inventory with objects, typically every NodePool and node class in the
// cluster (see InventoryKind). Each object needs apiVersion, kind and metadata.name. Evaluations running
// meanwhile finish on the previous inventory.
func (e *Engine) SetInventory(ctx context.Context, objects []map[string]any) error {
	cluster := map[string]any{}
	namespaced := map[string]any{}
	for _, obj := range objects {
		path, err := inventoryPath(obj)
		if err != nil {
			return fmt.Errorf("set inventory: %w", err)
		}
		root := cluster
		if path[1] == "namespace" {
			root = namespaced
		}
		node := root
		for _, seg := range path[2 : len(path)-1] {
			child, ok := node[seg].(map[string]any)
			if !ok {
				child = map[string]any{}
				node[seg] = child
			}
			node = child
		}
		node[path[len(path)-1]] = inventoryCopy(obj)
	}
	doc := map[string]any{"cluster": cluster, "namespace": namespaced}
	err := storage.Txn(ctx, e.store, storage.WriteParams, func(txn storage.Transaction) error {
		return e.store.Write(ctx, txn, storage.ReplaceOp, storage.Path{inventoryRoot}, doc)
	})
	if err != nil {
		return fmt.Errorf("set inventory: %w", err)
	}
	e.log.V(1).Info("inventory replaced", "objects", len(objects))
	return nil
}

// UpsertInventory adds obj to data.inventory or replaces the object with the same identity.
func (e *Engine) UpsertInventory(ctx context.Context, obj map[string]any) error {
	path, err := inventoryPath(obj)
	if err != nil {
		return fmt.Errorf("upsert inventory: %w", err)
	}
	err = storage.Txn(ctx, e.store, storage.WriteParams, func(txn storage.Transaction) error {
		// Create the missing parents (group/version, kind, namespace), then write the object.
		for i := 3; i < len(path); i++ {
			parent := path[:i]
			if _, err := e.store.Read(ctx, txn, parent); err == nil {
				continue
			} else if !storage.IsNotFound(err) {
				return err
			}
			if err := e.store.Write(ctx, txn, storage.AddOp, parent, map[string]any{}); err != nil {
				return err
			}
		}
		return e.store.Write(ctx, txn, storage.AddOp, path, inventoryCopy(obj))
	})
	if err != nil {
		return fmt.Errorf("upsert inventory %s: %w", path, err)
	}
	return nil
}

// DeleteInventory removes one object from data.inventory; a missing object is not an error. namespace is
// empty for cluster-scoped objects.
func (e *Engine) DeleteInventory(ctx context.Context, apiVersion, kind, namespace, name string) error {
	path, err := inventoryPathFor(apiVersion, kind, namespace, name)
	if err != nil {
		return fmt.Errorf("delete inventory: %w", err)
	}
	err = storage.Txn(ctx, e.store, storage.WriteParams, func(txn storage.Transaction) error {
		err := e.store.Write(ctx, txn, storage.RemoveOp, path, nil)
		if storage.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete inventory %s: %w", path, err)
	}
	return nil
}
