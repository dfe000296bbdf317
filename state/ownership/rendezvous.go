// Package ownership decides which live broker owns each unit (a
// partition, a transaction slot, an offsets slot) by rendezvous (highest
// random weight) hashing: every broker computes the same answer from the
// same member list, with no coordination, and when a broker joins or
// leaves only the units it gains or loses move. Pure: no etcd, no clock.
package ownership

import (
	"hash/fnv"
	"sort"
)

// weight is the unit's score for a member: a hash of the unit mixed with
// the member id through splitmix64, so scores of one unit across members
// are independent.
func weight(unitHash uint64, member int32) uint64 {
	x := unitHash ^ (uint64(uint32(member)) * 0x9e3779b97f4a7c15)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hashUnit(unit string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(unit))
	return h.Sum64()
}

// Owner is the member with the highest weight for unit, or -1 when there
// are no members. Ties (astronomically rare) go to the lower id.
func Owner(unit string, members []int32) int32 {
	if len(members) == 0 {
		return -1
	}
	uh := hashUnit(unit)
	best, bestW := members[0], weight(uh, members[0])
	for _, m := range members[1:] {
		w := weight(uh, m)
		if w > bestW || (w == bestW && m < best) {
			best, bestW = m, w
		}
	}
	return best
}

// Ranked lists members from the preferred owner down: when the owner
// dies, the next live one in this order takes over.
func Ranked(unit string, members []int32) []int32 {
	uh := hashUnit(unit)
	out := append([]int32(nil), members...)
	sort.Slice(out, func(i, j int) bool {
		wi, wj := weight(uh, out[i]), weight(uh, out[j])
		if wi != wj {
			return wi > wj
		}
		return out[i] < out[j]
	})
	return out
}
