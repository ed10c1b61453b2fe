package fileinput

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/filestest"
)

// TestReadFolderEntryReplacedByFIFO: a folder entry replaced by a FIFO after the folder was listed is
// opened without waiting for a writer and skipped; a path named explicitly that became a FIFO is refused.
func TestReadFolderEntryReplacedByFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "swapped.yaml")
	filestest.FIFO(t, p)
	for _, inFolder := range []bool{true, false} {
		done := make(chan error, 1)
		go func() {
			_, err := read(context.Background(), entry{path: p, inFolder: inFolder}, Options{})
			done <- err
		}()
		select {
		case err := <-done:
			var skipped *skippedError
			var notRegular *NotRegularError
			if inFolder && (!errors.As(err, &skipped) || err.Error() != "skipped "+p+": a named pipe (FIFO); only regular files are read from a folder") {
				t.Errorf("folder entry: error = %v, want a *skippedError", err)
			}
			if !inFolder && !errors.As(err, &notRegular) {
				t.Errorf("named path: error = %v, want a *NotRegularError", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("read (inFolder %v) blocked on a FIFO", inFolder)
		}
	}
}

// TestReadChunksChecksTheContextBetweenChunks: a regular file is read in chunks, and a context done
// between two of them stops the read.
func TestReadChunksChecksTheContextBetweenChunks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &countingReader{onRead: cancel}
	_, err := readChunks(ctx, r, "big.yaml", 10*chunkSize, 100*chunkSize)
	if !errors.Is(err, context.Canceled) || r.reads != 1 {
		t.Fatalf("readChunks = %v after %d reads; want it stopped after the first", err, r.reads)
	}
}

// countingReader returns a full buffer of spaces on each Read, and calls onRead.
type countingReader struct {
	reads  int
	onRead func()
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	c.onRead()
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
