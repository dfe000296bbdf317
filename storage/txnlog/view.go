package txnlog

import (
	"sort"
	"sync/atomic"

	"kaas/model/slots"
	"kaas/model/txnstate"
)

// View is the durable coordinator state as readers see it — produce
// verification on partition actors (KIP-890, R-PV-6), a transactional
// id's actor starting, DescribeTransactions — without asking the writer
// and without a lock. Per slot it is an immutable map from transactional
// id to an atomically replaced entry: a transition stores one pointer, a
// new id replaces the slot's map (rare: once per id), and an expired id
// leaves a nil entry that is swept when they make up half the map.
type View struct {
	slots [slots.Count]atomic.Pointer[slotView]
}

type slotView struct {
	epoch   int32
	entries map[string]*atomic.Pointer[txnstate.Entry]
	deleted int
}

func (v *View) slot(id string) *slotView { return v.slots[slots.Of(id)].Load() }

// Get returns a copy of id's durable entry.
func (v *View) Get(id string) (txnstate.Entry, bool) {
	sv := v.slot(id)
	if sv == nil {
		return txnstate.Entry{}, false
	}
	p := sv.entries[id]
	if p == nil {
		return txnstate.Entry{}, false
	}
	e := p.Load()
	if e == nil {
		return txnstate.Entry{}, false
	}
	return e.Clone(), true
}

// CoordinatorEpoch is the ownership epoch of id's slot (R-MRK-3).
func (v *View) CoordinatorEpoch(id string) int32 {
	if sv := v.slot(id); sv != nil {
		return sv.epoch
	}
	return 0
}

// MaxCoordinatorEpoch is the highest ownership epoch of any slot: no
// marker this broker's coordinator wrote carries a higher one.
func (v *View) MaxCoordinatorEpoch() int32 {
	epoch := int32(-1)
	for i := range v.slots {
		if sv := v.slots[i].Load(); sv != nil {
			epoch = max(epoch, sv.epoch)
		}
	}
	return epoch
}

// All returns every durable entry, sorted by transactional id.
func (v *View) All() []txnstate.Entry {
	var out []txnstate.Entry
	for i := range v.slots {
		sv := v.slots[i].Load()
		if sv == nil {
			continue
		}
		for _, p := range sv.entries {
			if e := p.Load(); e != nil {
				out = append(out, e.Clone())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

// The writer's side: one goroutine at a time.

func (v *View) setSlot(n int, epoch int32, entries map[string]txnstate.Entry) {
	sv := &slotView{epoch: epoch, entries: make(map[string]*atomic.Pointer[txnstate.Entry], len(entries))}
	for id, e := range entries {
		p := &atomic.Pointer[txnstate.Entry]{}
		e := e.Clone()
		p.Store(&e)
		sv.entries[id] = p
	}
	v.slots[n].Store(sv)
}

func (v *View) put(e txnstate.Entry) {
	e = e.Clone()
	n := slots.Of(e.TransactionalID)
	sv := v.slots[n].Load()
	if p := sv.entries[e.TransactionalID]; p != nil {
		if p.Load() == nil {
			sv.deleted--
		}
		p.Store(&e)
		return
	}
	next := &slotView{epoch: sv.epoch, deleted: sv.deleted, entries: make(map[string]*atomic.Pointer[txnstate.Entry], len(sv.entries)+1)}
	for id, p := range sv.entries {
		next.entries[id] = p
	}
	p := &atomic.Pointer[txnstate.Entry]{}
	p.Store(&e)
	next.entries[e.TransactionalID] = p
	v.slots[n].Store(next)
}

func (v *View) remove(id string) {
	n := slots.Of(id)
	sv := v.slots[n].Load()
	p := sv.entries[id]
	if p == nil || p.Load() == nil {
		return
	}
	p.Store(nil)
	sv.deleted++
	if sv.deleted*2 < len(sv.entries) {
		return
	}
	next := &slotView{epoch: sv.epoch, entries: make(map[string]*atomic.Pointer[txnstate.Entry], len(sv.entries)-sv.deleted)}
	for id, p := range sv.entries {
		if p.Load() != nil {
			next.entries[id] = p
		}
	}
	v.slots[n].Store(next)
}
