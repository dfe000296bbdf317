package broker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestCompactedTopicConfigs: cleanup.policy=compact and the cleaner's
// configs through CreateTopics, IncrementalAlterConfigs (SET, APPEND,
// SUBTRACT) and the broker default, described with their source; bad
// values get INVALID_CONFIG with Apache's messages.
func TestCompactedTopicConfigs(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "table", 1, map[string]*string{
		"cleanup.policy":            kmsg.StringPtr("compact"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.1"),
		"delete.retention.ms":       kmsg.StringPtr("1000"),
		"min.compaction.lag.ms":     kmsg.StringPtr("0"),
		"max.compaction.lag.ms":     kmsg.StringPtr("60000"),
		"segment.ms":                kmsg.StringPtr("100"),
	})
	rc := describeTopic(t, b.Addr(), "table")
	for name, want := range map[string]string{
		"cleanup.policy":            "cleanup.policy=compact DYNAMIC_TOPIC_CONFIG",
		"min.cleanable.dirty.ratio": "min.cleanable.dirty.ratio=0.1 DYNAMIC_TOPIC_CONFIG",
		"delete.retention.ms":       "delete.retention.ms=1000 DYNAMIC_TOPIC_CONFIG",
		"max.compaction.lag.ms":     "max.compaction.lag.ms=60000 DYNAMIC_TOPIC_CONFIG",
		"segment.ms":                "segment.ms=100 DYNAMIC_TOPIC_CONFIG",
	} {
		if got := summary(configOf(t, rc, name)); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if err := alterTopic(t, b.Addr(), "table", false, kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}); err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, describeTopic(t, b.Addr(), "table"), "cleanup.policy"); *c.Value != "compact,delete" {
		t.Fatalf("after APPEND delete: %s", summary(c))
	}
	if err := alterTopic(t, b.Addr(), "table", false, kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}); err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, describeTopic(t, b.Addr(), "table"), "cleanup.policy"); *c.Value != "compact" {
		t.Fatalf("after SUBTRACT delete: %s", summary(c))
	}

	for _, tc := range []struct {
		name string
		cfg  kadm.AlterConfig
		msg  string
	}{
		{"unknown policy word", set("cleanup.policy", "compact,shred"), "Invalid value compact,shred for configuration cleanup.policy: String must be one of: compact, delete"},
		{"append an unknown word", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("shred")}, "String must be one of: compact, delete"},
		{"negative min lag", set("min.compaction.lag.ms", "-1"), "Invalid value -1 for configuration min.compaction.lag.ms: Value must be at least 0"},
		{"zero max lag", set("max.compaction.lag.ms", "0"), "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"},
		{"min lag above max lag", set("min.compaction.lag.ms", "120000"), "conflict topic config setting min.compaction.lag.ms (120000) > max.compaction.lag.ms (60000)"},
		{"dirty ratio above 1", set("min.cleanable.dirty.ratio", "1.5"), "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be between 0 and 1"},
		{"dirty ratio not a number", set("min.cleanable.dirty.ratio", "half"), "Not a number of type DOUBLE"},
		{"negative delete retention", set("delete.retention.ms", "-1"), "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0"},
		{"zero segment.ms", set("segment.ms", "0"), "Invalid value 0 for configuration segment.ms: Value must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := alterTopic(t, b.Addr(), "table", false, tc.cfg)
			if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%v, want INVALID_CONFIG with %q", err, tc.msg)
			}
		})
	}

	// The broker default: a topic without an override takes it, and says so.
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, 20*time.Second)
	brokertest.CreateTopic(t, b.Addr(), "plain", 1, nil)
	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.cleanup.policy", "compact"), set("log.cleaner.threads", "2"),
		set("log.cleaner.dedupe.buffer.size", "33554432"), set("log.cleaner.backoff.ms", "500"), set("log.cleaner.io.max.bytes.per.second", "1.0E8")})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("%v %v %s", err, resp[0].Err, resp[0].ErrMessage)
	}
	if got := summary(configOf(t, describeTopic(t, b.Addr(), "plain"), "cleanup.policy")); !strings.HasPrefix(got,
		"cleanup.policy=compact DYNAMIC_DEFAULT_BROKER_CONFIG [DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete]") {
		t.Fatalf("broker default: %s", got)
	}
	brokers, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"log.cleaner.threads":            "log.cleaner.threads=2 DYNAMIC_DEFAULT_BROKER_CONFIG",
		"log.cleaner.dedupe.buffer.size": "log.cleaner.dedupe.buffer.size=33554432 DYNAMIC_DEFAULT_BROKER_CONFIG",
		"log.cleaner.backoff.ms":         "log.cleaner.backoff.ms=500 DYNAMIC_DEFAULT_BROKER_CONFIG",
		"log.cleaner.enable":             "log.cleaner.enable=true DEFAULT_CONFIG",
	} {
		if got := summary(configOf(t, brokers[0], name)); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	r2, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.cleaner.threads", "0")})
	if err != nil || !errors.Is(r2[0].Err, kerr.InvalidRequest) || !strings.Contains(r2[0].ErrMessage, "Log cleaner threads should be at least 1") {
		t.Fatalf("threads=0: %v %v %s", err, r2[0].Err, r2[0].ErrMessage)
	}
	r3, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.cleaner.enable", "false")})
	if err != nil || !errors.Is(r3[0].Err, kerr.InvalidRequest) {
		t.Fatalf("log.cleaner.enable is read-only: %v %v", err, r3[0].Err)
	}
}

// TestCompactedTopicRefusesKeylessRecords: a record without a key cannot
// be compacted; Apache refuses the batch with INVALID_RECORD.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "table", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact,delete")})
	cl := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("table"), kgo.RecordRetries(0))
	ctx := brokertest.Context(t, 20*time.Second)
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed record: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k")}).FirstErr(); err != nil {
		t.Fatalf("tombstone: %v", err)
	}
}
