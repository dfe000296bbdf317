package broker

// Test helpers for the transaction / KIP-360 scenario suite (spec
// scenarios.md): a broker started per test on 127.0.0.1:0 with a temporary
// data directory and topic `a` (3 partitions), a raw wire client that sends
// each request at exactly the version a scenario names (kgo would
// renegotiate it), and a record batch builder that sets producer id,
// epoch, sequence, count and the transactional bit byte for byte.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
	"kaas/model/slots"
	"kaas/model/txnstate"
	"kaas/storage/durable"
	"kaas/storage/fencelog"
	"kaas/storage/partlog"
	"kaas/storage/txnlog"
	"kaas/storage/vfs"
)

const (
	scnTopic   = "a"
	scnTxnID   = "t" // slot 16
	scnTimeout = 60000
	scnWait    = 10 * time.Second // bound on every "eventually"
)

// Error codes the scenarios expect, by their spec names.
var (
	errUnknownServer     = kerr.UnknownServerError.Code
	errNotCoordinator    = kerr.NotCoordinator.Code
	errInvalidRequest    = kerr.InvalidRequest.Code
	errOutOfOrder        = kerr.OutOfOrderSequenceNumber.Code
	errInvalidEpoch      = kerr.InvalidProducerEpoch.Code
	errInvalidTxnState   = kerr.InvalidTxnState.Code
	errInvalidPIDMapping = kerr.InvalidProducerIDMapping.Code
	errInvalidTimeout    = kerr.InvalidTransactionTimeout.Code
	errConcurrent        = kerr.ConcurrentTransactions.Code
	errCoordinatorFenced = kerr.TransactionCoordinatorFenced.Code
	errTxnIDAuthz        = kerr.TransactionalIDAuthorizationFailed.Code
	errOperationNotTried = kerr.OperationNotAttempted.Code
	errUnknownTopic      = kerr.UnknownTopicOrPartition.Code
	errInvalidRecord     = kerr.InvalidRecord.Code
	errProducerFenced    = kerr.ProducerFenced.Code
)

// scenarioBroker is one broker under test plus what a restart needs.
type scenarioBroker struct {
	t     *testing.T
	b     *Broker
	cfg   Config
	logs  *lockedLog
	conns []*scenarioConn
}

// scenarioOpt adjusts the broker configuration before Start.
type scenarioOpt func(*Config)

// startScenario starts a broker on a fresh data directory with topic a
// (3 partitions, CreateTime) and stops it when the test ends. On failure
// the broker's log is printed.
func startScenario(t *testing.T, opts ...scenarioOpt) *scenarioBroker {
	t.Helper()
	return startScenarioIn(t, t.TempDir(), opts...)
}

// startScenarioIn starts a broker on dataDir (seeded or left by an
// earlier broker); topic a is created only if it does not exist yet.
func startScenarioIn(t *testing.T, dataDir string, opts ...scenarioOpt) *scenarioBroker {
	t.Helper()
	logs := &lockedLog{}
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminAddr = ""
	cfg.DataDir = dataDir
	cfg.AutoCreateTopics = false
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, o := range opts {
		o(&cfg)
	}
	s := &scenarioBroker{t: t, cfg: cfg, logs: logs}
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("broker log:\n%s", logs.String())
		}
	})
	return s
}

func (s *scenarioBroker) start() {
	s.t.Helper()
	b, err := Start(s.cfg)
	if err != nil {
		s.t.Fatalf("starting broker: %v", err)
	}
	s.b = b
	if b.topics.load().byName[scnTopic] == nil {
		if _, err := b.createTopic(scnTopic, 3, -1, nil, false); err != nil {
			s.t.Fatalf("creating topic %s: %v", scnTopic, err)
		}
	}
}

// stop closes every client connection and the broker (idempotent).
func (s *scenarioBroker) stop() {
	for _, c := range s.conns {
		c.nc.Close()
	}
	s.conns = nil
	if s.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.b.Close(ctx); err != nil {
		s.t.Errorf("closing broker: %v", err)
	}
	s.b = nil
}

// restart is a clean stop and a start on the same data directory.
func (s *scenarioBroker) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

// crashImage copies the data directory of the running broker as a crash
// would leave it (no shutdown: no producer snapshots, no final flush, open
// slot logs as they are) and returns the copy's path. Start a broker on it
// to see what a killed broker recovers. Only call it while no request is
// being served, after everything acknowledged is durable.
func (s *scenarioBroker) crashImage() string {
	s.t.Helper()
	dst := s.t.TempDir()
	err := filepath.WalkDir(s.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.cfg.DataDir, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, raw, 0o644)
	})
	if err != nil {
		s.t.Fatalf("copying the data directory: %v", err)
	}
	return dst
}

// conn dials the broker; it is closed with the broker.
func (s *scenarioBroker) conn() *scenarioConn {
	s.t.Helper()
	nc, err := net.DialTimeout("tcp", s.b.Addr(), 5*time.Second)
	if err != nil {
		s.t.Fatalf("dialing broker: %v", err)
	}
	c := &scenarioConn{t: s.t, nc: nc, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("kaas-scenarios"))}
	s.conns = append(s.conns, c)
	return c
}

// entry is the persisted coordinator entry of id.
func (s *scenarioBroker) entry(id string) (txnstate.Entry, bool) { return s.b.txnStore().Get(id) }

// wantEntry asserts ⟨pid, epoch, lastPid, lastEpoch, state⟩ (the spec's
// entry notation), waiting for it a while: nothing waits for a Complete*
// record to be durable, not even the answer to EndTxn (state/txncoord's
// complete).
func (s *scenarioBroker) wantEntry(pid int64, epoch int16, lastPid int64, lastEpoch int16, state txnstate.State) txnstate.Entry {
	s.t.Helper()
	deadline := time.Now().Add(scnWait)
	e, ok := s.entry(scnTxnID)
	for (!ok || e.ProducerID != pid || e.Epoch != epoch || e.LastProducerID != lastPid || e.LastEpoch != lastEpoch || e.State != state) &&
		time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		e, ok = s.entry(scnTxnID)
	}
	if !ok {
		s.t.Fatalf("no coordinator entry for %q", scnTxnID)
	}
	if e.ProducerID != pid || e.Epoch != epoch || e.LastProducerID != lastPid || e.LastEpoch != lastEpoch || e.State != state {
		s.t.Fatalf("entry ⟨%d,%d,%d,%d,%s⟩, want ⟨%d,%d,%d,%d,%s⟩", e.ProducerID, e.Epoch, e.LastProducerID, e.LastEpoch, e.State,
			pid, epoch, lastPid, lastEpoch, state)
	}
	return e
}

// waitState polls until the entry of t reaches state.
func (s *scenarioBroker) waitState(state txnstate.State) txnstate.Entry {
	s.t.Helper()
	var e txnstate.Entry
	eventually(s.t, "entry reaches "+state.String(), func() bool {
		e, _ = s.entry(scnTxnID)
		return e.State == state
	})
	return e
}

// slotLogSize is the size of t's coordinator slot log (grows by one record
// per persisted transition).
func (s *scenarioBroker) slotLogSize() int64 {
	s.t.Helper()
	st, err := os.Stat(filepath.Join(s.cfg.DataDir, "__cluster", "txn_state", fmt.Sprintf("slot-%02d.log", slots.Of(scnTxnID))))
	if err != nil {
		s.t.Fatal(err)
	}
	return st.Size()
}

// fenceDir is the shared fence directory.
func (s *scenarioBroker) fenceDir() string {
	return filepath.Join(s.cfg.DataDir, "__cluster", "producer_fences")
}

// fenceFile reads a broker's fence file as {"<pid>": epoch}.
func (s *scenarioBroker) fenceFile(brokerID int32) map[string]int {
	s.t.Helper()
	raw, err := fencelog.ReadFile(vfs.OS, filepath.Join(s.fenceDir(), fencelog.FileName(brokerID)))
	if err != nil {
		s.t.Fatalf("reading fence file: %v", err)
	}
	m := map[string]int{}
	for pid, e := range raw {
		m[fmt.Sprint(pid)] = int(e)
	}
	return m
}

// writeFenceFile writes a fence file as a peer would (tmp + rename).
func writeFenceFile(t *testing.T, dir string, brokerID int32, fences map[int64]int16) {
	t.Helper()
	m := map[string]int16{}
	for pid, e := range fences {
		m[fmt.Sprint(pid)] = e
	}
	raw, _ := json.Marshal(m)
	path := filepath.Join(dir, fmt.Sprintf("from-%d.json", brokerID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// seedEntries writes coordinator entries into dataDir before a broker
// starts there (S-14..S-16).
func seedEntries(t *testing.T, dataDir string, entries ...txnstate.Entry) {
	t.Helper()
	st, err := txnlog.Open(durable.Env{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, e := range entries {
		if err := st.Put(e); err != nil {
			t.Fatal(err)
		}
	}
}

// markerGate holds back the coordinator's markers while closed (S-13,
// S-42, S-47: "entry in PrepareCommit with a marker held back").
type markerGate struct {
	mu     sync.Mutex
	closed bool
	held   []func()
}

func (g *markerGate) hooks() scenarioOpt {
	return func(c *Config) {
		c.testHooks = &testHooks{holdMarker: func(_ model.TopicPartition, deliver func()) bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.closed {
				g.held = append(g.held, deliver)
			}
			return g.closed
		}}
	}
}

func (g *markerGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

// heldCount is how many markers wait at the gate.
func (g *markerGate) heldCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// open delivers every held marker and lets later ones through.
func (g *markerGate) open() {
	g.mu.Lock()
	held := g.held
	g.closed, g.held = false, nil
	g.mu.Unlock()
	for _, deliver := range held {
		deliver()
	}
}

// foreignSlots makes the broker treat the given coordinator slots as a
// peer's (S-09, S-10).
func foreignSlots(owned ...int) scenarioOpt {
	return func(c *Config) {
		c.testHooks = &testHooks{foreignSlot: func(slot int) bool {
			for _, s := range owned {
				if s == slot {
					return true
				}
			}
			return false
		}}
	}
}

// eventually polls cond until it holds, failing after scnWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(scnWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockedLog collects the broker's log lines for printing on failure.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// ---- raw wire client ----

// scenarioConn sends kmsg requests at the version set on them and reads
// the answers itself.
type scenarioConn struct {
	t    *testing.T
	nc   net.Conn
	fmtr *kmsg.RequestFormatter
	corr int32
}

// send writes one request frame and returns its correlation id.
func (c *scenarioConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	frame := c.fmtr.AppendRequest(nil, req, c.corr)
	c.nc.SetWriteDeadline(time.Now().Add(scnWait))
	if _, err := c.nc.Write(frame); err != nil {
		c.t.Fatalf("writing %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return c.corr
}

// recv reads the answer to req (sent with correlation id corr).
func (c *scenarioConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	resp, err := c.read(req, corr)
	if err != nil {
		c.t.Fatalf("reading the %s v%d answer: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// read is recv without failing the test, for use off the test goroutine.
func (c *scenarioConn) read(req kmsg.Request, corr int32) (kmsg.Response, error) {
	c.nc.SetReadDeadline(time.Now().Add(scnWait))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return nil, err
	}
	if len(body) < 4 {
		return nil, errors.New("short response frame")
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions answers with header v0
		r := kbin.Reader{Src: body}
		for n := r.Uvarint(); n > 0; n-- {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
		if !r.Ok() {
			return nil, errors.New("malformed response header tags")
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	return resp, nil
}

// do sends req and waits for its answer.
func (c *scenarioConn) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// async sends req and returns a channel that gets its answer (or nil on a
// read error) once the broker sends it: for requests a test hook holds.
func (c *scenarioConn) async(req kmsg.Request) <-chan kmsg.Response {
	c.t.Helper()
	corr := c.send(req)
	out := make(chan kmsg.Response, 1)
	go func() {
		resp, err := c.read(req, corr)
		if err != nil {
			resp = nil
		}
		out <- resp
	}()
	return out
}

// ---- request builders (spec scenarios.md shorthand) ----

// ipiReq is IPI{} with the scenario defaults: v4, id "t", timeout 60000,
// no claim. Adjust the fields for the variants.
func ipiReq(pid int64, ep int16) *kmsg.InitProducerIDRequest {
	r := kmsg.NewPtrInitProducerIDRequest()
	r.Version = 4
	r.TransactionalID = kmsg.StringPtr(scnTxnID)
	r.TransactionTimeoutMillis = scnTimeout
	r.ProducerID, r.ProducerEpoch = pid, ep
	return r
}

func (c *scenarioConn) ipi(r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	c.t.Helper()
	return c.do(r).(*kmsg.InitProducerIDResponse)
}

// initTxn sends IPI{} (no claim) and requires success: the (pid, epoch).
func (c *scenarioConn) initTxn() (int64, int16) {
	c.t.Helper()
	resp := c.ipi(ipiReq(-1, -1))
	if resp.ErrorCode != 0 {
		c.t.Fatalf("IPI{}: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// initIdempotent sends IPI{id:null} and requires success.
func (c *scenarioConn) initIdempotent() int64 {
	c.t.Helper()
	r := ipiReq(-1, -1)
	r.TransactionalID = nil
	resp := c.ipi(r)
	if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 {
		c.t.Fatalf("IPI{id:null}: %v epoch %d", kerr.ErrorForCode(resp.ErrorCode), resp.ProducerEpoch)
	}
	return resp.ProducerID
}

// wantIPI asserts an InitProducerId answer.
func wantIPI(t *testing.T, what string, resp *kmsg.InitProducerIDResponse, code int16, pid int64, epoch int16) {
	t.Helper()
	if resp.ErrorCode != code || resp.ProducerID != pid || resp.ProducerEpoch != epoch {
		t.Fatalf("%s: %s (%d), (%d,%d); want %s (%d), (%d,%d)", what,
			codeName(resp.ErrorCode), resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch,
			codeName(code), code, pid, epoch)
	}
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "?"
}

// wantCode asserts an error code.
func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %s (%d), want %s (%d)", what, codeName(got), got, codeName(want), want)
	}
}

// tp names a partition of topic a (the scenarios' a-0, a-1, a-2).
type tp struct {
	topic string
	part  int32
}

// a0, a1, a2 are the partitions of the scenarios' topic a.
var a0, a1, a2 = tp{scnTopic, 0}, tp{scnTopic, 1}, tp{scnTopic, 2}

func (x tp) String() string { return fmt.Sprintf("%s-%d", x.topic, x.part) }

// pr is PR{tp,pid,ep,seq,n,txn}: one batch for Produce v9, acks -1.
type pr struct {
	tp  tp
	pid int64
	ep  int16
	seq int32
	n   int // records; 0 means 1
	txn bool
	ts  int64 // record timestamp (ms); 0 means now
}

// produce sends p and returns its partition's answer.
func (c *scenarioConn) produce(p pr) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	var txnID *string
	if p.txn {
		txnID = kmsg.StringPtr(scnTxnID)
	}
	req := produceReq(txnID, map[tp][]byte{p.tp: buildBatch(p.batch())})
	resp := c.do(req).(*kmsg.ProduceResponse)
	return onlyPartition(c.t, resp)
}

// produceOK sends p and requires success at the given base offset.
func (c *scenarioConn) produceOK(p pr, base int64) {
	c.t.Helper()
	r := c.produce(p)
	if r.ErrorCode != 0 || r.BaseOffset != base {
		c.t.Fatalf("PR%+v: %s, base offset %d; want NONE at %d", p, codeName(r.ErrorCode), r.BaseOffset, base)
	}
}

// produceCode sends p and requires the error code (and nothing appended
// for an error: base offset -1).
func (c *scenarioConn) produceCode(p pr, code int16) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	r := c.produce(p)
	wantCode(c.t, fmt.Sprintf("PR%+v", p), r.ErrorCode, code)
	if code != 0 && r.BaseOffset != -1 {
		c.t.Fatalf("PR%+v: error answer with base offset %d, want -1", p, r.BaseOffset)
	}
	return r
}

func (p pr) batch() batchSpec {
	n := p.n
	if n == 0 {
		n = 1
	}
	return batchSpec{pid: p.pid, epoch: p.ep, seq: p.seq, n: n, txn: p.txn, ts: p.ts}
}

// produceReq builds Produce v9, acks -1, one records field per partition.
func produceReq(txnID *string, parts map[tp][]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 10000
	req.TransactionID = txnID
	byTopic := map[string]int{}
	for x, records := range parts {
		i, ok := byTopic[x.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[x.topic] = i
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = x.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = x.part, records
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

func onlyPartition(t *testing.T, resp *kmsg.ProduceResponse) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce answer for %d topics, want exactly one partition", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// produceCodes flattens a produce answer to partition → code.
func produceCodes(resp *kmsg.ProduceResponse) map[tp]int16 {
	out := map[tp]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[tp{rt.Topic, rp.Partition}] = rp.ErrorCode
		}
	}
	return out
}

// aptReq is APT{pid,ep,tps}: AddPartitionsToTxn v3 for t.
func aptReq(pid int64, ep int16, tps ...tp) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID = scnTxnID
	req.ProducerID, req.ProducerEpoch = pid, ep
	for _, x := range tps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != x.topic {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic = x.topic
			req.Topics = append(req.Topics, rt)
		}
		req.Topics[len(req.Topics)-1].Partitions = append(req.Topics[len(req.Topics)-1].Partitions, x.part)
	}
	return req
}

// apt sends an AddPartitionsToTxn v0–3 and returns partition → code.
func (c *scenarioConn) apt(req *kmsg.AddPartitionsToTxnRequest) map[tp]int16 {
	c.t.Helper()
	resp := c.do(req).(*kmsg.AddPartitionsToTxnResponse)
	out := map[tp]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[tp{rt.Topic, rp.Partition}] = rp.ErrorCode
		}
	}
	return out
}

// aptOK adds partitions and requires NONE for each.
func (c *scenarioConn) aptOK(pid int64, ep int16, tps ...tp) {
	c.t.Helper()
	codes := c.apt(aptReq(pid, ep, tps...))
	for _, x := range tps {
		if codes[x] != 0 {
			c.t.Fatalf("APT{%d,%d,%v}: %v → %s", pid, ep, tps, x, codeName(codes[x]))
		}
	}
}

// wantCodes asserts a partition → code map exactly.
func wantCodes(t *testing.T, what string, got, want map[tp]int16) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: answers %v, want %v", what, got, want)
	}
	for x, code := range want {
		if c, ok := got[x]; !ok || c != code {
			t.Fatalf("%s: %v → %s (%d), want %s (%d) (all: %v)", what, x, codeName(c), c, codeName(code), code, got)
		}
	}
}

// endReq is END{pid,ep,commit}: EndTxn v3 for t.
func endReq(pid int64, ep int16, commit bool) *kmsg.EndTxnRequest {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = 3
	req.TransactionalID = scnTxnID
	req.ProducerID, req.ProducerEpoch, req.Commit = pid, ep, commit
	return req
}

func (c *scenarioConn) end(pid int64, ep int16, commit bool) int16 {
	c.t.Helper()
	return c.do(endReq(pid, ep, commit)).(*kmsg.EndTxnResponse).ErrorCode
}

// fetch is F{tp,off,iso}: Fetch v12 of one partition, answered at once.
func (c *scenarioConn) fetch(x tp, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	req.MaxBytes = 1 << 20
	req.IsolationLevel = isolation
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = x.topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = x.part, offset, 1<<20
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("fetch %v: top-level %s, %d topics", x, codeName(resp.ErrorCode), len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		c.t.Fatalf("fetch %v@%d: %s", x, offset, codeName(p.ErrorCode))
	}
	return p
}

// listOffset is LO{tp,ts,iso}: ListOffsets v7 of one partition.
func (c *scenarioConn) listOffset(x tp, ts int64, isolation int8) kmsg.ListOffsetsResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = x.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = x.part, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("list offsets %v: %d topics", x, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// ---- record batches ----

// batchSpec is the header a test controls; everything else is derived.
type batchSpec struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
	txn   bool
	attrs int16 // extra attribute bits
	ts    int64 // timestamp of every record; 0 means now
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// buildBatch encodes a magic-2 record batch with n small records and a
// correct CRC-32C.
func buildBatch(s batchSpec) []byte {
	ts := s.ts
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	var records []byte
	for i := 0; i < s.n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprintf("value-%d", i))}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // body size; Length 0 encodes as one byte
		records = r.AppendTo(records)
	}
	attrs := s.attrs
	if s.txn {
		attrs |= 0x10
	}
	batch := kmsg.RecordBatch{
		FirstOffset:          0,
		Length:               int32(partlog.BatchHeaderSize - 12 + len(records)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(s.n - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           s.pid,
		ProducerEpoch:        s.epoch,
		FirstSequence:        s.seq,
		NumRecords:           int32(s.n),
		Records:              records,
	}
	out := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoliTable))
	if !partlog.ValidCRC(out) {
		panic("test batch builder produced a bad CRC")
	}
	return out
}

// fetchedBatch is one batch of a fetch answer with its raw bytes.
type fetchedBatch struct {
	kmsg.RecordBatch
	raw []byte
}

// batchesOf decodes the record batches of a fetch answer.
func batchesOf(t *testing.T, records []byte) []fetchedBatch {
	t.Helper()
	var out []fetchedBatch
	for len(records) > 0 {
		if len(records) < 12 {
			t.Fatalf("fetch answer ends in a partial batch header (%d bytes)", len(records))
		}
		size := 12 + int(binary.BigEndian.Uint32(records[8:]))
		if size > len(records) {
			t.Fatalf("fetch answer ends in a partial batch")
		}
		var b fetchedBatch
		b.raw = records[:size]
		if err := b.ReadFrom(b.raw); err != nil {
			t.Fatalf("decoding a fetched batch: %v", err)
		}
		out = append(out, b)
		records = records[size:]
	}
	return out
}

// controlRecord decodes the single record of a control batch: its key
// and value bytes.
func controlRecord(t *testing.T, b fetchedBatch) (key, value []byte) {
	t.Helper()
	var r kmsg.Record
	body := b.Records
	length, n := kbin.Varint(body)
	if n == 0 || int(length) != len(body)-n {
		t.Fatalf("control batch holds %d record bytes, record says %d", len(body)-n, length)
	}
	if err := r.ReadFrom(body); err != nil {
		t.Fatalf("decoding control record: %v", err)
	}
	if r.Attributes != 0 || r.TimestampDelta64 != 0 || r.OffsetDelta != 0 || len(r.Headers) != 0 {
		t.Fatalf("control record %+v: attributes, deltas and headers must be zero", r)
	}
	return r.Key, r.Value
}

// wantMarker asserts that b is a COMMIT/ABORT control batch (R-MRK-3) at
// offset for (pid, epoch).
func wantMarker(t *testing.T, b fetchedBatch, offset, pid int64, epoch int16, commit bool, coordinatorEpoch int32) {
	t.Helper()
	if len(b.raw) != partlog.MarkerBatchSize || b.Length != 66 {
		t.Fatalf("marker batch is %d bytes (batchLength %d), want 78 (66)", len(b.raw), b.Length)
	}
	if b.FirstOffset != offset || b.Attributes != 0x30 || b.LastOffsetDelta != 0 || b.FirstSequence != -1 || b.NumRecords != 1 ||
		b.ProducerID != pid || b.ProducerEpoch != epoch || b.FirstTimestamp != b.MaxTimestamp {
		t.Fatalf("marker batch header %+v; want offset %d, attributes 0x30, pid %d epoch %d, sequence -1, 1 record",
			b.RecordBatch, offset, pid, epoch)
	}
	if !partlog.ValidCRC(b.raw) {
		t.Fatal("marker batch CRC does not verify")
	}
	typ := byte(0)
	if commit {
		typ = 1
	}
	key, value := controlRecord(t, b)
	wantKey := []byte{0, 0, 0, typ}
	wantValue := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordinatorEpoch))
	if !bytes.Equal(key, wantKey) || !bytes.Equal(value, wantValue) {
		t.Fatalf("marker key % x value % x, want % x and % x", key, value, wantKey, wantValue)
	}
}

// txnStore is the open transaction store (the coordinators of a single
// broker are open for its whole life).
func (b *Broker) txnStore() *txnlog.Store { return b.coordinating().store }
