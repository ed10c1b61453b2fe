package testbed

import (
	"errors"
	"os/exec"
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
