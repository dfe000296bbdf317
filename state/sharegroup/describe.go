package sharegroup

import (
	"maps"
	"slices"

	"kaas/model"
	"kaas/state/sharepartition"
)

// Description is a share group as ShareGroupDescribe and the inspector
// show it.
type Description struct {
	ID, State       string
	Epoch           int32
	AssignmentEpoch int32
	Members         []Member
	Partitions      []PartitionDescription
}

// PartitionDescription is one share-partition: its window and what is in
// flight.
type PartitionDescription struct {
	TP                        model.TopicIDPartition
	Start, End                int64
	Available, Acquired, Done int
	Stats                     sharepartition.Stats
	InFlight                  []sharepartition.Record
}

// Describe describes a group (nil: no such group); records lists up to
// that many in-flight records per partition.
func (c *Coordinator) Describe(id string, records int) *Description {
	g := c.groups[id]
	if g == nil {
		return nil
	}
	d := &Description{ID: id, State: g.State(), Epoch: g.Epoch, AssignmentEpoch: g.Epoch}
	for _, mid := range slices.Sorted(maps.Keys(g.Members)) {
		m := *g.Members[mid]
		m.Subscribed = slices.Clone(m.Subscribed)
		d.Members = append(d.Members, m)
	}
	for _, tp := range slices.SortedFunc(maps.Keys(g.Partitions), compareTP) {
		p := g.Partitions[tp]
		pd := PartitionDescription{TP: tp, Start: p.Start(), End: p.End(), Stats: p.Stats()}
		pd.Available, pd.Acquired, pd.Done = p.Counts()
		if records > 0 {
			pd.InFlight = p.InFlight(records)
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d
}

func compareTP(a, b model.TopicIDPartition) int {
	if c := slices.Compare(a.Topic[:], b.Topic[:]); c != 0 {
		return c
	}
	return int(a.Partition - b.Partition)
}
