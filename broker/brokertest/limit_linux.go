package brokertest

import "golang.org/x/sys/unix"

// LimitOpenFiles lowers the process's open-file limit (RLIMIT_NOFILE, as
// `ulimit -n n` would have) while it runs.
func (p *Process) LimitOpenFiles(n uint64) error {
	return unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}, nil)
}
