package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/filestest"
)

// The joiner binary, built once for the tests that run it as a subprocess (they send it signals).
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// joinerBinary builds this package into a temporary folder the first time a test asks for it.
func joinerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "joiner-cli-test-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "joiner")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// mustNotHang bounds a command that must fail at once: only a hang reaches it.
const mustNotHang = 20 * time.Second

// stopsWithin is how soon after a signal a command must have exited.
const stopsWithin = time.Second

// reader is a subcommand that reads input; args is its command line with input (a file, "-" or a folder:
// policy test names the folder that holds the file) and extra flags.
type reader struct {
	name string
	args func(input string, extra ...string) []string
}

// subject is where one case's input is: file, the path to name (dir/input.yaml unless the case names
// another), the folder that policy test is given, and the run's standard input, a pipe held open.
type subject struct {
	file, dir      string
	stdinR, stdinW *os.File
}

// badInput is one row of the table: how to make the input, and what stderr must say, per subcommand
// (key "*" for the others). "{file}" and "{dir}" in an expectation are replaced by the subject's paths.
type badInput struct {
	name string
	make func(t *testing.T, s *subject)
	// noInput runs the command without naming any input (standard input is left open, never written).
	noInput bool
	want    map[string][]string
}

// TestEveryReadingCommandRefusesBadInputs runs the built binary, each subcommand that reads input against
// each bad input, with standard input an open pipe nobody writes to: every run ends at once with a
// non-zero exit code and an error naming the input and the fix.
func TestEveryReadingCommandRefusesBadInputs(t *testing.T) {
	bin := joinerBinary(t)
	readers, _ := readingCommands(t)
	for _, in := range badInputs() {
		for _, r := range readers {
			t.Run(in.name+"/"+r.name, func(t *testing.T) {
				s := newSubject(t)
				input := ""
				if !in.noInput {
					in.make(t, s)
					input = s.file
					if r.name == "policy test" {
						input = s.dir
					}
				}
				args := r.args(input)
				p := startJoiner(t, bin, args, s)
				code, ok := p.wait(mustNotHang)
				if !ok {
					t.Fatalf("joiner %s still running after %s: it hangs\nstderr: %s", strings.Join(args, " "), mustNotHang, p.stderr.String())
				}
				if code == 0 {
					t.Errorf("exit code 0, want non-zero\nstderr: %s", p.stderr.String())
				}
				want := in.want[r.name]
				if want == nil {
					want = in.want["*"]
				}
				for _, w := range want {
					w = strings.NewReplacer("{file}", s.file, "{dir}", s.dir).Replace(w)
					if !strings.Contains(p.stderr.String(), w) {
						t.Errorf("stderr lacks %q:\n%s", w, p.stderr.String())
					}
				}
			})
		}
	}
}

// badInputs is the table of TestEveryReadingCommandRefusesBadInputs.
func badInputs() []badInput {
	const emptyHint = "check the paths given, or pass --allow-empty if finding none is expected"
	const emptyTests = "no policies or *_test.rego files found in folder {dir}"
	return []badInput{
		{name: "FIFO nobody writes to", make: func(t *testing.T, s *subject) { filestest.FIFO(t, s.file) },
			want: map[string][]string{
				"*":           {"read {file}: it is a named pipe (FIFO), not a regular file; only regular files are read"},
				"policy test": {"warning: skipped {dir}/input.yaml: a named pipe (FIFO)", emptyTests, emptyHint},
			}},
		{name: "/dev/zero", make: func(t *testing.T, s *subject) {
			filestest.Symlink(t, "/dev/zero", s.file) // what policy test finds in its folder
			s.file = "/dev/zero"                      // what the others are given
		}, want: map[string][]string{
			"*":           {"read /dev/zero: it is a character device, not a regular file"},
			"policy test": {"warning: skipped {dir}/input.yaml: a character device", emptyTests, emptyHint},
		}},
		{name: "empty file", make: func(t *testing.T, s *subject) { writeFile(t, s.file, nil) },
			want: map[string][]string{
				"*":               {"no Kubernetes objects found in {file} (holds none); " + emptyHint},
				"policy test":     {emptyTests, emptyHint},
				"disruption plan": {"kubeconfig: read {file}: it is empty; name a kubeconfig that holds a cluster and credentials"},
			}},
		{name: "directory", make: func(t *testing.T, s *subject) { mkdir(t, s.file) },
			want: map[string][]string{
				"*":               {"no Kubernetes objects found in folder {file} (no regular *.yaml, *.yml or *.json file in it); " + emptyHint},
				"policy test":     {emptyTests, emptyHint},
				"disruption plan": {"kubeconfig: read {file}: it is a folder; name the file itself"},
			}},
		{name: "binary file", make: func(t *testing.T, s *subject) { writeFile(t, s.file, []byte("\x7fELF\x02\x01\x01\x00\x00\x00")) },
			want: map[string][]string{"*": {"read {file}: it is not a text file (byte 0x02 at offset 4)"}}},
		{name: "broken symbolic link", make: func(t *testing.T, s *subject) { filestest.Symlink(t, "/nonexistent/manifests.yaml", s.file) },
			want: map[string][]string{
				"*":           {"read {file}: it is a broken symbolic link to /nonexistent/manifests.yaml", "fix the link"},
				"policy test": {"warning: skipped {dir}/input.yaml: broken symbolic link to /nonexistent/manifests.yaml", emptyTests, emptyHint},
			}},
		{name: "standard input left open, no input named", noInput: true,
			want: map[string][]string{
				"check":           {"no manifests to check; pass files, directories or - for standard input with -f"},
				"convert":         {"pass the manifests to convert with -f FILE, -f DIR or -f - (standard input)"},
				"policy check":    {"no manifests to check; pass files, directories or - for standard input with -f"},
				"policy test":     {"pass exactly one folder of policies and *_test.rego files"},
				"disruption plan": {"no Kubernetes configuration (--kubeconfig, $KUBECONFIG or ~/.kube/config)"},
			}},
	}
}

// TestEveryReadingCommandStopsOnASignal sends SIGINT and SIGTERM to each subcommand that reads input while
// it reads: standard input nobody closes (check, convert, policy check), a 100 MB folder (policy test), an
// apiserver that never answers (disruption plan). Each must exit within a second, non-zero, saying it was
// stopped and by what.
func TestEveryReadingCommandStopsOnASignal(t *testing.T) {
	bin := joinerBinary(t)
	readers, fx := readingCommands(t)
	writeBigFolder(t, fx.bigFolder)
	fx.silentAPIServer(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, r := range readers {
			t.Run(sig.String()+"/"+r.name, func(t *testing.T) {
				s := newSubject(t)
				var args []string
				var reading func(*testing.T, *joinerProcess)
				switch r.name {
				case "policy test":
					args = r.args(fx.bigFolder, "--max-file-size=200Mi")
					reading = func(t *testing.T, p *joinerProcess) { p.waitForRead(t, 8<<20) }
				case "disruption plan":
					args = r.args(fx.silentKubeconfig)
					reading = func(t *testing.T, p *joinerProcess) { fx.waitForConnection(t, p) }
				default:
					args = r.args("-")
					// 1 MiB, 16 times the pipe's buffer: when the write returns, the command is reading.
					reading = func(t *testing.T, p *joinerProcess) { p.feed(t, s.stdinW, bytes.Repeat([]byte("# x\n"), 1<<18)) }
				}
				p := startJoiner(t, bin, args, s)
				reading(t, p)
				if err := p.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				sent := time.Now()
				code, ok := p.wait(stopsWithin)
				if !ok {
					t.Fatalf("still running %s after %v\nstderr: %s", stopsWithin, sig, p.stderr.String())
				}
				cause := map[syscall.Signal]string{syscall.SIGINT: "interrupt", syscall.SIGTERM: "terminated"}[sig] + " signal received"
				stopped := "joiner " + strings.Fields(r.name)[0] + ": stopped: " + cause
				if code == 0 || !strings.Contains(p.stderr.String(), stopped) {
					t.Errorf("exit code %d after %v, stderr:\n%s\nwant non-zero and %q", code, sig, p.stderr.String(), stopped)
				}
				if r.name != "policy test" && r.name != "disruption plan" && !strings.Contains(p.stderr.String(), "read standard input: stopped: "+cause) {
					t.Errorf("stderr does not say the read of standard input stopped:\n%s", p.stderr.String())
				}
				t.Logf("exited %s after %v", time.Since(sent).Round(time.Millisecond), sig)
			})
		}
	}
}

// fixtures are the inputs the commands need besides the one under test.
type fixtures struct {
	policies string // a valid ProvisioningPolicy file
	// For the signal tests (writeBigFolder, silentAPIServer): a folder holding a 100 MB manifest file, and
	// a kubeconfig of an apiserver that accepts connections and never answers.
	bigFolder, silentKubeconfig string
	accepted                    chan net.Conn
}

// readingCommands returns every subcommand that reads input, and the fixtures they share.
func readingCommands(t *testing.T) ([]reader, *fixtures) {
	t.Helper()
	dir := t.TempDir()
	fx := &fixtures{policies: filepath.Join(dir, "policies.yaml"), bigFolder: filepath.Join(dir, "big"),
		silentKubeconfig: filepath.Join(dir, "kubeconfig"), accepted: make(chan net.Conn, 16)}
	writeFile(t, fx.policies, []byte("apiVersion: joiner.dev/v1alpha1\nkind: ProvisioningPolicy\nmetadata: {name: p}\nspec:\n  rego: |\n    package p\n    violation contains {\"msg\": \"x\"} if { false }\n"))
	return []reader{
		{"check", func(in string, extra ...string) []string { return withInput([]string{"check"}, extra, "-f", in) }},
		{"convert", func(in string, extra ...string) []string { return withInput([]string{"convert"}, extra, "-f", in) }},
		{"policy check", func(in string, extra ...string) []string {
			return withInput([]string{"policy", "check", "--policies", fx.policies}, extra, "-f", in)
		}},
		{"policy test", func(in string, extra ...string) []string { return withInput([]string{"policy", "test"}, extra, "", in) }},
		{"disruption plan", func(in string, extra ...string) []string {
			return withInput([]string{"disruption", "plan", "--timeout=1m"}, extra, "--kubeconfig", in)
		}},
	}, fx
}

// withInput appends extra flags, then the input (after flag, or as an argument when flag is empty) unless
// it is "".
func withInput(args, extra []string, flag, input string) []string {
	args = append(args, extra...)
	switch {
	case input == "":
	case flag == "":
		args = append(args, input)
	default:
		args = append(args, flag, input)
	}
	return args
}

// writeBigFolder writes a 100 MB file of small ConfigMaps: a load that takes seconds, document by document.
func writeBigFolder(t *testing.T, dir string) {
	t.Helper()
	mkdir(t, dir)
	f, err := os.Create(filepath.Join(dir, "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	value := strings.Repeat("x", 2000)
	for i, n := 0, 0; n < 100_000_000; i++ {
		k, _ := fmt.Fprintf(w, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\ndata: {k: %s}\n", i, value)
		n += k
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// silentAPIServer listens on a local port, accepts connections and never answers, and writes a kubeconfig
// that points at it.
func (fx *fixtures) silentAPIServer(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			fx.accepted <- c
		}
	}()
	writeFile(t, fx.silentKubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: silent, cluster: {server: "http://%s"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: silent, context: {cluster: silent, user: u}}]
current-context: silent
`, l.Addr())))
}

// waitForConnection returns once the command has connected to the silent apiserver: it is waiting for
// an answer.
func (fx *fixtures) waitForConnection(t *testing.T, p *joinerProcess) {
	t.Helper()
	select {
	case <-fx.accepted:
	case <-p.done:
		t.Fatalf("joiner exited before it connected\nstderr: %s", p.stderr.String())
	case <-time.After(mustNotHang):
		t.Fatalf("joiner did not connect to the apiserver within %s", mustNotHang)
	}
}

// newSubject makes a fresh folder for a case's input and an open pipe for its standard input.
func newSubject(t *testing.T) *subject {
	t.Helper()
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return &subject{file: filepath.Join(dir, "input.yaml"), dir: dir, stdinW: w, stdinR: r}
}
