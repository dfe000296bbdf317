package txn

// Ports of the KIP-360 seed's store tests (seed 000_0adb7066508d56af,
// "How it's verified": txn_state.rs), at the level of the coordinator and
// its transactional.id actors: a real slot store on a temporary directory,
// a counting PID allocator, and a fencer and marker writer that record
// what the coordinator asks of them.

import (
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/actors/txnwriter"
	"kaas/messages"
	"kaas/metrics"
	"kaas/model"
	"kaas/model/txnstate"
	"kaas/storage/durable"
	"kaas/storage/txnlog"
)

const (
	testID      = "t"
	testPID     = int64(1000)
	firstNewPID = int64(5000)
)

// event is one thing the coordinator did outside itself, in order.
type event struct {
	kind   string // "fence" or "marker"
	pid    int64
	epoch  int16
	commit bool
	tp     model.TopicPartition
}

// harness runs a Coordinator against recording fakes.
type harness struct {
	t       *testing.T
	sys     *system.System
	store   *txnlog.Store
	c       *Coordinator
	metrics *metrics.Metrics

	mu          sync.Mutex
	events      []event
	nextPID     int64
	allocations int
	holdMarkers bool
	held        []func()
}

func newHarness(t *testing.T, abortInterval time.Duration, seed ...txnstate.Entry) *harness {
	t.Helper()
	return newHarnessWith(t, Config{AbortInterval: abortInterval}, nil, seed...)
}

// newHarnessWith takes the coordinator's timings from cfg and, if wrap is
// set, puts it between the coordinator and the store.
func newHarnessWith(t *testing.T, cfg Config, wrap func(Store) Store, seed ...txnstate.Entry) *harness {
	t.Helper()
	h := &harness{t: t, nextPID: firstNewPID, metrics: metrics.New()}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	dir := t.TempDir()
	if h.store, err = txnlog.Open(durable.Env{DataDir: dir, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	for _, e := range seed {
		if err := h.store.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	h.sys = system.New(logger)
	writer, err := txnwriter.Start(h.sys, h.store, nil, logger, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.PIDs, cfg.Fencer, cfg.Markers, cfg.Metrics, cfg.Logger = writer, h, h, h, h.metrics, logger
	if wrap != nil {
		cfg.Store = wrap(writer)
	}
	h.c = New(h.sys, cfg)
	h.c.Start()
	t.Cleanup(func() {
		h.release()
		h.c.Stop()
		writer.Stop()
		h.sys.Shutdown()
	})
	return h
}

// Next is the PID allocator.
func (h *harness) Next() (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.allocations++
	h.nextPID++
	return h.nextPID - 1, nil
}

// Fence is the fence broadcaster: it records and succeeds.
func (h *harness) Fence(pid int64, epoch int16, done func(error)) {
	h.mu.Lock()
	h.events = append(h.events, event{kind: "fence", pid: pid, epoch: epoch})
	h.mu.Unlock()
	done(nil)
}

// WriteMarker records the marker and answers NONE, at once or on release.
func (h *harness) WriteMarker(tp model.TopicPartition, m *messages.WriteMarker) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, event{kind: "marker", pid: m.ProducerID, epoch: m.ProducerEpoch, commit: m.Commit, tp: tp})
	if h.holdMarkers {
		h.held = append(h.held, func() { m.Reply(0) })
		return true
	}
	go m.Reply(0)
	return true
}

func (h *harness) CompleteTxnOffsets(_ int64, _ int16, _ bool, _ []string, _ []int32, done func(int16)) {
	done(0)
}

// release answers every held marker and stops holding.
func (h *harness) release() {
	h.mu.Lock()
	held := h.held
	h.held, h.holdMarkers = nil, false
	h.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (h *harness) eventsSoFar() []event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]event(nil), h.events...)
}

func (h *harness) fences() []event {
	var out []event
	for _, e := range h.eventsSoFar() {
		if e.kind == "fence" {
			out = append(out, e)
		}
	}
	return out
}

type ipiAnswer struct {
	code  int16
	pid   int64
	epoch int16
}

// ipi sends InitProducerId for t; claim nil means no claim.
func (h *harness) ipi(claim *[2]int64) ipiAnswer {
	h.t.Helper()
	out := make(chan ipiAnswer, 1)
	m := &messages.InitProducerID{TimeoutMs: 60000, Reply: func(code int16, pid int64, epoch int16) { out <- ipiAnswer{code, pid, epoch} }}
	if claim != nil {
		m.HasClaim, m.ProducerID, m.ProducerEpoch = true, claim[0], int16(claim[1])
	}
	h.c.InitProducerID(testID, m)
	return h.await(out)
}

func (h *harness) await(out chan ipiAnswer) ipiAnswer {
	h.t.Helper()
	select {
	case a := <-out:
		return a
	case <-time.After(10 * time.Second):
		h.t.Fatal("no answer from the coordinator")
		return ipiAnswer{}
	}
}

func claim(pid int64, epoch int16) *[2]int64 { return &[2]int64{pid, int64(epoch)} }

func (h *harness) wantIPI(what string, got ipiAnswer, code int16, pid int64, epoch int16) {
	h.t.Helper()
	if got != (ipiAnswer{code, pid, epoch}) {
		h.t.Fatalf("%s: code %d (%d,%d), want code %d (%d,%d)", what, got.code, got.pid, got.epoch, code, pid, epoch)
	}
}

// wantEntry asserts the persisted ⟨pid, epoch, lastPid, lastEpoch, state⟩.
// wantEntry waits for the durable entry to be the one given: a Complete*
// write is not waited for by the answer before it (txncoord's complete).
func (h *harness) wantEntry(pid int64, epoch int16, lastPid int64, lastEpoch int16, state txnstate.State) txnstate.Entry {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	e, ok := h.store.Get(testID)
	for (!ok || e.ProducerID != pid || e.Epoch != epoch || e.LastProducerID != lastPid || e.LastEpoch != lastEpoch || e.State != state) &&
		time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
		e, ok = h.store.Get(testID)
	}
	if !ok || e.ProducerID != pid || e.Epoch != epoch || e.LastProducerID != lastPid || e.LastEpoch != lastEpoch || e.State != state {
		h.t.Fatalf("entry ⟨%d,%d,%d,%d,%s⟩ (exists %v), want ⟨%d,%d,%d,%d,%s⟩", e.ProducerID, e.Epoch, e.LastProducerID, e.LastEpoch, e.State, ok,
			pid, epoch, lastPid, lastEpoch, state)
	}
	return e
}

func (h *harness) waitState(state txnstate.State) txnstate.Entry {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if e, _ := h.store.Get(testID); e.State == state {
			return e
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("entry never reached %s", state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func entry(epoch, lastEpoch int16, state txnstate.State, tps ...model.TopicPartition) txnstate.Entry {
	e := txnstate.Entry{TransactionalID: testID, ProducerID: testPID, Epoch: epoch, LastProducerID: testPID, LastEpoch: lastEpoch,
		TimeoutMs: 60000, State: state, Partitions: tps, TxnStartMs: -1}
	if state == txnstate.Ongoing {
		e.TxnStartMs = time.Now().UnixMilli()
	}
	return e
}

var (
	tpA0 = model.TopicPartition{Topic: "a", Partition: 0}
	tpA1 = model.TopicPartition{Topic: "a", Partition: 1}
)

// epoch_overflow_rotates_to_fresh_pid (R-IPI-12)
func TestEpochOverflowRotatesToFreshPID(t *testing.T) {
	h := newHarness(t, 0, entry(32766, -1, txnstate.CompleteCommit))
	h.wantIPI("IPI at the exhausted epoch", h.ipi(nil), 0, firstNewPID, 0)
	h.wantEntry(firstNewPID, 0, testPID, -1, txnstate.Empty)
	if f := h.fences(); len(f) != 0 {
		t.Fatalf("a rotation (epoch 0) fenced %v", f)
	}
	h.wantIPI("next IPI", h.ipi(nil), 0, firstNewPID, 1)
}

// epoch_exhaustion_rotates_one_short_of_max (R-IPI-12): 32766 is the
// last epoch handed out; 32767 is kept back for fencing.
func TestEpochExhaustionRotatesOneShortOfMax(t *testing.T) {
	h := newHarness(t, 0, entry(32764, -1, txnstate.Empty))
	h.wantIPI("bump to 32765", h.ipi(nil), 0, testPID, 32765)
	h.wantIPI("bump to 32766", h.ipi(nil), 0, testPID, 32766)
	h.wantIPI("rotation", h.ipi(nil), 0, firstNewPID, 0)
	want := []event{{kind: "fence", pid: testPID, epoch: 32765}, {kind: "fence", pid: testPID, epoch: 32766}}
	if got := h.fences(); !reflect.DeepEqual(got, want) {
		t.Fatalf("fences %v, want %v", got, want)
	}
}

// a_claimed_bump_is_retry_safe (R-IPI-11, R-IPI-13)
func TestAClaimedBumpIsRetrySafe(t *testing.T) {
	h := newHarness(t, 0, entry(3, -1, txnstate.CompleteAbort))
	h.wantIPI("claim (P,3)", h.ipi(claim(testPID, 3)), 0, testPID, 4)
	first := h.wantEntry(testPID, 4, testPID, 3, txnstate.Empty)
	h.wantIPI("retried claim (P,3)", h.ipi(claim(testPID, 3)), 0, testPID, 4)
	second := h.wantEntry(testPID, 4, testPID, 3, txnstate.Empty)
	first.LastUpdateMs, second.LastUpdateMs = 0, 0
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("the retry changed the entry: %+v → %+v", first, second)
	}
	// Both answers were fenced before they went out (the retry's fence is
	// idempotent downstream).
	want := []event{{kind: "fence", pid: testPID, epoch: 4}, {kind: "fence", pid: testPID, epoch: 4}}
	if got := h.fences(); !reflect.DeepEqual(got, want) {
		t.Fatalf("fences %v, want %v", got, want)
	}
}

// a_stale_claim_is_fenced_not_bumped (R-IPI-11)
func TestAStaleClaimIsFencedNotBumped(t *testing.T) {
	h := newHarness(t, 0, entry(4, 3, txnstate.Empty))
	before, _ := h.store.Get(testID)
	for _, ep := range []int16{2, 5, 0} {
		h.wantIPI(fmt.Sprintf("claim (P,%d)", ep), h.ipi(claim(testPID, ep)), kerr.ProducerFenced.Code, -1, -1)
	}
	after, _ := h.store.Get(testID)
	if !reflect.DeepEqual(before, after) || len(h.fences()) != 0 {
		t.Fatalf("a stale claim changed the entry (%+v → %+v) or fenced %v", before, after, h.fences())
	}
}

// a_retried_rotation_gets_the_same_answer (R-IPI-8c, R-IPI-12)
func TestARetriedRotationGetsTheSameAnswer(t *testing.T) {
	h := newHarness(t, 0, entry(32766, 32765, txnstate.CompleteAbort))
	h.wantIPI("claimed rotation", h.ipi(claim(testPID, 32766)), 0, firstNewPID, 0)
	h.wantEntry(firstNewPID, 0, testPID, 32766, txnstate.Empty)
	h.wantIPI("its retry", h.ipi(claim(testPID, 32766)), 0, firstNewPID, 0)
	h.mu.Lock()
	allocations := h.allocations
	h.mu.Unlock()
	if allocations != 1 {
		t.Fatalf("%d PIDs allocated, want 1 (the retry reuses the rotation)", allocations)
	}
}

// the_pre_rotation_pid_is_stale_once_the_new_session_moves (R-IPI-8)
func TestThePreRotationPIDIsStaleOnceTheNewSessionMoves(t *testing.T) {
	h := newHarness(t, 0, entry(32766, 32765, txnstate.CompleteAbort))
	m := h.ipi(claim(testPID, 32766)).pid
	h.wantIPI("the new session bumps", h.ipi(claim(m, 0)), 0, m, 1)
	h.wantEntry(m, 1, m, 0, txnstate.Empty)
	h.wantIPI("the pre-rotation claim", h.ipi(claim(testPID, 32766)), kerr.ProducerFenced.Code, -1, -1)
	h.wantEntry(m, 1, m, 0, txnstate.Empty)
}

// a_rejoin_mid_ongoing_prepares_an_abort_at_a_bumped_epoch (R-IPI-10,
// R-FEN-3): PrepareAbort at epoch + 1 with the partitions intact, the
// fence before any marker, ABORT markers at the fence epoch.
func TestARejoinMidOngoingPreparesAnAbortAtABumpedEpoch(t *testing.T) {
	seed := entry(5, 4, txnstate.Ongoing, tpA0, tpA1)
	h := newHarness(t, 0, seed)
	h.mu.Lock()
	h.holdMarkers = true
	h.mu.Unlock()

	out := make(chan ipiAnswer, 1)
	h.c.InitProducerID(testID, &messages.InitProducerID{TimeoutMs: 60000, Reply: func(code int16, pid int64, epoch int16) { out <- ipiAnswer{code, pid, epoch} }})
	prepared := h.waitState(txnstate.PrepareAbort)
	if prepared.ProducerID != testPID || prepared.Epoch != 6 || prepared.LastEpoch != -1 ||
		!reflect.DeepEqual(prepared.Partitions, seed.Partitions) || prepared.TxnStartMs != seed.TxnStartMs || prepared.TimeoutMs != seed.TimeoutMs {
		t.Fatalf("prepared %+v, want ⟨P,6,P,-1,PrepareAbort,{a-0,a-1}⟩ with the start time and timeout kept", prepared)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(h.eventsSoFar()) < 3 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	events := h.eventsSoFar()
	if len(events) != 3 || events[0] != (event{kind: "fence", pid: testPID, epoch: 6}) {
		t.Fatalf("events %+v, want the fence (P,6) first, then two markers", events)
	}
	for _, e := range events[1:] {
		if e.kind != "marker" || e.pid != testPID || e.epoch != 6 || e.commit {
			t.Fatalf("marker %+v, want ABORT at epoch 6", e)
		}
	}
	select {
	case a := <-out:
		t.Fatalf("answered %+v before the markers landed", a)
	default:
	}
	h.release()
	h.wantIPI("rejoin", h.await(out), kerr.ConcurrentTransactions.Code, -1, -1)
	done := h.wantEntry(testPID, 6, testPID, -1, txnstate.CompleteAbort)
	if len(done.Partitions) != 0 {
		t.Fatalf("CompleteAbort keeps partitions %v", done.Partitions)
	}
	h.wantIPI("retry", h.ipi(nil), 0, testPID, 7)
}

// epoch_mismatch_fences (R-TXN-4, R-TXN-7): transaction APIs with another
// epoch than the entry's are PRODUCER_FENCED; another PID is
// INVALID_PRODUCER_ID_MAPPING. Nothing changes.
func TestEpochMismatchFences(t *testing.T) {
	h := newHarness(t, 0, entry(5, 4, txnstate.Ongoing, tpA0))
	before, _ := h.store.Get(testID)
	for _, tc := range []struct {
		pid   int64
		epoch int16
		code  int16
	}{
		{testPID, 4, kerr.ProducerFenced.Code},
		{testPID, 6, kerr.ProducerFenced.Code},
		{testPID + 1, 5, kerr.InvalidProducerIDMapping.Code},
	} {
		codes := make(chan int16, 2)
		h.c.AddPartitions(testID, &messages.AddPartitionsToTxn{ProducerID: tc.pid, ProducerEpoch: tc.epoch,
			Partitions: []model.TopicPartition{tpA1}, Reply: func(code int16, _ []int16) { codes <- code }})
		h.c.EndTxn(testID, &messages.EndTxn{ProducerID: tc.pid, ProducerEpoch: tc.epoch, Commit: true, Reply: func(code int16, _ int64, _ int16) { codes <- code }})
		for _, api := range []string{"AddPartitionsToTxn", "EndTxn"} {
			select {
			case code := <-codes:
				if code != tc.code {
					t.Fatalf("%s (%d,%d): code %d, want %d", api, tc.pid, tc.epoch, code, tc.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no answer", api)
			}
		}
	}
	after, _ := h.store.Get(testID)
	if !reflect.DeepEqual(before, after) || len(h.eventsSoFar()) != 0 {
		t.Fatalf("a fenced request changed the entry (%+v → %+v) or sent %v", before, after, h.eventsSoFar())
	}
}

// reaper_aborts_overdue_bumps_epoch_fires_hook (R-TXN-9, R-FEN-1)
func TestReaperAbortsOverdueBumpsEpochFiresHook(t *testing.T) {
	overdue := entry(2, 1, txnstate.Ongoing, tpA0)
	overdue.TimeoutMs, overdue.TxnStartMs = 1000, time.Now().Add(-10*time.Second).UnixMilli()
	h := newHarness(t, 20*time.Millisecond, overdue)
	h.waitState(txnstate.CompleteAbort)
	h.wantEntry(testPID, 3, testPID, -1, txnstate.CompleteAbort)
	want := []event{{kind: "fence", pid: testPID, epoch: 3}, {kind: "marker", pid: testPID, epoch: 3, tp: tpA0}}
	if got := h.eventsSoFar(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	h.wantIPI("the old producer's claim", h.ipi(claim(testPID, 2)), kerr.ProducerFenced.Code, -1, -1)
	h.wantIPI("a new session", h.ipi(nil), 0, testPID, 4)
}

// expired_ids_are_deleted (R-IPI-15): the sweep hands an expired entry to
// its actor, which deletes it; the id then starts afresh.
func TestExpiredIDsAreDeleted(t *testing.T) {
	old := entry(4, 3, txnstate.CompleteCommit)
	old.LastUpdateMs = time.Now().Add(-8 * 24 * time.Hour).UnixMilli()
	h := newHarness(t, 0, old)
	h.c.expire(time.Now())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := h.store.Get(testID); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired entry was never deleted")
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.wantIPI("a new session", h.ipi(claim(testPID, 4)), 0, firstNewPID, 0)
}

// idle_actors_passivate: an actor with no work for IdleActor and a stable
// entry stops; the id's next request spawns a fresh one from the store.
func TestIdleActorsPassivate(t *testing.T) {
	h := newHarnessWith(t, Config{AbortInterval: 5 * time.Millisecond, IdleActor: 20 * time.Millisecond}, nil, entry(3, -1, txnstate.Empty))
	h.wantIPI("bump", h.ipi(nil), 0, testPID, 4)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, live := h.sys.Lookup("txn/" + testID); !live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle actor never passivated")
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.wantIPI("bump after passivation", h.ipi(nil), 0, testPID, 5)
	h.wantEntry(testPID, 5, testPID, -1, txnstate.Empty)
}

// an_ongoing_transaction_keeps_its_actor: passivation never stops an
// actor whose entry the reaper must watch.
func TestAnOngoingTransactionKeepsItsActor(t *testing.T) {
	h := newHarnessWith(t, Config{AbortInterval: 5 * time.Millisecond, IdleActor: time.Millisecond}, nil, entry(3, -1, txnstate.Ongoing, tpA0))
	if _, live := h.sys.Lookup("txn/" + testID); !live {
		t.Fatal("no actor for the Ongoing entry at start")
	}
	info, _ := h.sys.Lookup("txn/" + testID)
	deadline := time.Now().Add(10 * time.Second)
	for info.Mailbox.Processed() < 20 {
		if time.Now().After(deadline) {
			t.Fatal("the reaper timer is not running")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, live := h.sys.Lookup("txn/" + testID); !live {
		t.Fatal("an actor with an Ongoing transaction passivated")
	}
}
