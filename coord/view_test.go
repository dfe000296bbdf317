package coord

import "testing"

// applyEntity on a view with no entities yet (every fresh view) must not
// panic, and copies what it changes.
func TestViewApplyEntity(t *testing.T) {
	v := emptyView()
	k := newKeys("c")
	v.apply(k, k.entities(ClientQuotas)+"client-id=a/producer_byte_rate", []byte("10"))
	old := v.clone()
	v.apply(k, k.entities(ClientQuotas)+"client-id=a/consumer_byte_rate", []byte("20"))
	if got := v.Entities[ClientQuotas]["client-id=a"]; len(got) != 2 || got["consumer_byte_rate"] != "20" {
		t.Fatalf("entities %v", v.Entities)
	}
	if len(old.Entities[ClientQuotas]["client-id=a"]) != 1 {
		t.Fatalf("an older view changed: %v", old.Entities)
	}
	v.apply(k, k.entities(ClientQuotas)+"client-id=a/consumer_byte_rate", nil)
	v.apply(k, k.entities(ClientQuotas)+"client-id=a/producer_byte_rate", nil)
	if len(v.Entities[ClientQuotas]) != 0 || v.EntitiesRev != 4 {
		t.Fatalf("after removing every key: %v rev %d", v.Entities, v.EntitiesRev)
	}
}
