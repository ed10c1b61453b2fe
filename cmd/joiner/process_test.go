package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// joinerProcess is the built binary running as a subprocess.
type joinerProcess struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{} // closed once the process has exited and been reaped
	err    error         // cmd.Wait's error, once done
}

// startJoiner runs the binary with args and s's standard input (an open pipe), in an environment without
// a kubeconfig. The test kills it if it is still running at the end.
func startJoiner(t *testing.T, bin string, args []string, s *subject) *joinerProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = s.stdinR
	cmd.Stdout = new(bytes.Buffer)
	p := &joinerProcess{cmd: cmd, stderr: new(bytes.Buffer), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait returns the exit code once the process has exited, or false if it is still running after within.
func (p *joinerProcess) wait(within time.Duration) (int, bool) {
	select {
	case <-p.done:
	case <-time.After(within):
		return 0, false
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode(), true
	}
	if p.err != nil {
		return -1, true
	}
	return 0, true
}

// feed writes data to the process's standard input; when it returns, the process has read all but a
// pipe buffer of it.
func (p *joinerProcess) feed(t *testing.T, w *os.File, data []byte) {
	t.Helper()
	written := make(chan error, 1)
	go func() {
		_, err := w.Write(data)
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatalf("write standard input: %v\nstderr: %s", err, p.stderr.String())
		}
	case <-time.After(mustNotHang):
		t.Fatalf("joiner did not read its standard input within %s\nstderr: %s", mustNotHang, p.stderr.String())
	}
}

// waitForRead returns once the process has read at least n bytes (rchar in /proc/PID/io).
func (p *joinerProcess) waitForRead(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(mustNotHang)
	for {
		if read := rchar(p.cmd.Process.Pid); read >= n {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("joiner exited before it had read %d bytes\nstderr: %s", n, p.stderr.String())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("joiner had not read %d bytes after %s", n, mustNotHang)
		}
	}
}

// rchar is the count of bytes the process has read, or -1.
func rchar(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "io"))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}
