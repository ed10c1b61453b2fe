// Package filestest makes the files, folders, named pipes and symbolic links that the tests of the
// command-line tools' file readers need. It is for tests only.
package filestest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Tree creates files (path relative to the folder -> content) in a new temporary folder, with their
// parent folders, and returns the folder.
func Tree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// FIFO creates a named pipe at path. When the test ends, it opens the pipe for writing without blocking
// and closes it, which releases a reader of this process still waiting in open.
func FIFO(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
	t.Cleanup(func() {
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
	})
}

// Symlink creates a symbolic link at path to target.
func Symlink(t testing.TB, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
