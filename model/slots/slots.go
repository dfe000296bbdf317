// Package slots maps transactional ids and group ids onto the 50
// coordinator slots, exactly as Apache partitions __transaction_state and
// __consumer_offsets.
package slots

// Count is the number of coordinator slots transactional ids and groups
// hash onto (transaction.state.log.num.partitions and
// offsets.topic.num.partitions, both 50), so a later multi-broker split can
// move whole slots.
const Count = 50

// Of is R-CRD-1: abs(Java String.hashCode(id)) % 50, hashing UTF-16
// code units with int32 wrap-around, abs(MinInt32) = 0.
func Of(id string) int {
	var h int32
	for _, r := range id {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == -2147483648 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return int(h) % Count
}
