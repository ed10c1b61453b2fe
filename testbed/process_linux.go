package testbed

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// childProcAttr puts a component in its own process group and has the kernel kill it when
// the process that started it dies, so nothing outlives a crashed test binary.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(pid int, force bool) error {
	sig := syscall.SIGTERM
	if force {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

var lookPath = exec.LookPath

// APIServerProcess returns the Env's kube-apiserver process, for tests that pause it (SIGSTOP,
// then SIGCONT) to make the API server unreachable without losing its state. envtest starts it as
// a child of this process (through the wrapper that execs it, so with the same PID); it is found in
// /proc as the child named kube-apiserver that serves the Env's port.
func (e *Env) APIServerProcess() (*os.Process, error) {
	if e.Config == nil {
		return nil, errors.New("find kube-apiserver: the test bed is not started")
	}
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("find kube-apiserver: parse %q: %w", e.Config.Host, err)
	}
	portArg := "--secure-port=" + u.Port()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("find kube-apiserver: %w", err)
	}
	self := os.Getpid()
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || parentPID(pid) != self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue // it exited meanwhile
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args[1:], portArg) {
			return os.FindProcess(pid)
		}
	}
	return nil, fmt.Errorf("find kube-apiserver: no child process of this one runs it with %s", portArg)
}

// parentPID returns the parent of pid from /proc/<pid>/stat, or -1.
func parentPID(pid int) int {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return ppid
}
