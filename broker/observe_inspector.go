package broker

// The inspector's view of the broker beyond its actors' mailboxes
// (admin.Source): identity, partitions and transactions from published
// state, DescribeProducers on one partition, the fences in force, and how
// actors relate — a transactional id to its partitions and groups, a
// partition to its producers, a group to its members and committed
// offsets.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"

	"kaas/actors/partition"
	"kaas/actors/system"
	"kaas/broker/admin"
	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
	"kaas/model/txnstate"
	"kaas/state/consumergroup"
)

// inspectorSource adapts the broker to admin.Source.
type inspectorSource struct{ b *Broker }

var _ admin.Source = inspectorSource{}

func (s inspectorSource) Identity() admin.Identity {
	b := s.b
	return admin.Identity{
		BrokerID: b.cfg.BrokerID, ClusterID: b.clusterID, Version: b.cfg.Version,
		Listen: b.Addr(), Advertised: b.Advertised(), DataDir: b.cfg.DataDir,
		Started: b.started, GoVersion: runtime.Version(), PID: os.Getpid(),
	}
}

func (s inspectorSource) Partitions() []admin.Partition {
	var out []admin.Partition
	for _, t := range s.b.topics.load().byName {
		for _, h := range t.parts {
			v := h.View()
			if v == nil {
				continue
			}
			out = append(out, admin.Partition{
				Actor: h.Name(), Topic: h.Topic, Partition: h.Partition,
				LogStart: v.LogStart, HighWatermark: v.HighWatermark, LastStable: v.LastStable, LogEnd: v.EndOffset,
				SizeBytes: v.Size, Segments: v.SegmentCount(), ProducerIDs: h.ProducerIDs(),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func tpName(tp model.TopicPartition) string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func (s inspectorSource) Transactions() []admin.Transaction {
	entries := s.b.txnEntries()
	out := make([]admin.Transaction, 0, len(entries))
	for _, e := range entries {
		out = append(out, s.transaction(e))
	}
	return out
}

func (s inspectorSource) transaction(e txnstate.Entry) admin.Transaction {
	t := admin.Transaction{
		TransactionalID: e.TransactionalID, Actor: "txn/" + e.TransactionalID,
		ProducerID: e.ProducerID, Epoch: e.Epoch, LastProducerID: e.LastProducerID, LastEpoch: e.LastEpoch, State: e.State.String(),
		Partitions: []string{}, Groups: append([]string{}, e.Groups...),
		TimeoutMs: e.TimeoutMs, StartMs: e.TxnStartMs, LastUpdateMs: e.LastUpdateMs,
	}
	_, t.Running = s.b.sys.Lookup(t.Actor)
	for _, tp := range e.Partitions {
		t.Partitions = append(t.Partitions, tpName(tp))
	}
	return t
}

func (s inspectorSource) Producers(ctx context.Context, topic string, p int32) ([]admin.Producer, error) {
	h := s.b.partition(topic, p)
	if h == nil {
		return nil, fmt.Errorf("no partition %s-%d", topic, p)
	}
	got := make(chan []messages.ActiveProducer, 1)
	h.Send(&messages.DescribeProducers{Reply: func(ps []messages.ActiveProducer) { got <- ps }})
	ps, err := system.Await(ctx, got)
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d busy: no answer in time", topic, p)
	}
	out := make([]admin.Producer, 0, len(ps))
	for _, ap := range ps {
		out = append(out, admin.Producer{
			ProducerID: ap.ProducerID, Epoch: ap.ProducerEpoch, LastSequence: ap.LastSequence,
			LastTimestamp: ap.LastTimestamp, CoordinatorEpoch: ap.CoordinatorEpoch, TxnStartOffset: ap.CurrentTxnStartOffset,
		})
	}
	return out, nil
}

func (s inspectorSource) Fences() admin.Fences {
	out := admin.Fences{Floors: []admin.Floor{}, PeerFiles: []admin.PeerFile{}}
	if s.b.fence == nil {
		return out
	}
	sum := s.b.fence.Summary()
	out.OwnFile, out.OwnEntries, out.PollLagMs = sum.OwnFile, sum.OwnEntries, sum.PollLagMs
	for pid, e := range s.b.floors.Snapshot() {
		out.Floors = append(out.Floors, admin.Floor{ProducerID: pid, Epoch: e})
	}
	sort.Slice(out.Floors, func(i, j int) bool { return out.Floors[i].ProducerID < out.Floors[j].ProducerID })
	for _, p := range sum.PeerFiles {
		out.PeerFiles = append(out.PeerFiles, admin.PeerFile{
			File: p.Path, Entries: p.Entries, Modified: p.Modified, LastApplied: p.LastApplied, LagMs: p.LagMs,
		})
	}
	return out
}

// maxLinks bounds the links of one actor (a fence broadcaster with
// thousands of fenced producers).
const maxLinks = 200

func (s inspectorSource) Relations(ctx context.Context, kind, name string, state any) admin.Relations {
	r := admin.Relations{Links: []admin.Link{}}
	_, short, _ := strings.Cut(name, "/")
	link := func(rel, actor, label string) {
		if len(r.Links) >= maxLinks {
			return
		}
		l := admin.Link{Rel: rel, Actor: actor, Label: label}
		if actor != "" {
			_, l.Live = s.b.sys.Lookup(actor)
			if !l.Live && strings.HasPrefix(actor, "txn/") {
				_, l.Live = s.Dormant(actor) // viewable from the store
			}
		}
		r.Links = append(r.Links, l)
	}
	switch kind {
	case "partition":
		byPID := s.txnByProducer()
		if sum, ok := state.(partition.Summary); ok {
			for _, p := range sum.Producers {
				if id, ok := byPID[p.ProducerID]; ok {
					link("producer", "txn/"+id, fmt.Sprintf("producer %d, epoch %d — transactional id %s", p.ProducerID, p.Epoch, id))
				} else {
					link("producer", "", fmt.Sprintf("producer %d, epoch %d — idempotent", p.ProducerID, p.Epoch))
				}
			}
		}
	case "txn":
		if e, ok := s.b.txnEntry(short); ok {
			for _, tp := range e.Partitions {
				link("partition", "partition/"+tpName(tp), tpName(tp))
			}
			for _, g := range e.Groups {
				link("group", "group/"+g, "offsets of group "+g)
			}
			if fl, ok := s.b.floors.Get(e.ProducerID); ok {
				link("fence", "fence/broadcaster", fmt.Sprintf("producer %d fenced below epoch %d on every partition", e.ProducerID, fl))
			}
		}
	case "group":
		if sum, ok := state.(*consumergroup.Summary); ok && sum != nil {
			for _, m := range sum.Members {
				label := fmt.Sprintf("member %s (client %s at %s)", m.MemberID, m.ClientID, m.ClientHost)
				if c := m.Consumer; c != nil {
					// A consumer group's member: which protocol it
					// speaks (classic members join a consumer group
					// during an online migration) and where it is.
					label += fmt.Sprintf(" — %s protocol, epoch %d, %s, %d of %d target partitions", c.Protocol, c.Epoch, c.State, c.Assigned, c.Target)
				}
				link("member", "", label)
			}
		}
		r.Offsets = s.groupOffsets(ctx, short)
		for _, o := range r.Offsets {
			link("offset", o.Actor, fmt.Sprintf("%s committed at %d, lag %d", o.Partition, o.Offset, o.Lag))
		}
	case "fence":
		byPID := s.txnByProducer()
		for _, f := range s.Fences().Floors {
			if id, ok := byPID[f.ProducerID]; ok {
				link("fenced producer", "txn/"+id, fmt.Sprintf("producer %d below epoch %d — transactional id %s", f.ProducerID, f.Epoch, id))
			}
		}
	}
	return r
}

func (s inspectorSource) txnByProducer() map[int64]string {
	m := map[int64]string{}
	for _, e := range s.b.txnEntries() {
		m[e.ProducerID] = e.TransactionalID
	}
	return m
}

// groupOffsets reads a group's committed offsets (OffsetFetch for every
// partition) and each partition's end for the lag.
func (s inspectorSource) groupOffsets(ctx context.Context, group string) []admin.GroupOffset {
	got := make(chan []consumergroup.FetchedOffset, 1)
	// The inspector is the operator on the admin listener: no ACL applies
	// (a nil authorizer allows everything).
	s.b.fetchGroupOffsets(auth.Access{}, group, nil, false, nil, -1, func(f fetchedGroup) { got <- f.offsets })
	fetched, err := system.Await(ctx, got)
	if err != nil {
		return nil
	}
	out := make([]admin.GroupOffset, 0, len(fetched))
	for _, o := range fetched {
		if o.Offset < 0 {
			continue
		}
		g := admin.GroupOffset{Partition: fmt.Sprintf("%s-%d", o.TP.Topic, o.TP.Partition), Offset: o.Offset, Metadata: o.Metadata}
		if h := s.b.partition(o.TP.Topic, o.TP.Partition); h != nil {
			g.Actor = h.Name()
			if v := h.View(); v != nil {
				g.LogEnd, g.Lag = v.EndOffset, max(0, v.EndOffset-o.Offset)
			}
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// Dormant is a transactional id whose actor is passivated, as the
// coordinator's store holds it (the actor starts again on the next request
// for the id).
func (s inspectorSource) Dormant(name string) (any, bool) {
	id, ok := strings.CutPrefix(name, "txn/")
	if !ok {
		return nil, false
	}
	e, ok := s.b.txnEntry(id)
	if !ok {
		return nil, false
	}
	return s.transaction(e), true
}
