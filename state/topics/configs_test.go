package topics

import "testing"

func TestValidateConfigs(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		ok      bool
	}{
		{map[string]string{"retention.ms": "-1", "retention.bytes": "-5", "segment.bytes": "1048576"}, true},
		{map[string]string{"cleanup.policy": "delete", "message.timestamp.type": "LogAppendTime"}, true},
		{map[string]string{"cleanup.policy": " delete , delete"}, true},
		{map[string]string{"min.cleanable.dirty.ratio": "0.7", "preallocate": "TRUE"}, true},
		{map[string]string{"retention.ms": "-2"}, false},
		{map[string]string{"segment.bytes": "1048575"}, false}, // Kafka 4.0's floor (KIP-1030)
		{map[string]string{"segment.bytes": "14"}, false},
		{map[string]string{"internal.segment.bytes": "100"}, false}, // tests only
		{map[string]string{"segment.bytes": "3000000000"}, false},   // INT
		{map[string]string{"cleanup.policy": "compact"}, true},
		{map[string]string{"cleanup.policy": "delete,compact"}, true},
		{map[string]string{"cleanup.policy": "compact,shred"}, false},
		{map[string]string{"min.compaction.lag.ms": "-1"}, false},
		{map[string]string{"max.compaction.lag.ms": "0"}, false},
		{map[string]string{"delete.retention.ms": "-1"}, false},
		{map[string]string{"min.cleanable.dirty.ratio": "1.5"}, false},
		{map[string]string{"min.cleanable.dirty.ratio": "-0.1"}, false},
		{map[string]string{"cleanup.policy": "shred"}, false},
		{map[string]string{"compression.type": "zstd"}, false},
		{map[string]string{"compression.type": "producer"}, true},
		{map[string]string{"remote.storage.enable": "true"}, false},
		{map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, false},
		{map[string]string{"preallocate": "yes"}, false},
		{map[string]string{"unknown.config": "1"}, false},
	} {
		if err := ValidateConfigs(tc.configs, false); (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.configs, err)
		}
	}
}

// internal.segment.bytes, where the broker allows it (tests), replaces
// segment.bytes below its floor.
func TestInternalSegmentBytes(t *testing.T) {
	c := map[string]string{"internal.segment.bytes": "100", "segment.bytes": "2097152"}
	if err := ValidateConfigs(c, true); err != nil {
		t.Fatal(err)
	}
	if err := ValidateConfigs(map[string]string{"internal.segment.bytes": "13"}, true); err == nil {
		t.Fatal("internal.segment.bytes=13 accepted")
	}
	if r := Resolve(c, nil); r.Log.SegmentBytes != 100 {
		t.Fatalf("segment size %d, want internal.segment.bytes' 100", r.Log.SegmentBytes)
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"retention.ms", " 0100 ", "100"},
		{"preallocate", "TRUE", "true"},
		{"cleanup.policy", " delete , ", "delete"},
		{"min.cleanable.dirty.ratio", "1", "1.0"},
		{"min.cleanable.dirty.ratio", "0.25", "0.25"},
		{"message.timestamp.type", " CreateTime ", "CreateTime"},
	} {
		if got := Canonical(Specs[tc.name].Type, tc.in); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestSpecsMatchApache37: the 31 topic configs of Apache 3.7, each with a
// default its own validator accepts.
func TestSpecsMatchApache37(t *testing.T) {
	if len(Specs) != 31 {
		t.Fatalf("%d topic configs, want 31", len(Specs))
	}
	for name, s := range Specs {
		if err := s.Validate(s.Default); err != nil {
			t.Errorf("%s: default %q rejected: %v", name, s.Default, err)
		}
		if s.Doc == "" {
			t.Errorf("%s: no documentation", name)
		}
	}
}

// cleanup.policy resolves to the log's Compact and Delete, with the
// cleaner's configs beside it.
func TestResolveCleanupPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy          string
		compact, delete bool
	}{
		{"delete", false, true}, {"compact", true, false}, {"compact,delete", true, true}, {" delete , compact ", true, true},
	} {
		r := Resolve(map[string]string{"cleanup.policy": tc.policy, "min.cleanable.dirty.ratio": "0.25", "delete.retention.ms": "5"}, nil)
		if r.Log.Compact != tc.compact || r.Log.Delete != tc.delete || r.Log.MinCleanableRatio != 0.25 || r.Log.DeleteRetentionMs != 5 {
			t.Errorf("%q: %+v", tc.policy, r.Log)
		}
	}
	if r := Resolve(nil, map[string]string{"cleanup.policy": "compact"}); !r.Log.Compact || r.Log.Delete {
		t.Errorf("broker default compact: %+v", r.Log)
	}
}
