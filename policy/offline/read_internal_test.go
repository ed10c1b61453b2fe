package offline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSplitDocumentsHasNoLineLimit: a line may be as long as its file. This one is longer than the 64 MiB
// bufio.Scanner limit that used to fail with "token too long".
func TestSplitDocumentsHasNoLineLimit(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 64<<20+1)
	data := append(append([]byte("a: "), long...), "\n---\nb: 1\r\n--- # two\r\n# comment only\n---\nc: 2"...)
	docs := splitDocuments("big.yaml", data)
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
	want := []struct {
		source string
		line   int
		text   string
	}{
		{"big.yaml#1", 1, "a: " + string(long) + "\n"},
		{"big.yaml#2", 3, "b: 1\r\n"},
		{"big.yaml#3", 7, "c: 2"},
	}
	for i, w := range want {
		if d := docs[i]; d.source != w.source || d.line != w.line || string(d.text) != w.text {
			t.Errorf("document %d = %s line %d (%d bytes), want %s line %d (%d bytes)", i, d.source, d.line, len(d.text), w.source, w.line, len(w.text))
		}
	}
}

// TestReadAllStopsBetweenDocuments: a context done while the documents of a file are handed on (a long
// load of a large file) stops the load before the next document.
func TestReadAllStopsBetweenDocuments(t *testing.T) {
	p := filepath.Join(t.TempDir(), "many.yaml")
	if err := os.WriteFile(p, []byte(strings.Repeat("---\na: 1\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	_, err := readAll(ctx, []string{p}, nil, LoadOptions{}, objectExts, func(document) error {
		seen++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || seen != 1 || err.Error() != "read "+p+": stopped: context canceled" {
		t.Fatalf("readAll = %v after %d documents; want it stopped after the first", err, seen)
	}
}
