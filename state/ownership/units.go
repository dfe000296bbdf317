package ownership

import (
	"fmt"
	"strconv"
	"strings"
)

// A unit's name is formatted and parsed here only. The names are also the
// etcd owner keys' last path elements, so they must stay stable:
// p/<topic>/<partition>, t/<slot>, g/<slot>.

// PartitionUnit names a partition.
func PartitionUnit(topic string, partition int32) string {
	return fmt.Sprintf("p/%s/%d", topic, partition)
}

// TopicUnitsPrefix is what the units of every partition of topic begin
// with (topic names hold no '/').
func TopicUnitsPrefix(topic string) string { return "p/" + topic + "/" }

// TxnSlotUnit names transaction-state slot n (0–49): Apache's
// __transaction_state partition n. Each slot is owned on its own.
func TxnSlotUnit(slot int) string { return fmt.Sprintf("t/%d", slot) }

// OffsetsSlotUnit names group-offsets slot n (0–49): Apache's
// __consumer_offsets partition n.
func OffsetsSlotUnit(slot int) string { return fmt.Sprintf("g/%d", slot) }

// ParsePartitionUnit is PartitionUnit's inverse.
func ParsePartitionUnit(unit string) (topic string, partition int32, ok bool) {
	rest, found := strings.CutPrefix(unit, "p/")
	i := strings.LastIndexByte(rest, '/')
	if !found || i < 1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil {
		return "", 0, false
	}
	return rest[:i], int32(n), true
}

// ParseSlotUnit is the inverse of TxnSlotUnit (txn true) and
// OffsetsSlotUnit, for slots 0 to count-1.
func ParseSlotUnit(unit string, count int) (txn bool, slot int, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(unit, "t/"):
		txn, rest = true, unit[2:]
	case strings.HasPrefix(unit, "g/"):
		rest = unit[2:]
	default:
		return false, 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n >= count {
		return false, 0, false
	}
	return txn, n, true
}
