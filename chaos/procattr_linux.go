package chaos

import "syscall"

// childAttr puts a child in a process group of its own (the terminal's
// Ctrl-C reaches only the harness, which stops everything itself) and has
// the kernel SIGKILL it should the harness die without cleaning up.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
