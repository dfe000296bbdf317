package consumergroup

import (
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/offsetlog"
)

// fakeEnv is a manual clock, timers that fire only when the test advances
// it, and a log whose appends complete only when the test flushes them.
type fakeEnv struct {
	t          *testing.T
	now        time.Time
	timers     []*fakeTimer
	persisted  []offsetlog.Entry // entries flushed, in order
	queued     []queuedPersist
	seq        uint64
	failWith   int16 // next flush fails entries with this code
	rebalances int
	g          *Group
	topics     fakeTopics
}

// fakeTopics is a topics image the test edits.
type fakeTopics struct {
	byName  map[string]fakeTopic
	version int64
}

type fakeTopic struct {
	id         TopicID
	partitions int32
}

func (f *fakeTopics) ByName(name string) (TopicID, int32, bool) {
	t, ok := f.byName[name]
	return t.id, t.partitions, ok
}

func (f *fakeTopics) ByID(id TopicID) (string, bool) {
	for name, t := range f.byName {
		if t.id == id {
			return name, true
		}
	}
	return "", false
}

func (f *fakeTopics) Names() []string {
	out := make([]string, 0, len(f.byName))
	for name := range f.byName {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func (f *fakeTopics) Version() int64 { return f.version }

// addTopic creates (or grows) a topic; its id is derived from its name.
func (f *fakeEnv) addTopic(name string, partitions int32) TopicID {
	if f.topics.byName == nil {
		f.topics.byName = map[string]fakeTopic{}
	}
	var id TopicID
	copy(id[:], name)
	id[15] = byte(len(name))
	f.topics.byName[name] = fakeTopic{id: id, partitions: partitions}
	f.topics.version++
	return id
}

type fakeTimer struct {
	at        time.Time
	timer     Timer
	cancelled bool
}

type queuedPersist struct {
	e    offsetlog.Entry
	done func(int16, uint64)
}

func newEnv(t *testing.T) *fakeEnv {
	return &fakeEnv{t: t, now: time.Unix(1_700_000_000, 0), seq: 1}
}

func (f *fakeEnv) Now() time.Time { return f.now }

func (f *fakeEnv) Schedule(d time.Duration, t Timer) func() {
	ft := &fakeTimer{at: f.now.Add(d), timer: t}
	f.timers = append(f.timers, ft)
	return func() { ft.cancelled = true }
}

func (f *fakeEnv) Persist(e offsetlog.Entry, done func(int16, uint64)) {
	f.queued = append(f.queued, queuedPersist{e, done})
}

func (f *fakeEnv) RebalanceStarted() { f.rebalances++ }

func (f *fakeEnv) Topics() TopicsImage { return &f.topics }

// flush completes every queued append (including ones queued by the
// completions themselves).
func (f *fakeEnv) flush() {
	for len(f.queued) > 0 {
		q := f.queued[0]
		f.queued = f.queued[1:]
		if f.failWith != 0 {
			q.done(f.failWith, 0)
			continue
		}
		first := f.seq
		f.seq += uint64(max(len(q.e.Records), 1))
		f.persisted = append(f.persisted, q.e)
		q.done(0, first)
	}
}

// advance moves the clock by d, firing due timers in deadline order and
// flushing the log after each.
func (f *fakeEnv) advance(d time.Duration) {
	end := f.now.Add(d)
	for {
		f.flush()
		var next *fakeTimer
		for _, ft := range f.timers {
			if !ft.cancelled && !ft.at.After(end) && (next == nil || ft.at.Before(next.at)) {
				next = ft
			}
		}
		if next == nil {
			break
		}
		next.cancelled = true
		if next.at.After(f.now) {
			f.now = next.at
		}
		f.g.Fire(next.timer)
	}
	f.now = end
	f.flush()
}

func newGroup(t *testing.T, cfg Config) (*Group, *fakeEnv) {
	env := newEnv(t)
	g := New("g", cfg, env, slog.New(slog.DiscardHandler))
	env.g = g
	return g, env
}

func testConfig() Config {
	c := DefaultConfig()
	c.MinSessionTimeout = time.Millisecond
	c.InitialRebalanceDelay = 100 * time.Millisecond
	return c
}

// consumerMeta is a consumer protocol subscription to topics.
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(member string, topics ...string) JoinRequest {
	return JoinRequest{
		MemberID: member, ProtocolType: ConsumerProtocolType,
		Protocols:        []Protocol{{Name: "range", Metadata: consumerMeta(topics...)}},
		SessionTimeoutMs: 10_000, RebalanceTimeoutMs: 30_000, ClientID: "c", ClientHost: "/127.0.0.1",
	}
}

// pendingJoin collects a JoinGroup answer that may come later.
type pendingJoin struct {
	res *JoinResult
	n   int
}

func (p *pendingJoin) reply(r JoinResult) { p.n++; p.res = &r }

func (g *Group) joinAsync(r JoinRequest) *pendingJoin {
	p := &pendingJoin{}
	g.Join(r, p.reply)
	return p
}

type pendingSync struct {
	res *SyncResult
	n   int
}

func (p *pendingSync) reply(r SyncResult) { p.n++; p.res = &r }

func (g *Group) syncAsync(r SyncRequest) *pendingSync {
	p := &pendingSync{}
	g.Sync(r, p.reply)
	return p
}

func mustJoined(t *testing.T, p *pendingJoin) JoinResult {
	t.Helper()
	if p.res == nil {
		t.Fatal("JoinGroup not answered")
	}
	if p.n != 1 {
		t.Fatalf("JoinGroup answered %d times", p.n)
	}
	return *p.res
}

// formGroup brings n dynamic members through a first rebalance to Stable
// and returns their member ids (leader first).
func formGroup(t *testing.T, g *Group, env *fakeEnv, n int, topics ...string) []string {
	t.Helper()
	var joins []*pendingJoin
	for i := 0; i < n; i++ {
		joins = append(joins, g.joinAsync(joinReq("", topics...)))
	}
	env.advance(time.Second)
	var ids []string
	var leader string
	for _, p := range joins {
		r := mustJoined(t, p)
		if r.Err != 0 {
			t.Fatalf("join: error %d", r.Err)
		}
		ids = append(ids, r.MemberID)
		leader = r.Leader
	}
	sort.SliceStable(ids, func(i, j int) bool { return ids[i] == leader && ids[j] != leader })
	syncAll(t, g, env, ids)
	return ids
}

// syncAll sends SyncGroup for every member (the leader's assigns each
// member its own id as bytes) and checks everyone gets its assignment.
func syncAll(t *testing.T, g *Group, env *fakeEnv, ids []string) {
	t.Helper()
	plan := map[string][]byte{}
	for _, id := range ids {
		plan[id] = []byte("assign:" + id)
	}
	var syncs []*pendingSync
	for _, id := range ids {
		r := SyncRequest{MemberID: id, Generation: g.Generation()}
		if g.isLeader(id) {
			r.Assignments = plan
		}
		syncs = append(syncs, g.syncAsync(r))
	}
	env.flush()
	for i, p := range syncs {
		if p.res == nil || p.res.Err != 0 {
			t.Fatalf("sync %s: %+v", ids[i], p.res)
		}
		if string(p.res.Assignment) != "assign:"+ids[i] {
			t.Fatalf("sync %s got assignment %q", ids[i], p.res.Assignment)
		}
	}
	if g.State() != Stable {
		t.Fatalf("state after sync = %s", g.State())
	}
}
