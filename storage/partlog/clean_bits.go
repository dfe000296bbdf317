package partlog

import "math/bits"

// dirtyBits are two bitmaps over the dirty offsets a pass maps, filled
// while the map is built, so that copying the dirty part of the log asks
// them, not the map: looking a key up again there (hashing it, and a
// probe into a table far larger than the caches) was half of a pass's
// CPU on a table whose keys are all dirty.
//
//   - drop: the record at that offset goes: a later record of its key
//     was mapped (the map's put replaced its offset), or it has no key;
//   - slow: the batch holding that offset must be decoded and decided
//     record by record: it holds a tombstone (kept or not by its delete
//     horizon, and a kept one needs a horizon stamped), or its record
//     count does not match its header.
//
// They cover [from, to): every data batch wholly inside was mapped whole
// (to is the first offset the map did not take), so a batch with no bit
// set keeps all its records and is written as it was, without decoding,
// and one whose records all have their drop bit (and no slow bit) goes
// whole, without decoding either. Their words count against the map's
// budget as they grow: a pass whose bitmaps would not fit stops there,
// as when its keys do not.
type dirtyBits struct {
	drop, slow []uint64
	from, to   int64
	span       int64 // the most offsets they may need to cover
}

// startBits begins the bitmaps at from, for at most span offsets.
func (m *offsetMap) startBits(from, span int64) {
	m.bits = &dirtyBits{from: from, to: from, span: max(span, 1)}
}

// coverBits makes the bitmaps reach offset last; false (nothing grown)
// when that goes over the budget, unless force.
func (m *offsetMap) coverBits(last int64, force bool) bool {
	b := m.bits
	need := int((last-b.from)/64 + 1)
	if need <= len(b.drop) {
		return true
	}
	words := min(max(need, 2*len(b.drop), 1024), int((b.span+63)/64))
	words = max(words, need)
	cost := int64(words-len(b.drop)) * 16
	if !force && cost > m.budget-m.used {
		return false
	}
	drop, slow := make([]uint64, words), make([]uint64, words)
	copy(drop, b.drop)
	copy(slow, b.slow)
	b.drop, b.slow = drop, slow
	m.used += cost
	return true
}

// markDrop sets the drop bit of off (covered).
func (b *dirtyBits) markDrop(off int64) {
	i := off - b.from
	b.drop[i>>6] |= 1 << (i & 63)
}

// markSlow sets the slow bit of off (covered).
func (b *dirtyBits) markSlow(off int64) {
	i := off - b.from
	b.slow[i>>6] |= 1 << (i & 63)
}

// dropped says whether the record at off (covered) goes.
func (b *dirtyBits) dropped(off int64) bool {
	i := off - b.from
	return b.drop[i>>6]&(1<<(i&63)) != 0
}

// covers says whether the batch lies wholly in the bitmaps' range.
func (b *dirtyBits) covers(h BatchHeader) bool {
	return b != nil && h.BaseOffset >= b.from && h.LastOffset() < b.to
}

// count is the number of bits set in words for offsets lo..hi (covered).
func (b *dirtyBits) count(words []uint64, lo, hi int64) int {
	lo, hi = lo-b.from, hi-b.from
	first, last := lo>>6, hi>>6
	loMask := ^uint64(0) << (lo & 63)
	hiMask := ^uint64(0) >> (63 - hi&63)
	if first == last {
		return bits.OnesCount64(words[first] & loMask & hiMask)
	}
	n := bits.OnesCount64(words[first]&loMask) + bits.OnesCount64(words[last]&hiMask)
	for _, w := range words[first+1 : last] {
		n += bits.OnesCount64(w)
	}
	return n
}
