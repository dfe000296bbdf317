package broker

import (
	"fmt"
	"runtime/debug"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/net/wire"
	"kaas/storage/diskcheck"
)

// api is one row of the table the router dispatches on and ApiVersions
// advertises, so the two cannot drift. Each API registers its row from its
// own file (NN_name.go).
type api struct {
	key      int16
	min, max int16
	// blocking handlers (disk writes, coordinator round trips) run on a
	// goroutine of their own; the connection is held meanwhile, so the next
	// request on it sees their effects, as with Apache's muted channels.
	blocking bool
	// single: served by a single broker only (share groups, for now): a
	// cluster broker neither advertises nor accepts the key.
	single bool
	// serve answers the call: a non-nil response is sent at once; nil
	// means serve arranged for c.Reply or c.NoReply to be called later.
	serve func(b *Broker, c *server.Call) kmsg.Response
	// fail builds an answer that reports code for every part of the
	// request (used when a handler panics).
	fail func(req kmsg.Request, code int16) kmsg.Response
}

var apis = map[int16]*api{}

func register(a api) {
	if _, dup := apis[a.key]; dup {
		panic(fmt.Sprintf("api key %d registered twice", a.key))
	}
	if kmsg.RequestForKey(a.key) == nil || a.max > kmsg.RequestForKey(a.key).MaxVersion() {
		panic(fmt.Sprintf("api key %d v%d is beyond what kmsg decodes", a.key, a.max))
	}
	apis[a.key] = &a
}

// sortedAPIs lists the table in key order.
func sortedAPIs() []*api {
	out := make([]*api, 0, len(apis))
	for _, a := range apis {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// Pipelined implements server.Pipeliner: produce requests may overlap on
// a connection, since each partition's mailbox appends them in arrival
// order and an answer waits for its fsync anyway; every other request
// waits until the one before it is answered (Apache's order).
func (b *Broker) Pipelined(key int16) bool { return key == 0 }

// Supports implements server.Handler.
func (b *Broker) Supports(key, version int16) (known, supported bool) {
	a, ok := apis[key]
	if !ok || (a.single && b.cluster != nil) {
		return false, false
	}
	return true, version >= a.min && version <= a.max
}

// UnsupportedVersion implements server.Handler: ApiVersions answers at v0
// with UNSUPPORTED_VERSION and the supported list (KIP-511); Apache closes
// the connection for any other API.
func (b *Broker) UnsupportedVersion(h wire.Header) kmsg.Response {
	if h.Key != wire.ApiVersionsKey {
		return nil
	}
	resp := b.apiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

// Serve implements server.Handler. It runs on the connection's event
// loop, which must never wait on the disk or on a lock held across disk
// I/O (every connection on the loop would wait): handlers that may are
// marked blocking and run on a goroutine of their own, the others answer
// from memory or hand the call to actors. Tests check it (diskcheck), and
// kaas_event_loop_serve_seconds shows it.
func (b *Broker) Serve(c *server.Call) {
	done := diskcheck.OnLoop()
	defer done()
	s := c.Session()
	if s.Authenticated() && !b.sec.SessionLive(c) {
		return
	}
	if !s.Authenticated() && !b.sec.PreAuth(c) {
		return
	}
	a := apis[c.Key]
	if a.blocking {
		release := c.Hold()
		go func() {
			defer release()
			b.run(a, c)
		}()
		return
	}
	b.run(a, c)
}

func (b *Broker) run(a *api, c *server.Call) {
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("handler panicked; answering UNKNOWN_SERVER_ERROR",
				"key", c.Key, "version", c.Version, "client", c.ClientID, "remote", c.Remote,
				"panic", r, "stack", string(debug.Stack()))
			if !c.Settled() {
				c.Reply(a.fail(c.Request, kerr.UnknownServerError.Code))
			}
		}
	}()
	start := time.Now()
	resp := a.serve(b, c)
	b.chargeRequest(c, time.Since(start))
	if resp != nil {
		c.Reply(resp)
	}
}
