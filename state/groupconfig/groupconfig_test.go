package groupconfig

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	d := NewDefaults(map[string]string{ShareSessionTimeout: "45000", ShareHeartbeatInterval: "5000"})
	for _, tc := range []struct {
		values map[string]string
		err    string // a substring; "" is valid
	}{
		{map[string]string{}, ""},
		{map[string]string{ShareAutoOffsetReset: "earliest", ShareRecordLockDuration: "15000"}, ""},
		{map[string]string{ShareAutoOffsetReset: "LATEST"}, ""},
		{map[string]string{ShareAutoOffsetReset: "by_duration:PT1H30M"}, ""},
		{map[string]string{ShareAutoOffsetReset: "by_duration:P1DT0.5S"}, ""},
		{map[string]string{ShareAutoOffsetReset: "by_duration:-PT1H"}, "negative"},
		{map[string]string{ShareAutoOffsetReset: "by_duration:PT"}, "cannot be parsed"},
		{map[string]string{ShareAutoOffsetReset: "none"}, "must be either 'earliest', 'latest'"},
		{map[string]string{ShareIsolationLevel: "read_committed"}, ""},
		{map[string]string{ShareIsolationLevel: "serializable"}, "String must be one of"},
		{map[string]string{ShareRenewAcknowledgeEnable: "maybe"}, "either true or false"},
		{map[string]string{"share.unknown": "1"}, "Unknown group config name: share.unknown"},
		{map[string]string{ShareRecordLockDuration: "abc"}, "Not a number of type INT"},
		{map[string]string{ShareRecordLockDuration: "999"}, "Value must be at least 1000"},
		{map[string]string{ShareRecordLockDuration: "14999"}, "must be greater than or equal to group.share.min.record.lock.duration.ms"},
		{map[string]string{ShareRecordLockDuration: "60001"}, "must be less than or equal to group.share.max.record.lock.duration.ms"},
		{map[string]string{ShareDeliveryCountLimit: "11"}, "share.delivery.count.limit must be less than or equal to"},
		{map[string]string{SharePartitionMaxRecordLocks: "99"}, "Value must be at least 100"},
		{map[string]string{ShareSessionTimeout: "50000", ShareHeartbeatInterval: "15000"}, ""},
		{map[string]string{ShareHeartbeatInterval: "4999"}, "must be greater than or equal to group.share.min.heartbeat.interval.ms"},
		{map[string]string{StreamsNumStandbyReplicas: "3"}, "must be less than or equal to group.streams.max.standby.replicas"},
	} {
		err := d.Validate(tc.values)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.values, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: got %v, want %q", tc.values, err, tc.err)
		}
	}
}

// A broker run with a value outside Apache's bounds (tests run short
// timeouts) accepts that value for its groups too.
func TestBrokerValueWidensBounds(t *testing.T) {
	d := NewDefaults(map[string]string{ShareSessionTimeout: "2000", ShareHeartbeatInterval: "200"})
	if err := d.Validate(map[string]string{ShareSessionTimeout: "3000"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(map[string]string{ShareSessionTimeout: "1000"}); err == nil {
		t.Fatal("a session timeout below the broker's and Apache's minimum passed")
	}
	if err := d.Validate(map[string]string{ShareHeartbeatInterval: "5000", ShareSessionTimeout: "5000"}); err == nil ||
		!strings.Contains(err.Error(), "share.session.timeout.ms must be greater than share.heartbeat.interval.ms") {
		t.Fatalf("got %v", err)
	}
}

func TestEffective(t *testing.T) {
	d := NewDefaults(map[string]string{ShareRecordLockDuration: "20000"})
	e := d.Effective(map[string]string{ShareDeliveryCountLimit: " 3 "})
	if Millis(e, ShareRecordLockDuration) != 20*time.Second || Int(e, ShareDeliveryCountLimit) != 3 ||
		e[ShareAutoOffsetReset] != "latest" || e[ShareIsolationLevel] != "read_uncommitted" {
		t.Fatalf("effective %v", e)
	}
	if len(Names()) != len(Specs) {
		t.Fatal("names")
	}
	s, by, err := ParseAutoOffsetReset("by_duration:P1DT2H3M4.5S")
	if err != nil || s != "by_duration" || by != 26*time.Hour+3*time.Minute+4500*time.Millisecond {
		t.Fatalf("%s %v %v", s, by, err)
	}
}
