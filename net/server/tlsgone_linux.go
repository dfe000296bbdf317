package server

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// A TLS connection's reader does not read while it waits (its turn, the
// budget, its unwritten answers), so a client that closes its end goes
// unnoticed: its FIN sits behind bytes nobody reads, and Call.Gone never
// fires for the calls in flight (a parked long-poll fetch holds its place
// until its wait runs out). gnet connections are registered for
// EPOLLRDHUP while paused (readpause_linux.go); here the reader, once a
// wait outlasts peerWatchAfter, watches the socket without reading it: the
// runtime's poller wakes the watcher on every readiness change, and
// TCP_INFO says CLOSE_WAIT once the peer's FIN arrived, whatever unread
// bytes precede it. The connection is then shut, so the reader's wait
// ends and the connection closes.

// peerWatchAfter: shorter waits (an answer in flight) cost no watcher.
const peerWatchAfter = 50 * time.Millisecond

// tcpEstablished is Linux's TCP_ESTABLISHED (include/net/tcp_states.h).
const tcpEstablished = 1

// waitWatchingPeer is tt.wait that also ends (false) when the peer closes.
func (tt *tlsTransport) waitWatchingPeer() bool {
	t := time.NewTimer(peerWatchAfter)
	select {
	case <-tt.wakeCh:
		t.Stop()
		return true
	case <-tt.done:
		t.Stop()
		return false
	case <-t.C:
	}
	stop := tt.watchPeer()
	ok := tt.wait()
	stop()
	return ok
}

// watchPeer shuts the connection if the peer closes its end, until stop
// is called; stop returns once the watcher no longer uses the socket.
func (tt *tlsTransport) watchPeer() (stop func()) {
	tc, ok := tt.nc.NetConn().(*net.TCPConn)
	if !ok {
		return func() {}
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := raw.Read(func(fd uintptr) bool {
			info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
			// Anything but ESTABLISHED: the peer sent its FIN
			// (CLOSE_WAIT) or reset the connection.
			return err != nil || info.State != tcpEstablished
		})
		if err == nil {
			tt.shut()
		}
	}()
	return func() {
		_ = tc.SetReadDeadline(time.Unix(1, 0)) // ends raw.Read
		<-done
		_ = tc.SetReadDeadline(time.Time{})
	}
}
