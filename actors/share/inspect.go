package share

import (
	"encoding/hex"
	"maps"
	"slices"
	"time"

	"kaas/actors/system"
	"kaas/model"
	"kaas/state/sharegroup"
)

// inspectRecords is how many in-flight records of each share-partition
// the inspector shows.
const inspectRecords = 200

// View is the inspector's view of the share coordinator: every share
// group, its members and, for each share-partition, the window and the
// records in flight with their state, holder, delivery count and lock
// deadline — which no other broker console shows.
type View struct {
	Groups []GroupView `json:"groups"`
}

// GroupView is one share group.
type GroupView struct {
	ID         string          `json:"id"`
	State      string          `json:"state"`
	Epoch      int32           `json:"epoch"`
	Members    []MemberView    `json:"members"`
	Partitions []PartitionView `json:"share_partitions"`
}

// MemberView is one member.
type MemberView struct {
	ID         string             `json:"id"`
	ClientID   string             `json:"client_id"`
	ClientHost string             `json:"client_host"`
	Epoch      int32              `json:"epoch"`
	Subscribed []string           `json:"subscribed"`
	Assignment map[string][]int32 `json:"assignment"`
}

// PartitionView is one share-partition.
type PartitionView struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	SPSO        int64        `json:"spso"`
	SPEO        int64        `json:"speo"`
	Available   int          `json:"available"`
	Acquired    int          `json:"acquired"`
	Done        int          `json:"done_in_window"`
	Acquisition uint64       `json:"acquisitions"`
	Redelivered uint64       `json:"redelivered"`
	Archived    uint64       `json:"archived"`
	Expired     uint64       `json:"lock_expiries"`
	InFlight    []RecordView `json:"in_flight"`
}

// RecordView is one record in the window.
type RecordView struct {
	Offset     int64      `json:"offset"`
	State      string     `json:"state"`
	Deliveries int16      `json:"delivery_count"`
	Member     string     `json:"member,omitempty"`
	Deadline   *time.Time `json:"lock_deadline,omitempty"`
}

func (a *shareActor) topicName(id sharegroup.TopicID, p int32) string {
	if part, code := a.cfg.Resolve(model.TopicIDPartition{Topic: id, Partition: p}); code == 0 {
		return part.Topic
	}
	return hex.EncodeToString(id[:]) // deleted, or not led here
}

func (a *shareActor) view() View {
	var v View
	for _, id := range a.c.Groups() {
		d := a.c.Describe(id, inspectRecords)
		g := GroupView{ID: d.ID, State: d.State, Epoch: d.Epoch, Members: []MemberView{}, Partitions: []PartitionView{}}
		for _, m := range d.Members {
			mv := MemberView{ID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost, Epoch: m.Epoch, Subscribed: m.Subscribed, Assignment: map[string][]int32{}}
			for _, tid := range slices.SortedFunc(maps.Keys(m.Assignment), func(x, y sharegroup.TopicID) int { return slices.Compare(x[:], y[:]) }) {
				mv.Assignment[a.topicName(tid, m.Assignment[tid][0])] = m.Assignment[tid]
			}
			g.Members = append(g.Members, mv)
		}
		for _, p := range d.Partitions {
			pv := PartitionView{Topic: a.topicName(p.TP.Topic, p.TP.Partition), Partition: p.TP.Partition, SPSO: p.Start, SPEO: p.End,
				Available: p.Available, Acquired: p.Acquired, Done: p.Done, Acquisition: p.Stats.Acquired,
				Redelivered: p.Stats.Redelivered, Archived: p.Stats.Archived, Expired: p.Stats.Expired, InFlight: []RecordView{}}
			for _, r := range p.InFlight {
				rv := RecordView{Offset: r.Offset, State: r.State.String(), Deliveries: r.Deliveries, Member: r.Member}
				if !r.Deadline.IsZero() {
					dl := r.Deadline
					rv.Deadline = &dl
				}
				pv.InFlight = append(pv.InFlight, rv)
			}
			g.Partitions = append(g.Partitions, pv)
		}
		v.Groups = append(v.Groups, g)
	}
	return v
}

// Stats are every share-partition's figures, for metrics.
func (h *Handle) Stats() []PartitionStats {
	req := &system.InspectRequest{Reply: make(chan any, 1)}
	h.Send(statsRequest{req})
	select {
	case v := <-req.Reply:
		return v.([]PartitionStats)
	case <-time.After(time.Second):
		return nil
	}
}

// PartitionStats are one share-partition's figures.
type PartitionStats struct {
	Group, Topic        string
	Partition           int32
	Start               int64
	Available, Acquired int
	Acquisitions        uint64
	Redelivered         uint64
	Archived            uint64
	Expired             uint64
	Accepted            uint64
	Released            uint64
}

type statsRequest struct{ *system.InspectRequest }

func (a *shareActor) stats() []PartitionStats {
	var out []PartitionStats
	for _, id := range a.c.Groups() {
		d := a.c.Describe(id, 0)
		for _, p := range d.Partitions {
			out = append(out, PartitionStats{Group: id, Topic: a.topicName(p.TP.Topic, p.TP.Partition), Partition: p.TP.Partition,
				Start: p.Start, Available: p.Available, Acquired: p.Acquired, Acquisitions: p.Stats.Acquired,
				Redelivered: p.Stats.Redelivered, Archived: p.Stats.Archived, Expired: p.Stats.Expired,
				Accepted: p.Stats.Accepted, Released: p.Stats.Released})
		}
	}
	return out
}
