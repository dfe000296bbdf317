//go:build !linux

package chaos

import "syscall"

// childAttr puts a child in a process group of its own.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
