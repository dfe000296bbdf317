package clientmetrics

import (
	"container/list"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"sync"
)

// Compression types a push may use (ClientMetricsManager's
// SUPPORTED_COMPRESSION_TYPES, in its order), and none.
var AcceptedCompression = []int8{4, 3, 1, 2} // zstd, lz4, gzip, snappy

// Bounds on what the broker keeps.
const (
	// MaxInstances is Apache's CACHE_MAX_SIZE: the least recently seen
	// client instance goes beyond it.
	MaxInstances = 16384
	// ExpiryMs is Apache's DEFAULT_CACHE_EXPIRY_MS: an instance not seen
	// for max(this, 3 push intervals) is forgotten, with its series.
	ExpiryMs = 60 * 1000
)

// UUID is a client instance id.
type UUID [16]byte

// String is Kafka's Uuid.toString: URL-safe base64 without padding.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// reserved: the zero id and the metadata topic's (Uuid.RESERVED).
func (u UUID) reserved() bool {
	var metadata UUID
	metadata[15] = 1
	return u == UUID{} || u == metadata
}

// javaHash is Uuid.hashCode.
func (u UUID) javaHash() int32 {
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(u[i])
		lo = lo<<8 | uint64(u[8+i])
	}
	h := hi ^ lo
	return int32(h>>32) ^ int32(h)
}

// Instance is one client instance the broker tracks (ClientMetricsInstance).
type Instance struct {
	ID             UUID
	Client         Client
	Principal      string
	SubscriptionID int32
	Metrics        []string
	IntervalMs     int

	version     int // of the subscriptions it was computed from
	lastGet     int64
	lastPush    int64
	terminating bool
	seen        int64
	elem        *list.Element
	// Series are the metrics it last pushed.
	Series []Series
}

// Manager tracks subscriptions and client instances. Safe for
// concurrent use; nothing under its mutex but arithmetic.
type Manager struct {
	mu        sync.Mutex
	subs      map[string]Subscription
	version   int
	instances map[UUID]*Instance
	lru       *list.List // of *Instance, most recent at the front
	maxBytes  int
	series    int   // kept, every instance's together (≤ MaxSeries)
	dropped   int64 // series a push carried that were not kept
}

// NewManager makes a manager that accepts pushes of up to maxBytes.
func NewManager(maxBytes int) *Manager {
	return &Manager{subs: map[string]Subscription{}, instances: map[UUID]*Instance{}, lru: list.New(), maxBytes: maxBytes}
}

// SetSubscriptions replaces every subscription; instances re-evaluate
// theirs on their next request.
func (m *Manager) SetSubscriptions(subs map[string]Subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = subs
	m.version++
}

// Names lists the subscriptions (ListConfigResources).
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.subs))
	for n := range m.subs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Codes a request can fail with (Kafka error codes).
const (
	codeInvalidRequest          int16 = 42
	codeThrottlingQuotaExceeded int16 = 89
	codeUnknownSubscriptionID   int16 = 117
	codeTelemetryTooLarge       int16 = 118
	codeInvalidRecord           int16 = 87
	codeUnsupportedCompression  int16 = 76
)

// Refusal is a request refused with a Kafka error code and Apache's message.
type Refusal struct {
	Code int16
	Msg  string
}

func (r *Refusal) Error() string { return r.Msg }

// Subscribed is a GetTelemetrySubscriptions answer.
type Subscribed struct {
	ID             UUID
	SubscriptionID int32
	Metrics        []string
	IntervalMs     int
}

// Get answers GetTelemetrySubscriptions for id (zero: a new client) at now.
func (m *Manager) Get(id UUID, c Client, principal string, now int64) (Subscribed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	asked := id
	if id == (UUID{}) {
		id = m.newID()
	}
	in := m.instance(id, c, principal, now)
	// Apache's check also means to let a client whose last push failed
	// with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE ask
	// again at once, but its condition is always true: every request
	// before the push interval is throttled. So is kaas's.
	if now-max(in.lastGet, in.lastPush) < int64(in.IntervalMs) {
		return Subscribed{}, &Refusal{codeThrottlingQuotaExceeded,
			fmt.Sprintf("Request from the client [%s] arrived before the next push interval time", asked)}
	}
	in.lastGet = now
	return Subscribed{ID: id, SubscriptionID: in.SubscriptionID, Metrics: in.Metrics, IntervalMs: in.IntervalMs}, nil
}

// Push is one PushTelemetry request.
type Push struct {
	ID             UUID
	SubscriptionID int32
	Terminating    bool
	Compression    int8
	Metrics        []byte
}

// Push checks a push as Apache's validatePushRequest, in its order, and
// keeps the decoded series (decode turns the payload into them; its error
// is INVALID_RECORD).
func (m *Manager) Push(p Push, c Client, principal string, now int64, decode func([]byte, int8) ([]Series, int, error)) error {
	if p.ID.reserved() {
		return &Refusal{codeInvalidRequest, fmt.Sprintf("Invalid request from the client [%s], invalid client instance id", p.ID)}
	}
	m.mu.Lock()
	in := m.instance(p.ID, c, principal, now)
	err := m.checkPush(in, p, now)
	in.terminating = in.terminating || p.Terminating
	m.mu.Unlock()
	if err != nil || len(p.Metrics) == 0 {
		return err
	}
	series, dropped, derr := decode(p.Metrics, p.Compression)
	if derr != nil {
		return &Refusal{codeInvalidRecord, "Invalid telemetry payload: " + derr.Error()}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropped += int64(dropped)
	if cur := m.instances[p.ID]; cur != nil {
		m.series -= len(cur.Series)
		if room := MaxSeries - m.series; len(series) > room {
			m.dropped += int64(len(series) - room)
			series = series[:room]
		}
		cur.Series = series
		m.series += len(series)
	}
	return nil
}

// Dropped counts the series pushes carried that were not kept (over a
// bound, or of a kind not exported).
func (m *Manager) Dropped() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

func (m *Manager) checkPush(in *Instance, p Push, now int64) error {
	if in.terminating {
		return &Refusal{codeInvalidRequest, fmt.Sprintf("Client [%s] sent the previous request with state terminating to TRUE, can not accept"+
			"any requests after that", p.ID)}
	}
	// A push right after a Get is accepted whatever the interval: the
	// client jitters its first push (0.5 to 1.5 intervals).
	accept := in.lastGet > in.lastPush || now-in.lastPush >= int64(in.IntervalMs)
	if accept {
		in.lastPush = now
	} else if !p.Terminating {
		return &Refusal{codeThrottlingQuotaExceeded, fmt.Sprintf("Request from the client [%s] arrived before the next push interval time", p.ID)}
	}
	if p.SubscriptionID != in.SubscriptionID {
		return &Refusal{codeUnknownSubscriptionID, fmt.Sprintf("Unknown client subscription id for the client [%s]", p.ID)}
	}
	if p.Compression < 0 || p.Compression > 4 {
		return &Refusal{codeUnsupportedCompression, fmt.Sprintf("Unknown compression type [%d] is received in telemetry request from [%s]", p.Compression, p.ID)}
	}
	if len(p.Metrics) > m.maxBytes {
		return &Refusal{codeTelemetryTooLarge, fmt.Sprintf("Telemetry request from [%s] is larger than the maximum allowed size [%d]", p.ID, m.maxBytes)}
	}
	return nil
}

// instance finds or makes id's instance, re-evaluating its subscription
// if the subscriptions changed, and marks it seen. m.mu is held.
func (m *Manager) instance(id UUID, c Client, principal string, now int64) *Instance {
	in := m.instances[id]
	if in == nil {
		c.InstanceID = id.String()
		c.ClientID, c.SoftwareName, c.SoftwareVersion = Truncate(c.ClientID), Truncate(c.SoftwareName), Truncate(c.SoftwareVersion)
		principal = Truncate(principal)
		in = &Instance{ID: id, Client: c, Principal: principal}
		m.subscribe(in)
		in.elem = m.lru.PushFront(in)
		m.instances[id] = in
		for m.lru.Len() > MaxInstances {
			m.drop(m.lru.Back().Value.(*Instance))
		}
	} else if in.version < m.version {
		m.subscribe(in)
	}
	in.seen = now
	m.lru.MoveToFront(in.elem)
	return in
}

// subscribe computes in's subscription from every matching one
// (createClientInstance): the union of their metrics ("*" alone if any
// asks for all), the shortest interval.
func (m *Manager) subscribe(in *Instance) {
	set := map[string]bool{}
	interval, all := DefaultIntervalMs, false
	for _, s := range m.subs {
		if !s.Matches(in.Client) {
			continue
		}
		for _, name := range s.Metrics {
			set[name] = true
			all = all || name == AllMetrics
		}
		interval = min(interval, s.IntervalMs)
	}
	var metrics []string
	if all {
		metrics = []string{AllMetrics}
	} else {
		for n := range set {
			metrics = append(metrics, n)
		}
		sort.Strings(metrics)
	}
	in.Metrics, in.IntervalMs, in.version = metrics, interval, m.version
	// computeSubscriptionId: CRC32C of the metric set's string and the
	// interval, xor the instance id's hash.
	b := []byte("[" + strings.Join(metrics, ", ") + "]" + fmt.Sprint(interval))
	in.SubscriptionID = int32(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))) ^ in.ID.javaHash()
}

func (m *Manager) drop(in *Instance) {
	m.series -= len(in.Series)
	m.lru.Remove(in.elem)
	delete(m.instances, in.ID)
}

func (m *Manager) newID() UUID {
	for {
		var u UUID
		_, _ = rand.Read(u[:])
		if !u.reserved() && m.instances[u] == nil {
			return u
		}
	}
}

// Expire forgets the instances not seen for max(ExpiryMs, 3 intervals).
func (m *Manager) Expire(now int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for e := m.lru.Back(); e != nil; {
		prev := e.Prev()
		in := e.Value.(*Instance)
		if now-in.seen >= max(ExpiryMs, 3*int64(in.IntervalMs)) {
			m.drop(in)
			n++
		}
		e = prev
	}
	return n
}

// Each calls fn for every instance, most recently seen first; fn must
// not keep the instance.
func (m *Manager) Each(fn func(*Instance)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for e := m.lru.Front(); e != nil; e = e.Next() {
		fn(e.Value.(*Instance))
	}
}

// Len is the number of instances tracked.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.instances)
}
