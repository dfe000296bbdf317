package offsetlog

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
)

// State is what a slot's log says once replayed: Apache's
// GroupMetadataManager.doLoadGroupsAndOffsets over one __consumer_offsets
// partition, plus the last producer epoch per producer id (R-TXN-13).
type State struct {
	Groups map[string]*GroupState
	// Epochs is the last epoch recorded per producer id by transactional
	// commits and markers on this slot.
	Epochs map[int64]int16
	// NextSeq numbers the next record; numbering starts at 1, so a
	// sequence number 0 always means "not written yet".
	NextSeq uint64
}

// GroupState is one group's durable state.
type GroupState struct {
	// Metadata is the last stored group metadata; nil if the group only
	// has offsets (or its metadata was deleted).
	Metadata *kmsg.GroupMetadataValue
	Offsets  map[model.TopicPartition]Offset
	// Pending holds transactional offsets by producer id until a marker
	// commits or aborts them.
	Pending map[int64]map[model.TopicPartition]Offset
	// Consumer is the group's KIP-848 state, nil unless it is a consumer
	// group (consumer_records.go).
	Consumer *ConsumerState
}

// NewState is an empty slot.
func NewState() *State {
	return &State{Groups: map[string]*GroupState{}, Epochs: map[int64]int16{}, NextSeq: 1}
}

func (s *State) group(id string) *GroupState {
	g := s.Groups[id]
	if g == nil {
		g = &GroupState{Offsets: map[model.TopicPartition]Offset{}, Pending: map[int64]map[model.TopicPartition]Offset{}}
		s.Groups[id] = g
	}
	return g
}

func (s *State) dropIfEmpty(id string) {
	if g := s.Groups[id]; g != nil && g.Metadata == nil && g.Consumer == nil && len(g.Offsets) == 0 && len(g.Pending) == 0 {
		delete(s.Groups, id)
	}
}

// GroupsPendingFor lists the groups holding staged offsets of producerID,
// sorted (the groups a marker for it completes).
func (s *State) GroupsPendingFor(producerID int64) []string {
	var out []string
	for id, g := range s.Groups {
		if _, ok := g.Pending[producerID]; ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Apply replays one entry whose first record has sequence number firstSeq.
// Records it cannot decode are reported (with the rest of the entry still
// applied), as Apache skips unknown keys with a warning.
func (s *State) Apply(e *Entry, firstSeq uint64) error {
	if end := firstSeq + e.seqs(); end > s.NextSeq {
		s.NextSeq = end
	}
	switch e.Kind {
	case KindSeqMark:
		return nil
	case KindProducerEpoch:
		s.noteEpoch(e.ProducerID, e.Epoch)
		return nil
	case KindCommit, KindAbort:
		s.noteEpoch(e.ProducerID, e.Epoch)
		s.complete(e.ProducerID, e.Kind == KindCommit)
		return nil
	case KindPlain, KindTxn:
	default:
		return fmt.Errorf("unknown frame kind %d", e.Kind)
	}
	if e.Kind == KindTxn {
		s.noteEpoch(e.ProducerID, e.Epoch)
	}
	var errs []error
	for i, r := range e.Records {
		if err := s.applyRecord(e, r, firstSeq+uint64(i)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d undecodable records, first: %w", len(errs), errs[0])
	}
	return nil
}

func (s *State) applyRecord(e *Entry, r Record, seq uint64) error {
	k, err := decodeKey(r.Key)
	if err != nil {
		return err
	}
	if k.consumer != 0 {
		if e.Kind == KindTxn {
			return fmt.Errorf("consumer group record v%d in a transactional frame", k.consumer)
		}
		return s.applyConsumer(k.consumer, r.Key, r.Value)
	}
	if k.isGroup {
		if e.Kind == KindTxn {
			return fmt.Errorf("group metadata for %q in a transactional frame", k.group)
		}
		if r.Value == nil {
			if g := s.Groups[k.group]; g != nil {
				g.Metadata = nil
				s.dropIfEmpty(k.group)
			}
			return nil
		}
		v, err := decodeGroup(r.Value)
		if err != nil {
			return err
		}
		s.group(k.group).Metadata = v
		return nil
	}
	if r.Value == nil {
		// As Apache's loader: a plain tombstone removes the committed
		// offset; a transactional one removes the staged offset.
		if g := s.Groups[k.group]; g != nil {
			if e.Kind == KindTxn {
				delete(g.Pending[e.ProducerID], k.tp)
			} else {
				delete(g.Offsets, k.tp)
			}
			s.dropIfEmpty(k.group)
		}
		return nil
	}
	o, err := decodeOffset(r.Value, seq)
	if err != nil {
		return err
	}
	g := s.group(k.group)
	if e.Kind == KindTxn {
		p := g.Pending[e.ProducerID]
		if p == nil {
			p = map[model.TopicPartition]Offset{}
			g.Pending[e.ProducerID] = p
		}
		p[k.tp] = o
		return nil
	}
	g.Offsets[k.tp] = o
	return nil
}

func (s *State) noteEpoch(pid int64, epoch int16) {
	if cur, ok := s.Epochs[pid]; !ok || epoch > cur {
		s.Epochs[pid] = epoch
	}
}

// complete applies a marker for pid to every group of the slot: a commit
// makes each staged offset the committed one unless a newer plain commit
// is already there (R-MRK-5); both drop the staged offsets.
func (s *State) complete(pid int64, commit bool) {
	for id, g := range s.Groups {
		staged, ok := g.Pending[pid]
		if !ok {
			continue
		}
		delete(g.Pending, pid)
		if commit {
			MaterializeInto(g.Offsets, staged)
		}
		s.dropIfEmpty(id)
	}
}

// MaterializeInto commits staged offsets into committed, keeping a
// committed offset whose record is newer (Apache's
// completePendingTxnOffsetCommit). Group actors use it too, so memory and
// log agree.
func MaterializeInto(committed, staged map[model.TopicPartition]Offset) {
	for tp, o := range staged {
		if cur, ok := committed[tp]; !ok || cur.Seq < o.Seq {
			committed[tp] = o
		}
	}
}

// SeqEntry is an entry with the sequence number of its first record.
type SeqEntry struct {
	Entry
	FirstSeq uint64
}

// SortedTPs lists m's partitions by topic, then partition, for stable
// output (snapshots, answers, logs).
func SortedTPs(m map[model.TopicPartition]Offset) []model.TopicPartition {
	out := make([]model.TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Clone is a deep copy (the metadata value is shared: nobody modifies a
// decoded value).
func (g *GroupState) Clone() *GroupState {
	c := &GroupState{Metadata: g.Metadata, Consumer: g.Consumer.clone(), Offsets: make(map[model.TopicPartition]Offset, len(g.Offsets)), Pending: make(map[int64]map[model.TopicPartition]Offset, len(g.Pending))}
	for tp, o := range g.Offsets {
		c.Offsets[tp] = o
	}
	for pid, staged := range g.Pending {
		m := make(map[model.TopicPartition]Offset, len(staged))
		for tp, o := range staged {
			m[tp] = o
		}
		c.Pending[pid] = m
	}
	return c
}
