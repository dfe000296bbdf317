package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Accepting is ours, not gnet's: gnet's acceptor treats any accept error
// but EAGAIN/EINTR/ECONNRESET/ECONNABORTED as fatal and shuts the whole
// engine down, so one burst of EMFILE (out of file descriptors) would
// leave a broker that lives on but refuses every connection. Here a Go
// listener accepts, a failed accept backs off and retries, and each
// accepted connection is handed to an event loop with Engine.Register.

// acceptor owns the listeners — one accept loop each — and the connection
// counts behind max.connections and max.connections.per.ip, which every
// listener shares as Apache's do. A plaintext listener's connections go to
// an event loop; a TLS listener's to their own goroutines (tls.go).
type acceptor struct {
	srv      *Server
	loops    []*acceptLoop
	maxConns int // max.connections; <= 0 unlimited
	maxPerIP int // max.connections.per.ip; <= 0 unlimited

	mu      sync.Mutex
	slot    *sync.Cond // signalled when a connection closes
	open    int
	perIP   map[netip.Addr]int
	closing bool
}

// acceptLoop accepts on one listener.
type acceptLoop struct {
	l      Listener
	ln     net.Listener
	done   chan struct{}
	errLog logEvery // the accept-failure line, touched only by run
}

// acceptLogInterval is the least time between two lines about failed
// accepts on one listener (the first failure is logged at once).
const acceptLogInterval = 10 * time.Second

// admission is the gnet context of a connection until OnOpen replaces it
// with the connection state.
type admission struct {
	ip netip.Addr
	l  *Listener
}

func newAcceptor(s *Server, loops []*acceptLoop) *acceptor {
	a := &acceptor{srv: s, loops: loops, maxConns: s.cfg.MaxConnections, maxPerIP: s.cfg.MaxConnectionsPerIP,
		perIP: map[netip.Addr]int{}}
	a.slot = sync.NewCond(&a.mu)
	return a
}

// start runs every listener's accept loop.
func (a *acceptor) start(eng gnet.Engine) {
	for _, al := range a.loops {
		go a.run(al, eng)
	}
}

// Backoff after a failed accept, as net/http's server: from 5 ms doubling
// to 1 s, reset by the next success.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

func (a *acceptor) run(al *acceptLoop, eng gnet.Engine) {
	defer close(al.done)
	var delay time.Duration
	for {
		if !a.waitForSlot() {
			return
		}
		nc, err := al.ln.Accept()
		if err != nil {
			if a.stopping() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				a.srv.fail(err)
				return
			}
			delay = min(max(2*delay, acceptBackoffMin), acceptBackoffMax)
			a.srv.acceptFailed(al, err, delay)
			if !a.sleep(delay) {
				return
			}
			continue
		}
		delay = 0
		a.admit(al, eng, nc)
	}
}

// waitForSlot blocks while max.connections are open: as Apache's
// acceptor, new connections wait in the kernel's backlog until one
// closes. It returns false once the acceptor is closing.
func (a *acceptor) waitForSlot() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.maxConns > 0 && a.open >= a.maxConns && !a.closing {
		a.srv.met.acceptWaits()
		a.srv.log.Warn("max.connections reached: new connections wait until one closes", "max_connections", a.maxConns)
		for a.open >= a.maxConns && !a.closing {
			a.slot.Wait()
		}
	}
	return !a.closing
}

// admit counts the connection against the limits and registers it with an
// event loop, or closes it at once when its address already has
// max.connections.per.ip open (Apache closes those too).
func (a *acceptor) admit(al *acceptLoop, eng gnet.Engine, nc net.Conn) {
	ip := remoteIP(nc.RemoteAddr())
	a.mu.Lock()
	if a.maxPerIP > 0 && a.perIP[ip] >= a.maxPerIP {
		a.mu.Unlock()
		a.srv.met.refused("max_connections_per_ip")
		a.srv.log.Info("connection refused: address already has max.connections.per.ip open",
			"remote", nc.RemoteAddr().String(), "max_connections_per_ip", a.maxPerIP)
		_ = nc.Close()
		return
	}
	a.open++
	a.perIP[ip]++
	a.mu.Unlock()
	if al.l.Protocol.TLS() {
		a.srv.serveTLS(al, nc, ip)
		return
	}
	ctx := gnet.NewContext(gnet.NewNetConnContext(context.Background(), nc), admission{ip: ip, l: &al.l})
	res, err := eng.Register(ctx)
	if err != nil {
		a.registerFailed(nc, ip, err)
		return
	}
	// Register duplicates the descriptor on a worker and closes nc; a
	// failure (EMFILE again, the engine stopping) is only known from the
	// result. An engine that stops before its loop takes the connection
	// never answers at all (gnet's worker waits for the loop), so this
	// waits for the engine too rather than for ever.
	go func() {
		select {
		case r := <-res:
			if r.Err != nil {
				a.registerFailed(nil, ip, r.Err)
			}
		case <-a.srv.runDone:
		}
	}()
}

func (a *acceptor) registerFailed(nc net.Conn, ip netip.Addr, err error) {
	if nc != nil {
		_ = nc.Close()
	}
	a.srv.log.Warn("could not hand an accepted connection to an event loop; closed it", "err", err)
	a.srv.met.refused("register_failed")
	a.closed(ip)
}

// closed gives back a connection's place in the counts.
func (a *acceptor) closed(ip netip.Addr) {
	a.mu.Lock()
	a.open--
	if a.perIP[ip]--; a.perIP[ip] <= 0 {
		delete(a.perIP, ip)
	}
	a.slot.Signal()
	a.mu.Unlock()
}

func (a *acceptor) stopping() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closing
}

// sleep waits d, or returns false when the acceptor closes meanwhile.
func (a *acceptor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !a.stopping()
	case <-a.srv.drainCh:
		return false
	}
}

// close stops accepting and waits for the accept loops to end.
func (a *acceptor) close() {
	a.mu.Lock()
	a.closing = true
	a.slot.Broadcast()
	a.mu.Unlock()
	for _, al := range a.loops {
		_ = al.ln.Close()
	}
	for _, al := range a.loops {
		<-al.done
	}
}

// openCount is the number of connections admitted and not yet closed.
func (a *acceptor) openCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.open
}

func remoteIP(addr net.Addr) netip.Addr {
	if ta, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// errnoName names the errno behind an accept error for the metric label
// (EMFILE, ENFILE, ...), or "other".
func errnoName(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return "other"
	}
	switch errno {
	case syscall.EMFILE:
		return "EMFILE"
	case syscall.ENFILE:
		return "ENFILE"
	case syscall.ENOBUFS:
		return "ENOBUFS"
	case syscall.ENOMEM:
		return "ENOMEM"
	}
	return "errno_" + strconv.Itoa(int(errno))
}
