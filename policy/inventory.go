package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
)

// The inventory document, shaped like Gatekeeper's synced data so cross-object policies port over:
//
//	data.inventory.cluster["<group>/<version>"]["<Kind>"]["<name>"] = object            (cluster-scoped)
//	data.inventory.namespace["<ns>"]["<group>/<version>"]["<Kind>"]["<name>"] = object  (namespaced)
//
// Each object is converted to an OPA AST value once, when it is written, and metadata.managedFields is
// dropped (it is large and no policy needs it). Every write publishes a new immutable snapshot of the whole
// document through an atomic pointer; an evaluation reads the snapshot current when it started, without
// locks, so a slow policy never holds up inventory updates and an update never holds up evaluations.
//
// At admission the reviewed object is not yet (CREATE) or not as reviewed (UPDATE) in the inventory, while
// in audit and offline checks it is. Cross-object policies should therefore skip the entry with the
// reviewed object's own name and count input.review.object instead; the library's cpu-limit policy does.
const inventoryRoot = "inventory"

// inventoryKey locates one object in the inventory document.
type inventoryKey struct {
	namespace, groupVersion, kind, name string
}

func inventoryKeyOf(obj map[string]any) (inventoryKey, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	return newInventoryKey(apiVersion, kind, namespace, name)
}

func newInventoryKey(apiVersion, kind, namespace, name string) (inventoryKey, error) {
	if apiVersion == "" || kind == "" || name == "" {
		return inventoryKey{}, fmt.Errorf("inventory object %s %q: apiVersion, kind and metadata.name are required", kind, name)
	}
	return inventoryKey{namespace: namespace, groupVersion: apiVersion, kind: kind, name: name}, nil
}

func (k inventoryKey) String() string {
	if k.namespace == "" {
		return fmt.Sprintf("cluster/%s/%s/%s", k.groupVersion, k.kind, k.name)
	}
	return fmt.Sprintf("namespace/%s/%s/%s/%s", k.namespace, k.groupVersion, k.kind, k.name)
}

// inventoryEntry returns obj's identity in data.inventory and its value there (without managedFields).
// Errors name the object when its identity is known.
func inventoryEntry(obj map[string]any) (inventoryKey, *ast.Term, error) {
	k, err := inventoryKeyOf(obj)
	if err != nil {
		return inventoryKey{}, nil, err
	}
	v, err := ast.InterfaceToValue(withoutManagedFields(obj))
	if err != nil {
		return inventoryKey{}, nil, fmt.Errorf("%s: convert to JSON: %w", k, err)
	}
	return k, ast.NewTerm(v), nil
}

// inventory holds the converted objects and publishes snapshots of the document built from them.
type inventory struct {
	mu      sync.Mutex // serialises writers
	objects map[inventoryKey]*ast.Term
	store   *snapshotStore
}

// publish builds the data document from objects and makes it the one new transactions read.
// The caller holds mu.
func (inv *inventory) publish() {
	cluster := map[string]map[string]map[string]*ast.Term{}
	namespaced := map[string]map[string]map[string]map[string]*ast.Term{}
	for k, t := range inv.objects {
		var byGV map[string]map[string]map[string]*ast.Term
		if k.namespace == "" {
			byGV = cluster
		} else {
			if namespaced[k.namespace] == nil {
				namespaced[k.namespace] = map[string]map[string]map[string]*ast.Term{}
			}
			byGV = namespaced[k.namespace]
		}
		if byGV[k.groupVersion] == nil {
			byGV[k.groupVersion] = map[string]map[string]*ast.Term{}
		}
		if byGV[k.groupVersion][k.kind] == nil {
			byGV[k.groupVersion][k.kind] = map[string]*ast.Term{}
		}
		byGV[k.groupVersion][k.kind][k.name] = t
	}
	gvTerm := func(byGV map[string]map[string]map[string]*ast.Term) *ast.Term {
		return objectTermOf(byGV, func(byKind map[string]map[string]*ast.Term) *ast.Term {
			return objectTermOf(byKind, func(byName map[string]*ast.Term) *ast.Term {
				return objectTermOf(byName, func(t *ast.Term) *ast.Term { return t })
			})
		})
	}
	doc := ast.NewObject(
		ast.Item(ast.StringTerm("cluster"), gvTerm(cluster)),
		ast.Item(ast.StringTerm("namespace"), objectTermOf(namespaced, gvTerm)),
	)
	inv.store.publish(ast.NewObject(ast.Item(ast.StringTerm(inventoryRoot), ast.NewTerm(doc))))
}

// objectTermOf builds an AST object from a map, converting each value with conv, in key order.
func objectTermOf[V any](m map[string]V, conv func(V) *ast.Term) *ast.Term {
	items := make([][2]*ast.Term, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, ast.Item(ast.StringTerm(k), conv(m[k])))
	}
	return ast.NewTerm(ast.NewObject(items...))
}

// SetInventory replaces data.inventory with objects, typically every NodePool and node class in the
// cluster (see InventoryKind). Each object needs apiVersion, kind and metadata.name; the caller's maps are
// not modified or retained. Evaluations already running keep the inventory they started with.
func (e *Engine) SetInventory(_ context.Context, objects []map[string]any) error {
	converted := make(map[inventoryKey]*ast.Term, len(objects))
	for _, obj := range objects {
		k, t, err := inventoryEntry(obj)
		if err != nil {
			return fmt.Errorf("set inventory: %w", err)
		}
		converted[k] = t
	}
	e.inventory.mu.Lock()
	defer e.inventory.mu.Unlock()
	e.inventory.objects = converted
	e.inventory.publish()
	e.log.V(1).Info("inventory replaced", "objects", len(converted))
	return nil
}

// UpsertInventory adds obj to data.inventory or replaces the object with the same identity.
func (e *Engine) UpsertInventory(_ context.Context, obj map[string]any) error {
	k, t, err := inventoryEntry(obj)
	if err != nil {
		return fmt.Errorf("upsert inventory: %w", err)
	}
	e.inventory.mu.Lock()
	defer e.inventory.mu.Unlock()
	next := maps.Clone(e.inventory.objects)
	if next == nil {
		next = map[inventoryKey]*ast.Term{}
	}
	next[k] = t
	e.inventory.objects = next
	e.inventory.publish()
	return nil
}

// DeleteInventory removes one object from data.inventory; a missing object is not an error. namespace is
// empty for cluster-scoped objects.
func (e *Engine) DeleteInventory(_ context.Context, apiVersion, kind, namespace, name string) error {
	k, err := newInventoryKey(apiVersion, kind, namespace, name)
	if err != nil {
		return fmt.Errorf("delete inventory: %w", err)
	}
	e.inventory.mu.Lock()
	defer e.inventory.mu.Unlock()
	if _, ok := e.inventory.objects[k]; !ok {
		return nil
	}
	next := maps.Clone(e.inventory.objects)
	delete(next, k)
	e.inventory.objects = next
	e.inventory.publish()
	return nil
}

// snapshotStore is a read-only OPA storage.Store serving the data document from an immutable AST snapshot.
// A transaction pins the snapshot current when it was opened. Policies and triggers are not supported: the
// engine compiles policies itself and never writes through OPA.
type snapshotStore struct {
	storage.PolicyNotSupported
	storage.TriggersNotSupported
	storage.WritesNotSupported
	current atomic.Pointer[ast.Object]
	nextID  atomic.Uint64
}

var _ storage.Store = (*snapshotStore)(nil)

type snapshotTxn struct {
	id   uint64
	root ast.Object
}

// ID identifies the transaction.
func (t *snapshotTxn) ID() uint64 { return t.id }

func newSnapshotStore(root ast.Object) *snapshotStore {
	s := &snapshotStore{}
	s.publish(root)
	return s
}

func (s *snapshotStore) publish(root ast.Object) { s.current.Store(&root) }

// NewTransaction pins the current snapshot. Write transactions are allowed but every write fails.
func (s *snapshotStore) NewTransaction(context.Context, ...storage.TransactionParams) (storage.Transaction, error) {
	return &snapshotTxn{id: s.nextID.Add(1), root: *s.current.Load()}, nil
}

// Read returns the AST value at path in the transaction's snapshot.
func (s *snapshotStore) Read(_ context.Context, txn storage.Transaction, path storage.Path) (any, error) {
	st, ok := txn.(*snapshotTxn)
	if !ok {
		return nil, &storage.Error{Code: storage.InvalidTransactionErr, Message: "transaction of another store"}
	}
	var v ast.Value = st.root
	for i, seg := range path {
		var next *ast.Term
		switch x := v.(type) {
		case ast.Object:
			next = x.Get(ast.StringTerm(seg))
		case *ast.Array:
			if idx, err := strconv.Atoi(seg); err == nil {
				next = x.Get(ast.IntNumberTerm(idx))
			}
		}
		if next == nil {
			return nil, &storage.Error{Code: storage.NotFoundErr, Message: path[:i+1].String() + ": document does not exist"}
		}
		v = next.Value
	}
	return v, nil
}

// ListPolicies reports that the store holds no policies.
func (s *snapshotStore) ListPolicies(context.Context, storage.Transaction) ([]string, error) {
	return nil, nil
}

// Commit ends a transaction; there is nothing to write.
func (s *snapshotStore) Commit(context.Context, storage.Transaction) error { return nil }

// Abort ends a transaction.
func (s *snapshotStore) Abort(context.Context, storage.Transaction) {}

// Truncate is not supported: the store is read-only.
func (s *snapshotStore) Truncate(context.Context, storage.Transaction, storage.TransactionParams, storage.Iterator) error {
	return &storage.Error{Code: storage.WritesNotSupportedErr, Message: "the policy inventory is updated through Engine.SetInventory"}
}
