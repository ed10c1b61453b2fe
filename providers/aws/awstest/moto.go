package awstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region is the region of Config; moto serves every region, the seeded environment lives here.
const Region = "us-east-1"

// AccountID is the account moto acts as.
const AccountID = "123456789012"

// ErrMotoNotFound is returned by New when moto_server is not on the PATH.
var ErrMotoNotFound = errors.New("moto_server not found: install it with `pip install 'moto[server]==5.2.1'`")

// Moto is a running moto_server with its front. Its methods are safe for concurrent use.
type Moto struct {
	// Config is an aws.Config for Region with static credentials and BaseEndpoint set to Endpoint:
	// every SDK client built from it talks to this Moto. Its Retryer is the SDK's standard
	// retryer (3 attempts, the same retryable errors and retry quota) with backoff capped at
	// 50ms, so tests that inject throttling do not wait seconds; a client given its own Retryer
	// uses that instead.
	Config aws.Config
	// Endpoint is the URL of the front (moto plus the gaps awstest fills). Point clients here.
	Endpoint string
	// MotoEndpoint is the URL of moto_server itself, without the front.
	MotoEndpoint string

	cmd     *exec.Cmd
	exited  chan struct{}
	output  *lockedBuffer
	front   *front
	server  *http.Server
	tempDir string
	stop    sync.Once
	stopErr error
}

// Start starts a Moto for t and stops it when t ends. It fails t at once, never skips, when
// moto_server is missing or does not come up.
func Start(t testing.TB) *Moto {
	t.Helper()
	m, err := New(context.Background())
	if err != nil {
		t.Fatalf("awstest: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("awstest: %v", err)
		}
	})
	return m
}

// New starts moto_server on a free loopback port with the published AMIs loaded, and the front
// before it, and returns once both answer. ctx bounds the start only. Close stops both.
func New(ctx context.Context) (*Moto, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, ErrMotoNotFound
	}
	dir, err := os.MkdirTemp("", "awstest-")
	if err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	amis, err := writeMotoAMIs(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start moto_server: write AMIs: %w", err)
	}
	var m *Moto
	for attempt := 0; ; attempt++ {
		m, err = startMoto(ctx, bin, dir, amis)
		// Another process can take the free port between choosing and binding it: try another.
		if err == nil || attempt == 2 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := m.startFront(); err != nil {
		_ = m.Close()
		return nil, err
	}
	return m, nil
}

func startMoto(ctx context.Context, bin, dir, amis string) (*Moto, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	out := &lockedBuffer{}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "MOTO_AMIS_PATH="+amis)
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, and killed with the test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	m := &Moto{MotoEndpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, exited: make(chan struct{}), output: out, tempDir: dir}
	go func() { _ = cmd.Wait(); close(m.exited) }()
	if err := m.waitReady(ctx, 60*time.Second); err != nil {
		_ = m.killMoto()
		return nil, err
	}
	return m, nil
}

// waitReady polls moto's management API until it answers.
func (m *Moto) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.MotoEndpoint+"/moto-api/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-m.exited:
			return fmt.Errorf("moto_server exited before it answered on %s:\n%s", m.MotoEndpoint, m.output.tail(2000))
		case <-ctx.Done():
			return fmt.Errorf("wait for moto_server on %s: %w", m.MotoEndpoint, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("moto_server did not answer on %s within %s:\n%s", m.MotoEndpoint, timeout, m.output.tail(2000))
		}
	}
}

// startFront serves the front on another free loopback port and builds Config.
func (m *Moto) startFront() error {
	f, err := newFront(m.MotoEndpoint)
	if err != nil {
		return fmt.Errorf("start awstest front: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("start awstest front: %w", err)
	}
	m.front = f
	m.server = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.server.Serve(ln) }()
	m.Endpoint = "http://" + ln.Addr().String()
	m.Config = aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(m.Endpoint),
		Retryer:      testRetryer,
	}
	return nil
}

// Close stops the front and moto_server and removes their files. It is idempotent.
func (m *Moto) Close() error {
	m.stop.Do(func() {
		if m.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = m.server.Shutdown(ctx)
			cancel()
		}
		m.stopErr = m.killMoto()
		_ = os.RemoveAll(m.tempDir)
	})
	return m.stopErr
}

// killMoto stops moto_server's process group: SIGTERM, then SIGKILL after 5s.
func (m *Moto) killMoto() error {
	pid := m.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-m.exited:
		return nil
	case <-time.After(5 * time.Second):
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop moto_server (pid %d): %w", pid, err)
	}
	<-m.exited
	return nil
}

// testRetryer is the SDK's standard retryer with backoffs short enough for tests.
func testRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 50 * time.Millisecond })
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer collects moto_server's output for error messages, keeping the last 64 KiB.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		keep := b.buf.Bytes()[b.buf.Len()-32<<10:]
		b.buf = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
