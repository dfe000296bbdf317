package server

import "golang.org/x/sys/unix"

// canWriteDirect: fd is non-blocking (gnet's registration dups a Go
// net.Conn's descriptor, which is), so a direct write never blocks the
// answering goroutine, let alone an actor.
func canWriteDirect(fd int) bool {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_NONBLOCK != 0
}

// writevDirect writes what the non-blocking socket fd takes now of
// frames and returns how many bytes that was (0 when it took nothing or
// failed: gnet's write of the rest meets the error and closes the
// connection).
func writevDirect(fd int, frames [][]byte) int {
	for {
		n, err := unix.Writev(fd, frames)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
}
