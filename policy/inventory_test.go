package policy

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
)

func TestSnapshotStoreRead(t *testing.T) {
	ctx := context.Background()
	s := newSnapshotStore(ast.MustParseTerm(`{"inventory": {"a": [10, {"b": "x"}]}}`).Value.(ast.Object))
	txn, err := s.NewTransaction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A later publish does not change what an open transaction reads.
	s.publish(ast.NewObject())
	tests := []struct {
		path     string
		want     string
		notFound bool
	}{
		{"/", `{"inventory": {"a": [10, {"b": "x"}]}}`, false},
		{"/inventory/a/0", `10`, false},
		{"/inventory/a/1/b", `"x"`, false},
		{"/inventory/a/2", "", true},
		{"/inventory/a/x", "", true},
		{"/inventory/missing", "", true},
		{"/inventory/a/0/deeper", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			path, ok := storage.ParsePath(tc.path)
			if !ok {
				t.Fatalf("bad path %s", tc.path)
			}
			got, err := s.Read(ctx, txn, path)
			if tc.notFound {
				if !storage.IsNotFound(err) {
					t.Fatalf("Read = %v, %v; want not found", got, err)
				}
				return
			}
			if err != nil || got.(ast.Value).Compare(ast.MustParseTerm(tc.want).Value) != 0 {
				t.Fatalf("Read = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
	fresh, _ := s.NewTransaction(ctx)
	if got, err := s.Read(ctx, fresh, storage.RootPath); err != nil || got.(ast.Object).Len() != 0 {
		t.Errorf("new transaction reads %v, %v; want the published empty document", got, err)
	}
	if _, err := s.Read(ctx, otherTxn{}, storage.RootPath); !storage.IsInvalidTransaction(err) {
		t.Errorf("foreign transaction: err = %v", err)
	}
	if err := s.Write(ctx, txn, storage.AddOp, storage.RootPath, 1); err == nil {
		t.Error("Write succeeded on the read-only store")
	}
}

type otherTxn struct{}

func (otherTxn) ID() uint64 { return 0 }
