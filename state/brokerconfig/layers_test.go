package brokerconfig

import (
	"fmt"
	"testing"
)

// TestTopicDefaultsAndSynonyms pins Apache's resolution: for a topic
// config the first broker synonym with a value wins (ms over minutes over
// hours, converted), while the synonym list is ordered by layer and cut
// before the first entry named after the topic config's main synonym.
func TestTopicDefaultsAndSynonyms(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		static, dynDef, dynBrkr map[string]string
		wantRetention           string
		wantSynonyms            string
	}{
		{"defaults", nil, nil, nil, "604800000", "[]"},
		{"static hours", map[string]string{"log.retention.hours": "1"}, nil, nil, "3600000", "[]"},
		{"static minutes beat static hours", map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2"}, nil, nil, "120000", "[]"},
		{"static ms", map[string]string{"log.retention.ms": "5"}, nil, nil, "5",
			"[{log.retention.ms 5 STATIC_BROKER_CONFIG} {log.retention.hours 168 DEFAULT_CONFIG}]"},
		{"dynamic default over static", map[string]string{"log.retention.ms": "5"}, map[string]string{"log.retention.ms": "6"}, nil, "6",
			"[{log.retention.ms 6 DYNAMIC_DEFAULT_BROKER_CONFIG} {log.retention.ms 5 STATIC_BROKER_CONFIG} {log.retention.hours 168 DEFAULT_CONFIG}]"},
		{"per-broker over everything", nil, map[string]string{"log.retention.ms": "6"}, map[string]string{"log.retention.ms": "7"}, "7",
			"[{log.retention.ms 7 DYNAMIC_BROKER_CONFIG} {log.retention.ms 6 DYNAMIC_DEFAULT_BROKER_CONFIG} {log.retention.hours 168 DEFAULT_CONFIG}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLayers(tc.static, tc.dynDef, tc.dynBrkr)
			if got := l.TopicDefaults()["retention.ms"]; got != tc.wantRetention {
				t.Errorf("retention.ms default %s, want %s", got, tc.wantRetention)
			}
			if got := fmt.Sprint(l.TopicSynonyms("retention.ms")); got != tc.wantSynonyms {
				t.Errorf("synonyms %s\nwant     %s", got, tc.wantSynonyms)
			}
		})
	}
}

func TestValidateDynamic(t *testing.T) {
	for _, tc := range []struct {
		values map[string]string
		ok     bool
	}{
		{map[string]string{"log.retention.ms": "1000", "log.segment.bytes": "2097152"}, true},
		{map[string]string{"log.segment.bytes": "2048"}, false}, // below 1 MiB (KIP-1030)
		{map[string]string{"log.retention.hours": "1"}, false},  // a unit variant is read-only
		{map[string]string{"num.partitions": "3"}, false},
		{map[string]string{"log.segment.bytes": "1"}, false},
		{map[string]string{"log.cleanup.policy": "compact"}, true},
		{map[string]string{"log.cleanup.policy": "shred"}, false},
		{map[string]string{"made.up": "1"}, false},
	} {
		if err := ValidateDynamic(tc.values); (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.values, err)
		}
	}
}
