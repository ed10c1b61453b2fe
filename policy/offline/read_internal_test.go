package offline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

// TestReadInputSkipsFIFOFoundInFolder: a folder entry replaced by a FIFO after the folder was listed is
// opened without waiting for a writer and skipped.
func TestReadInputSkipsFIFOFoundInFolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "swapped.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readInput(context.Background(), input{path: p, inFolder: true}, nil, DefaultMaxFileSize)
		done <- err
	}()
	select {
	case err := <-done:
		var skipped *skippedError
		if !errors.As(err, &skipped) || err.Error() != "skipped "+p+": a named pipe (FIFO), which may never end; only regular files are read from a folder (name it with -f to read it anyway)" {
			t.Fatalf("readInput error = %v, want a *skippedError", err)
		}
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		t.Fatal("readInput blocked on a FIFO found in a folder")
	}
}
