package admin

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"kaas/metrics/events"
)

// The inspector's views, one JSON document each: what /api/<view> answers
// and what /api/stream sends once a second. Every list is filtered by the
// same name query (q) and is never null.

// matches reports whether any of names contains q, case-insensitively
// (q is already lower case; empty matches everything).
func matches(q string, names ...string) bool {
	if q == "" {
		return true
	}
	for _, n := range names {
		if strings.Contains(strings.ToLower(n), q) {
			return true
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Overview is the landing view.
type Overview struct {
	Time      time.Time    `json:"time"`
	Broker    Identity     `json:"broker"`
	UptimeSec float64      `json:"uptime_sec"`
	Disk      Disk         `json:"disk"`
	Kinds     []kindSample `json:"kinds"`
	// Totals are the broker-wide mailbox depth, messages/s and
	// requests/s of the last five minutes.
	Totals Series     `json:"totals"`
	APIs   []APIStats `json:"apis"`
	// Connections are the open client connections whose listener,
	// remote address or principal matches the query.
	Connections []Connection `json:"connections"`
	// Panels are tables other parts of the broker add (none yet).
	Panels []Panel `json:"panels,omitempty"`
	// Actors are the actors whose name matches the query.
	Actors []Actor `json:"actors"`
}

// Panel is an extra table on the overview, from a data source the broker
// adds with Config.Panels (the cluster's brokers and what each owns, once
// there is a cluster). A source with nothing to show returns no rows and
// the panel is left out.
type Panel struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Actors, when set, names the actor each row opens (aligned with
	// Rows; "" for none).
	Actors []string `json:"actors,omitempty"`
}

func (s *Server) overview(q string) Overview {
	now := time.Now()
	id := s.identity()
	totals := s.sampler.totals()
	o := Overview{
		Time: now, Broker: id, UptimeSec: round3(now.Sub(id.Started).Seconds()),
		Disk: s.disk.get(), Kinds: s.sampler.kindStats(), Totals: totals,
		APIs: s.requests.stats(totals.T),
	}
	o.Connections = []Connection{}
	for _, c := range s.connections() {
		if matches(q, c.Listener, c.Remote, c.Principal, c.Protocol) {
			o.Connections = append(o.Connections, c)
		}
	}
	for _, p := range s.cfg.Panels {
		if panel := p(); len(panel.Rows) > 0 {
			o.Panels = append(o.Panels, panel)
		}
	}
	snap := s.snapshot(Filter{Match: q})
	sortActors(snap.Actors)
	o.Actors = snap.Actors
	return o
}

func (s *Server) identity() Identity {
	id := s.cfg.Source.Identity()
	id.Admin = s.Addr()
	return id
}

// KIP360 is the epoch-bump and fencing view.
type KIP360 struct {
	Time time.Time `json:"time"`
	// Events are bumps, fences and zombies rejected, newest first.
	Events []events.Event `json:"events"`
	// Recorded counts every event ever recorded, by kind (the journal
	// keeps the newest events.Capacity of each).
	Recorded map[events.Kind]uint64 `json:"recorded"`
	Fences   Fences                 `json:"fences"`
	// Partitions shows, for each partition holding producer state, the
	// epoch in force for each producer (the broker-wide floors hold on
	// every partition as well).
	Partitions []PartitionFence `json:"partitions"`
	// PartitionsLeftOut counts matching partitions not asked (see
	// maxAskPartitions); narrow the query to see them.
	PartitionsLeftOut int `json:"partitions_left_out"`
}

// PartitionFence is one partition's producers as the partition holds
// them.
type PartitionFence struct {
	Partition string          `json:"partition"`
	Actor     string          `json:"actor"`
	Producers []ProducerFence `json:"producers"`
	Error     string          `json:"error,omitempty"`
}

// ProducerFence is one producer id's epoch in force on a partition.
type ProducerFence struct {
	Producer
	// Floor is the broker-wide fence floor for the producer id, -1 if
	// none.
	Floor           int16  `json:"floor"`
	TransactionalID string `json:"transactional_id,omitempty"`
}

// maxAskPartitions bounds the partitions one view asks for their
// producers; maxEvents the events one view carries.
const (
	maxAskPartitions = 64
	maxEvents        = 300
	askBudget        = 500 * time.Millisecond
)

func (s *Server) kip360(ctx context.Context, q string) KIP360 {
	txns := s.cfg.Source.Transactions()
	byPID := txnsByProducer(txns)
	out := KIP360{Time: time.Now(), Recorded: map[events.Kind]uint64{}, Events: []events.Event{}}
	all := s.cfg.Events.Events()
	for i := len(all) - 1; i >= 0 && len(out.Events) < maxEvents; i-- {
		e := all[i]
		if e.TransactionalID == "" && e.Kind != events.EpochBump {
			e.TransactionalID = byPID[e.ProducerID]
		}
		if matches(q, itoa(e.ProducerID), e.TransactionalID, e.Where, e.Reason, e.Code, string(e.Kind)) {
			out.Events = append(out.Events, e)
		}
	}
	for _, k := range events.Kinds {
		out.Recorded[k] = s.cfg.Events.Recorded(k)
	}
	f := s.cfg.Source.Fences()
	floors := map[int64]int16{}
	kept := f.Floors[:0:0]
	for _, fl := range f.Floors {
		floors[fl.ProducerID] = fl.Epoch
		if fl.TransactionalID == "" {
			fl.TransactionalID = byPID[fl.ProducerID]
		}
		if matches(q, itoa(fl.ProducerID), fl.TransactionalID) {
			kept = append(kept, fl)
		}
	}
	f.Floors = kept
	out.Fences = f

	var ask []Partition
	for _, p := range s.cfg.Source.Partitions() {
		if p.ProducerIDs > 0 && matches(q, p.Name(), p.Actor) {
			ask = append(ask, p)
		}
	}
	if len(ask) > maxAskPartitions {
		out.PartitionsLeftOut = len(ask) - maxAskPartitions
		ask = ask[:maxAskPartitions]
	}
	out.Partitions = make([]PartitionFence, len(ask))
	s.eachProducers(ctx, ask, func(i int, ps []Producer, err error) {
		pf := PartitionFence{Partition: ask[i].Name(), Actor: ask[i].Actor, Producers: []ProducerFence{}}
		if err != nil {
			pf.Error = err.Error()
		}
		for _, p := range ps {
			fl, ok := floors[p.ProducerID]
			if !ok {
				fl = -1
			}
			pf.Producers = append(pf.Producers, ProducerFence{Producer: p, Floor: fl, TransactionalID: byPID[p.ProducerID]})
		}
		out.Partitions[i] = pf
	})
	return out
}

// eachProducers asks the partitions for their producers concurrently
// within askBudget and calls fn for each (sequentially).
func (s *Server) eachProducers(ctx context.Context, parts []Partition, fn func(i int, ps []Producer, err error)) {
	ctx, cancel := context.WithTimeout(ctx, askBudget)
	defer cancel()
	type result struct {
		i   int
		ps  []Producer
		err error
	}
	results := make([]result, len(parts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxStateCalls)
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ps, err := s.cfg.Source.Producers(ctx, p.Topic, p.Partition)
			results[i] = result{i, ps, err}
		}()
	}
	wg.Wait()
	for _, r := range results {
		fn(r.i, r.ps, r.err)
	}
}

func txnsByProducer(txns []Transaction) map[int64]string {
	m := make(map[int64]string, len(txns))
	for _, t := range txns {
		m[t.ProducerID] = t.TransactionalID
	}
	return m
}

// Transactions is the transactions view: the facts DescribeProducers,
// ListTransactions and DescribeTransactions give, together.
type Transactions struct {
	Time time.Time `json:"time"`
	// Open are begun and not completed, oldest first.
	Open []OpenTxn `json:"open"`
	// Idle are the other transactional ids (Empty, Complete*, Dead).
	Idle []Transaction `json:"idle"`
	// Partitions are every partition's high watermark against its last
	// stable offset, widest gap first: a read_committed consumer reads
	// no further than the LSO.
	Partitions []PartitionLSO `json:"partitions"`
	// Hanging are transactions open on a partition that the coordinator
	// does not account for, or open past transaction.max.timeout.ms
	// (what `kafka-transactions.sh find-hanging` looks for).
	Hanging           []Hanging `json:"hanging"`
	MaxTimeoutMs      int64     `json:"max_timeout_ms"`
	PartitionsLeftOut int       `json:"partitions_left_out"`
}

// OpenTxn is an open transaction with its age against its timeout.
type OpenTxn struct {
	Transaction
	AgeMs int64 `json:"age_ms"`
	// LeftMs is the time before the timeout reaper aborts it (negative:
	// overdue, the reaper runs every few seconds).
	LeftMs int64 `json:"left_ms"`
}

// PartitionLSO is one partition's read_committed gap.
type PartitionLSO struct {
	Partition     string `json:"partition"`
	Actor         string `json:"actor"`
	HighWatermark int64  `json:"high_watermark"`
	LastStable    int64  `json:"last_stable_offset"`
	Gap           int64  `json:"gap"`
	// OpenTxns are the transactions holding the LSO back (asked of the
	// partition only when there is a gap).
	OpenTxns []PartitionTxn `json:"open_txns"`
	Error    string         `json:"error,omitempty"`
}

// PartitionTxn is a transaction open on one partition.
type PartitionTxn struct {
	ProducerID      int64  `json:"producer_id"`
	Epoch           int16  `json:"epoch"`
	FirstOffset     int64  `json:"first_offset"`
	TransactionalID string `json:"transactional_id,omitempty"`
	LastTimestamp   int64  `json:"last_timestamp"`
}

// Hanging is a hanging-transaction candidate.
type Hanging struct {
	PartitionTxn
	Partition string `json:"partition"`
	Actor     string `json:"actor"`
	Reason    string `json:"reason"`
}

func (s *Server) transactions(ctx context.Context, q string) Transactions {
	now := time.Now()
	nowMs := now.UnixMilli()
	out := Transactions{Time: now, Open: []OpenTxn{}, Idle: []Transaction{}, Partitions: []PartitionLSO{}, Hanging: []Hanging{},
		MaxTimeoutMs: s.cfg.TxnMaxTimeout.Milliseconds()}
	txns := s.cfg.Source.Transactions()
	byPID := map[int64]Transaction{}
	for _, t := range txns {
		byPID[t.ProducerID] = t
		if !matches(q, t.TransactionalID, t.Actor, itoa(t.ProducerID), strings.Join(t.Partitions, " ")) {
			continue
		}
		if t.Open() && t.StartMs >= 0 {
			age := nowMs - t.StartMs
			out.Open = append(out.Open, OpenTxn{Transaction: t, AgeMs: age, LeftMs: int64(t.TimeoutMs) - age})
		} else {
			out.Idle = append(out.Idle, t)
		}
	}
	sort.Slice(out.Open, func(i, j int) bool { return out.Open[i].AgeMs > out.Open[j].AgeMs })
	sort.Slice(out.Idle, func(i, j int) bool { return out.Idle[i].TransactionalID < out.Idle[j].TransactionalID })

	var gaps []int // indices into out.Partitions to ask
	all := s.cfg.Source.Partitions()
	byName := make(map[string]Partition, len(all))
	for _, p := range all {
		byName[p.Name()] = p
		if !matches(q, p.Name(), p.Actor) {
			continue
		}
		row := PartitionLSO{Partition: p.Name(), Actor: p.Actor, HighWatermark: p.HighWatermark, LastStable: p.LastStable,
			Gap: p.HighWatermark - p.LastStable, OpenTxns: []PartitionTxn{}}
		out.Partitions = append(out.Partitions, row)
	}
	sort.SliceStable(out.Partitions, func(i, j int) bool {
		if out.Partitions[i].Gap != out.Partitions[j].Gap {
			return out.Partitions[i].Gap > out.Partitions[j].Gap
		}
		return out.Partitions[i].Partition < out.Partitions[j].Partition
	})
	for i, p := range out.Partitions {
		if p.Gap > 0 && len(gaps) < maxAskPartitions {
			gaps = append(gaps, i)
		} else if p.Gap > 0 {
			out.PartitionsLeftOut++
		}
	}
	ask := make([]Partition, len(gaps))
	for k, i := range gaps {
		ask[k] = byName[out.Partitions[i].Partition]
	}
	s.eachProducers(ctx, ask, func(k int, ps []Producer, err error) {
		row := &out.Partitions[gaps[k]]
		if err != nil {
			row.Error = err.Error()
			return
		}
		for _, p := range ps {
			if p.TxnStartOffset < 0 {
				continue
			}
			pt := PartitionTxn{ProducerID: p.ProducerID, Epoch: p.Epoch, FirstOffset: p.TxnStartOffset, LastTimestamp: p.LastTimestamp}
			t, known := byPID[p.ProducerID]
			pt.TransactionalID = t.TransactionalID
			row.OpenTxns = append(row.OpenTxns, pt)
			if reason := hangingReason(t, known, row.Partition, p, nowMs, out.MaxTimeoutMs); reason != "" {
				out.Hanging = append(out.Hanging, Hanging{PartitionTxn: pt, Partition: row.Partition, Actor: row.Actor, Reason: reason})
			}
		}
	})
	return out
}

// hangingReason says why a transaction open on a partition may be hanging
// (Apache's find-hanging: open past the maximum timeout, and no ongoing
// coordinator transaction of that producer covers the partition), or ""
// when the coordinator accounts for it.
func hangingReason(t Transaction, known bool, partition string, p Producer, nowMs, maxTimeoutMs int64) string {
	switch {
	case !known:
		return "no transactional id of this coordinator has producer id " + itoa(p.ProducerID)
	case !t.Open():
		return "its transactional id " + t.TransactionalID + " is " + t.State + ", not in a transaction"
	case !contains(t.Partitions, partition):
		return "the coordinator's transaction of " + t.TransactionalID + " does not include " + partition
	case maxTimeoutMs > 0 && t.StartMs >= 0 && nowMs-t.StartMs > maxTimeoutMs:
		return "open longer than transaction.max.timeout.ms (" + itoa(maxTimeoutMs) + " ms)"
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortStrings(s []string) { sort.Strings(s) }
