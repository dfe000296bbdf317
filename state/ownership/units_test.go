package ownership

import (
	"strings"
	"testing"
)

func TestUnitNamesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		topic string
		p     int32
	}{{"orders", 0}, {"a.b-c_d", 2147483647}, {"x", 7}} {
		unit := PartitionUnit(tc.topic, tc.p)
		if !strings.HasPrefix(unit, TopicUnitsPrefix(tc.topic)) {
			t.Errorf("%q does not begin with %q", unit, TopicUnitsPrefix(tc.topic))
		}
		if topic, p, ok := ParsePartitionUnit(unit); !ok || topic != tc.topic || p != tc.p {
			t.Errorf("ParsePartitionUnit(%q) = %q, %d, %v", unit, topic, p, ok)
		}
	}
	for n := range 50 {
		if txn, slot, ok := ParseSlotUnit(TxnSlotUnit(n), 50); !ok || !txn || slot != n {
			t.Errorf("txn slot %d: %v %d %v", n, txn, slot, ok)
		}
		if txn, slot, ok := ParseSlotUnit(OffsetsSlotUnit(n), 50); !ok || txn || slot != n {
			t.Errorf("offsets slot %d: %v %d %v", n, txn, slot, ok)
		}
	}
	for _, bad := range []string{"", "p/", "p//1", "p/t", "p/t/x", "p/t/99999999999", "q/t/1", "t/1"} {
		if _, _, ok := ParsePartitionUnit(bad); ok {
			t.Errorf("ParsePartitionUnit(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "t/", "t/50", "g/-1", "g/x", "p/t/1"} {
		if _, _, ok := ParseSlotUnit(bad, 50); ok {
			t.Errorf("ParseSlotUnit(%q) accepted", bad)
		}
	}
}
