package server

import (
	"time"
)

// Idle connections (Apache's connections.max.idle.ms, 10 minutes): a
// connection with no request in flight that has neither sent a byte nor
// had one written for that long is closed, logged and counted
// (kaas_connections_closed_by_broker_total{reason="idle"}). Besides
// forgotten clients, it bounds what a client that announces a large frame
// and then stops sending can do: its frame holds its size of the request
// budget (queued.max.request.bytes) only until then.

// touch records activity on the connection.
func (cn *conn) touch() { cn.active.Store(time.Now().UnixNano()) }

// sweepIdle closes idle connections until Shutdown, looking a tenth of
// the idle time apart (at most every minute).
func (s *Server) sweepIdle() {
	defer close(s.sweepDone)
	idle := s.cfg.ConnectionsMaxIdle
	if idle < 0 {
		<-s.sweepStop
		return
	}
	t := time.NewTicker(min(max(idle/10, time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		select {
		case <-s.sweepStop:
			return
		case now := <-t.C:
			s.sweep(now, idle)
		}
	}
}

// sweep closes every connection idle for idle at now.
func (s *Server) sweep(now time.Time, idle time.Duration) {
	s.conns.Range(func(k, _ any) bool {
		k.(*conn).closeIfIdle(now, idle)
		return true
	})
}

// closeIfIdle closes the connection if it has been idle for idle at now.
func (cn *conn) closeIfIdle(now time.Time, idle time.Duration) {
	since := now.Sub(time.Unix(0, cn.active.Load()))
	if since < idle {
		return
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.closed || cn.inflight > 0 || cn.holds > 0 {
		return
	}
	cn.srv.closing(cn, "idle", "closing connection: idle for longer than connections.max.idle.ms",
		"idle", since.Round(time.Millisecond), "max", idle)
	cn.closed = true
	cn.shutGoneLocked()
	cn.t.close()
}
