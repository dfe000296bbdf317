package consumergroup

import "kaas/model"

// removal is what a client's DeleteGroups or OffsetDelete took from the
// group in memory, kept until its tombstones are durable: if they fail,
// the client is answered an error and the group is put back as it was,
// so that what it reads now matches what a restart or the next
// coordinator will load (Apache's coordinator runtime likewise reverts
// its in-memory state to the snapshot taken before a write that failed).
// The deletion is applied at once rather than after the write so that
// requests arriving meanwhile see it, as in Apache: a deleted group is
// Dead, refusing commits and joins, until the write is answered.
type removal struct {
	seq         uint64 // g.removals once the cleanup that follows ran
	state       State
	stateTimeMs int64
	offsets     map[model.TopicPartition]Offset // committed offsets it removes
}

// beforeRemoving records the group and the committed offsets of tps as
// they stand, just before a delete removes them and calls cleanup
// (which numbers it).
func (g *Group) beforeRemoving(tps []model.TopicPartition) removal {
	r := removal{seq: g.removals + 1, state: g.state, stateTimeMs: g.stateTimeMs, offsets: map[model.TopicPartition]Offset{}}
	for _, tp := range tps {
		if o, ok := g.offsets[tp]; ok {
			r.offsets[tp] = o
		}
	}
	return r
}

// undo puts back what r removed, after its tombstones failed: each
// offset that no commit has replaced since, and the group's state unless
// a later cleanup or an unload ran (a later delete may have made the
// group Dead and succeeded; an unloaded group is leaving this broker).
// A Dead group refuses every request, so reviving it to its old state
// loses nothing that happened meanwhile.
func (g *Group) undo(r removal) {
	for tp, o := range r.offsets {
		_, committed := g.offsets[tp]
		_, inFlight := g.pendingCommits[tp]
		if !committed && !inFlight {
			g.offsets[tp] = o
		}
	}
	if g.state == Dead && r.state != Dead && g.removals == r.seq {
		// Not a transition (Dead has none): the deletion never happened.
		g.state, g.stateTimeMs = r.state, r.stateTimeMs
	}
}
