package server

import (
	"reflect"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Pausing reads. gnet (v2.9) reads a connection whenever epoll reports it
// readable and keeps whatever OnTraffic leaves in an elastic buffer; it has
// no way to stop reading one connection (its maintainers declined one,
// gnet#712). So kaas edits the connection's epoll registration itself:
// while a connection waits, its descriptor is registered for nothing (or
// only for writability while answers are pending), the kernel's receive
// buffer fills, and TCP pushes back on the client — what Apache gets from
// muting a channel. Resuming registers it for reads again, exactly as gnet
// registers it.
//
// gnet re-registers for reads on its own after a write that had to wait
// (and when that backlog drains). Each such time lets at most one more
// read chunk in before OnTraffic — or the write callback — pauses again,
// so what a paused connection holds stays within a few chunks.
//
// The loop's epoll descriptor is not exported by gnet; it is read from the
// connection with reflection (loop.poller.fd). If that ever fails (a gnet
// release that renamed them) or epoll refuses the change, pausing is off,
// logged once, and maxUnreadWhilePaused closes a client that keeps sending
// instead.

// readPause: 0 not yet tried, 1 works, 2 unavailable.
var readPause atomic.Int32

// loopEpollFD returns the epoll descriptor of gc's event loop, or -1.
func loopEpollFD(gc gnet.Conn) int {
	v := reflect.ValueOf(gc)
	for _, name := range []string{"loop", "poller"} {
		if v.Kind() != reflect.Pointer || v.IsNil() {
			return -1
		}
		v = v.Elem()
		if v.Kind() != reflect.Struct {
			return -1
		}
		v = v.FieldByName(name)
	}
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return -1
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct {
		return -1
	}
	fd := v.FieldByName("fd")
	if fd.Kind() != reflect.Int {
		return -1
	}
	return int(fd.Int())
}

// setReadInterest registers cn's descriptor for reads (on) or not, keeping
// writability while answers wait in gnet's outbound buffer.
//
// Paused, it stays registered for EPOLLRDHUP: a client that closes its
// end sends no more bytes to read, only a FIN, which epoll reports as
// RDHUP; gnet then closes the connection (as it does for a FIN read on a
// connection that is not paused), so Call.Gone fires and a parked
// long-poll fetch stops early. Without it nothing is reported until an
// answer is written into the closed socket.
func (cn *conn) setReadInterest(on bool) {
	if cn.epfd < 0 || readPause.Load() == 2 {
		return
	}
	ev := uint32(unix.EPOLLRDHUP)
	if on {
		ev = unix.EPOLLIN | unix.EPOLLPRI
	}
	if cn.gc.OutboundBuffered() > 0 {
		ev |= unix.EPOLLOUT
	}
	fd := cn.gc.Fd()
	err := unix.EpollCtl(cn.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: ev, Fd: int32(fd)})
	switch {
	case err == nil:
		readPause.CompareAndSwap(0, 1)
	case readPause.CompareAndSwap(0, 2):
		cn.srv.log.Error("cannot pause reading a connection (epoll); clients that keep sending while their requests wait are closed instead",
			"err", err, "max_unread_bytes", maxUnreadWhilePaused)
	}
}
