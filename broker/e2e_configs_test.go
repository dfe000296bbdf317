package broker_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// configOf finds one config of a described resource.
func configOf(t *testing.T, rc kadm.ResourceConfig, name string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("%s has no config %s", rc.Name, name)
	return kadm.Config{}
}

// describeTopic describes one topic through kadm (DescribeConfigs with
// synonyms) on a fresh client.
func describeTopic(t *testing.T, addr, topic string) kadm.ResourceConfig {
	t.Helper()
	rcs, err := brokertest.Admin(t, addr).DescribeTopicConfigs(brokertest.Context(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 1 {
		t.Fatalf("%d resources described", len(rcs))
	}
	return rcs[0]
}

// summary renders a config as value/source/synonyms for comparisons.
func summary(c kadm.Config) string {
	v := "null"
	if c.Value != nil {
		v = *c.Value
	}
	var syn []string
	for _, s := range c.Synonyms {
		syn = append(syn, fmt.Sprintf("%s:%s=%s", s.Source, s.Key, *s.Value))
	}
	return fmt.Sprintf("%s=%s %s [%s]", c.Key, v, c.Source, strings.Join(syn, ", "))
}

// TestDescribeTopicConfigs: all 31 topic configs of Apache 3.7 with their
// effective values, sources and synonyms, per version.
func TestDescribeTopicConfigs(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) { c.RetentionBytes = 1 << 30 }))
	brokertest.CreateTopic(t, b.Addr(), "described", 1, map[string]*string{"retention.ms": kmsg.StringPtr(" 1000 ")})
	rc := describeTopic(t, b.Addr(), "described")
	if rc.Err != nil || len(rc.Configs) != 31 {
		t.Fatalf("%v, %d configs, want 31", rc.Err, len(rc.Configs))
	}
	for _, want := range []string{
		// A topic override, in canonical form, and nothing else: Apache
		// drops log.retention.hours because log.retention.ms is unset.
		"retention.ms=1000 DYNAMIC_TOPIC_CONFIG [DYNAMIC_TOPIC_CONFIG:retention.ms=1000]",
		// Set on the command line (--retention-bytes).
		"retention.bytes=1073741824 STATIC_BROKER_CONFIG [STATIC_BROKER_CONFIG:log.retention.bytes=1073741824, DEFAULT_CONFIG:log.retention.bytes=-1]",
		"segment.bytes=1073741824 DEFAULT_CONFIG [DEFAULT_CONFIG:log.segment.bytes=1073741824]",
		"segment.ms=604800000 DEFAULT_CONFIG []",
		"cleanup.policy=delete DEFAULT_CONFIG [DEFAULT_CONFIG:log.cleanup.policy=delete]",
		"max.message.bytes=1048588 DEFAULT_CONFIG [DEFAULT_CONFIG:message.max.bytes=1048588]",
		"message.timestamp.type=CreateTime DEFAULT_CONFIG [DEFAULT_CONFIG:log.message.timestamp.type=CreateTime]",
		"leader.replication.throttled.replicas= DEFAULT_CONFIG []",
	} {
		name := want[:strings.Index(want, "=")]
		if got := summary(configOf(t, rc, name)); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}

	c := brokertest.Dial(t, b.Addr())
	describe := func(v int16, synonyms, docs bool, names ...string) kmsg.DescribeConfigsResponseResource {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(v)
		req.IncludeSynonyms, req.IncludeDocumentation = synonyms, docs
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "described", names
		req.Resources = append(req.Resources, rr)
		return c.RoundTrip(req).(*kmsg.DescribeConfigsResponse).Resources[0]
	}
	for v := int16(0); v <= 4; v++ {
		r := describe(v, true, true, "retention.ms", "segment.bytes", "no.such.config")
		if r.ErrorCode != 0 || len(r.Configs) != 2 {
			t.Fatalf("v%d: %v with %d configs, want the 2 known names asked for", v, kerr.ErrorForCode(r.ErrorCode), len(r.Configs))
		}
		ret, seg := r.Configs[0], r.Configs[1]
		if ret.Name != "retention.ms" || *ret.Value != "1000" || ret.ReadOnly || ret.IsSensitive {
			t.Fatalf("v%d: %+v", v, ret)
		}
		switch {
		case v == 0:
			if ret.IsDefault || !seg.IsDefault {
				t.Errorf("v0: IsDefault %v for an override, %v for a default", ret.IsDefault, seg.IsDefault)
			}
		default:
			if ret.Source != kmsg.ConfigSourceDynamicTopicConfig || len(ret.ConfigSynonyms) != 1 {
				t.Errorf("v%d: source %v, %d synonyms", v, ret.Source, len(ret.ConfigSynonyms))
			}
		}
		if v >= 3 && (ret.ConfigType != kmsg.ConfigTypeLong || seg.ConfigType != kmsg.ConfigTypeInt || ret.Documentation == nil || *ret.Documentation == "") {
			t.Errorf("v%d: types %v/%v, documentation %v", v, ret.ConfigType, seg.ConfigType, ret.Documentation)
		}
	}
	if r := describe(1, false, false); len(r.Configs) != 31 || len(r.Configs[0].ConfigSynonyms) != 0 {
		t.Fatalf("without synonyms: %d configs, %d synonyms", len(r.Configs), len(r.Configs[0].ConfigSynonyms))
	}

	for _, tc := range []struct {
		topic string
		want  error
	}{
		{"missing", kerr.UnknownTopicOrPartition},
		{"bad/name", kerr.InvalidTopicException},
	} {
		rcs, err := brokertest.Admin(t, b.Addr()).DescribeTopicConfigs(brokertest.Context(t, 10*time.Second), tc.topic)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(rcs[0].Err, tc.want) {
			t.Errorf("describing %s: %v, want %v", tc.topic, rcs[0].Err, tc.want)
		}
	}
}

// TestDescribeBrokerConfigs: this broker's configs with sources and the
// read-only flag; the empty name lists only cluster-wide dynamic
// defaults; another broker id is INVALID_REQUEST.
func TestDescribeBrokerConfigs(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) { c.DefaultPartitions = 3 }))
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, 10*time.Second)
	rcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("%v %v", err, rcs)
	}
	for _, want := range []string{
		"num.partitions=3 STATIC_BROKER_CONFIG [STATIC_BROKER_CONFIG:num.partitions=3, DEFAULT_CONFIG:num.partitions=1]",
		"auto.create.topics.enable=true DEFAULT_CONFIG [DEFAULT_CONFIG:auto.create.topics.enable=true]",
		"log.retention.ms=null DEFAULT_CONFIG []",
		"log.retention.hours=168 DEFAULT_CONFIG [DEFAULT_CONFIG:log.retention.hours=168]",
		"log.segment.bytes=1073741824 DEFAULT_CONFIG [DEFAULT_CONFIG:log.segment.bytes=1073741824]",
		"broker.id=0 STATIC_BROKER_CONFIG [STATIC_BROKER_CONFIG:broker.id=0, DEFAULT_CONFIG:broker.id=-1]",
		"log.flush.interval.messages=1 DEFAULT_CONFIG [DEFAULT_CONFIG:log.flush.interval.messages=1]",
	} {
		name := want[:strings.Index(want, "=")]
		if got := summary(configOf(t, rcs[0], name)); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	if l := configOf(t, rcs[0], "listeners"); l.Value == nil || *l.Value != "PLAINTEXT://"+b.Addr() {
		t.Errorf("listeners = %v, want PLAINTEXT://%s", l.Value, b.Addr())
	}

	// Read-only flags need the raw answer.
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"0", "", "7", "x"} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
		rr.ConfigNames = []string{"log.retention.ms", "log.retention.hours", "num.partitions"}
		req.Resources = append(req.Resources, rr)
	}
	logger := kmsg.NewDescribeConfigsRequestResource()
	logger.ResourceType, logger.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "0"
	req.Resources = append(req.Resources, logger)
	resp := brokertest.Dial(t, b.Addr()).RoundTrip(req).(*kmsg.DescribeConfigsResponse)
	readOnly := map[string]bool{}
	for _, c := range resp.Resources[0].Configs {
		readOnly[c.Name] = c.ReadOnly
	}
	if readOnly["log.retention.ms"] || !readOnly["log.retention.hours"] || !readOnly["num.partitions"] {
		t.Errorf("read-only flags %v: only log.retention.ms is dynamic", readOnly)
	}
	if r := resp.Resources[1]; r.ErrorCode != 0 || len(r.Configs) != 0 {
		t.Errorf("cluster defaults with none set: %v, %d configs", kerr.ErrorForCode(r.ErrorCode), len(r.Configs))
	}
	for _, r := range resp.Resources[2:] {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
			t.Errorf("resource %d/%q: %v, want INVALID_REQUEST with a message", r.ResourceType, r.ResourceName, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// alterTopic runs IncrementalAlterConfigs on one topic through kadm.
func alterTopic(t *testing.T, addr, topic string, validate bool, cfgs ...kadm.AlterConfig) error {
	t.Helper()
	adm := brokertest.Admin(t, addr)
	ctx := brokertest.Context(t, 10*time.Second)
	alter := adm.AlterTopicConfigs
	if validate {
		alter = adm.ValidateAlterTopicConfigs
	}
	resp, err := alter(ctx, cfgs, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp) != 1 {
		t.Fatalf("%d answers", len(resp))
	}
	if resp[0].Err != nil {
		return fmt.Errorf("%w: %s", resp[0].Err, resp[0].ErrMessage)
	}
	return nil
}

func set(name, value string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value}
}

// TestIncrementalAlterTopicConfigs: SET, DELETE, APPEND and SUBTRACT on a
// topic, validate_only, per-resource errors, persistence across a
// restart.
func TestIncrementalAlterTopicConfigs(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	brokertest.CreateTopic(t, b.Addr(), "altered", 1, map[string]*string{"retention.bytes": kmsg.StringPtr("5000")})

	if err := alterTopic(t, b.Addr(), "altered", false, set("retention.ms", "60000"), set("segment.bytes", "2097152"),
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.bytes"}); err != nil {
		t.Fatal(err)
	}
	rc := describeTopic(t, b.Addr(), "altered")
	for _, want := range []string{
		"retention.ms=60000 DYNAMIC_TOPIC_CONFIG",
		"segment.bytes=2097152 DYNAMIC_TOPIC_CONFIG",
		"retention.bytes=-1 DEFAULT_CONFIG",
	} {
		c := configOf(t, rc, want[:strings.Index(want, "=")])
		if got := fmt.Sprintf("%s=%s %s", c.Key, *c.Value, c.Source); got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}

	// validate_only changes nothing.
	if err := alterTopic(t, b.Addr(), "altered", true, set("retention.ms", "1")); err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, describeTopic(t, b.Addr(), "altered"), "retention.ms"); *c.Value != "60000" {
		t.Fatalf("validate_only changed retention.ms to %s", *c.Value)
	}

	// APPEND and SUBTRACT on a LIST start from its default.
	if err := alterTopic(t, b.Addr(), "altered", false, kadm.AlterConfig{Op: kadm.AppendConfig, Name: "leader.replication.throttled.replicas", Value: kmsg.StringPtr("0:0,1:0")}); err != nil {
		t.Fatal(err)
	}
	if err := alterTopic(t, b.Addr(), "altered", false, kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "leader.replication.throttled.replicas", Value: kmsg.StringPtr("0:0")}); err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, describeTopic(t, b.Addr(), "altered"), "leader.replication.throttled.replicas"); *c.Value != "1:0" {
		t.Fatalf("after APPEND and SUBTRACT: %q", *c.Value)
	}

	for _, tc := range []struct {
		name  string
		topic string
		cfg   kadm.AlterConfig
		want  error
		msg   string
	}{
		{"unknown policy", "altered", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("shred")}, kerr.InvalidConfig, "String must be one of: compact, delete"},
		{"append to a non-list", "altered", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: kmsg.StringPtr("1")}, kerr.InvalidConfig, "not LIST"},
		{"unknown config", "altered", set("no.such.config", "1"), kerr.InvalidConfig, "no.such.config"},
		{"bad value", "altered", set("retention.ms", "soon"), kerr.InvalidConfig, "retention.ms"},
		{"below minimum", "altered", set("segment.bytes", "1048575"), kerr.InvalidConfig, "at least 1048576"},
		{"unsupported compression", "altered", set("compression.type", "gzip"), kerr.InvalidConfig, "not supported yet"},
		{"null value", "altered", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms"}, kerr.InvalidRequest, "Null value"},
		{"unknown topic", "missing", set("retention.ms", "1"), kerr.UnknownTopicOrPartition, "does not exist"},
		{"invalid topic name", "bad/name", set("retention.ms", "1"), kerr.InvalidTopicException, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := alterTopic(t, b.Addr(), tc.topic, false, tc.cfg)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%v, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}

	// A resource twice in one request, and a config twice in one resource.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for i := 0; i < 2; i++ {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "altered"
		req.Resources = append(req.Resources, rr)
	}
	twice := kmsg.NewIncrementalAlterConfigsRequestResource()
	twice.ResourceType, twice.ResourceName = kmsg.ConfigResourceTypeTopic, "other"
	for i := 0; i < 2; i++ {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = "retention.ms", kmsg.StringPtr("1")
		twice.Configs = append(twice.Configs, rc)
	}
	req.Resources = append(req.Resources, twice)
	resp := brokertest.Dial(t, b.Addr()).RoundTrip(req).(*kmsg.IncrementalAlterConfigsResponse)
	for i, r := range resp.Resources {
		if r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("resource %d: %v, want INVALID_REQUEST", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}

	// Overrides are persisted in the topic's metadata file.
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	rc = describeTopic(t, b.Addr(), "altered")
	if c := configOf(t, rc, "retention.ms"); *c.Value != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("after restart: %s", summary(c))
	}
}

// TestAlterConfigsReplaces: the legacy AlterConfigs replaces a topic's
// whole set of overrides.
func TestAlterConfigsReplaces(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "replaced", 1, map[string]*string{"retention.bytes": kmsg.StringPtr("5000")})
	resp, err := brokertest.Admin(t, b.Addr()).AlterTopicConfigsState(brokertest.Context(t, 10*time.Second), []kadm.AlterConfig{set("retention.ms", "1234")}, "replaced")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("%v %v", err, resp)
	}
	rc := describeTopic(t, b.Addr(), "replaced")
	if c := configOf(t, rc, "retention.bytes"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.bytes kept its override: %s", summary(c))
	}
	if c := configOf(t, rc, "retention.ms"); *c.Value != "1234" {
		t.Errorf("retention.ms: %s", summary(c))
	}
}

// TestTopicConfigsTakeEffect: altered configs reach the partition actors:
// segment.bytes rolls segments, max.message.bytes rejects, retention.ms
// deletes, message.timestamp.type=LogAppendTime restamps and
// min.insync.replicas above 1 fails acks=all.
func TestTopicConfigsTakeEffect(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) { c.RetentionCheckInterval = 20 * time.Millisecond }))
	const topic = "effects"
	brokertest.CreateTopic(t, b.Addr(), topic, 1, nil)
	c := brokertest.Dial(t, b.Addr())
	produce := func(acks int16, batch []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return c.RoundTrip(brokertest.ProduceRequest(topic, 0, acks, batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	segments := func() int {
		m, _ := filepath.Glob(filepath.Join(b.DataDir(), topic+"-0", "*.log"))
		return len(m)
	}

	// Segments below segment.bytes' 1 MiB floor: Apache's test-only
	// internal.segment.bytes (brokertest allows it).
	if err := alterTopic(t, b.Addr(), topic, false, set("internal.segment.bytes", "200")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if r := produce(-1, brokertest.Batch(strings.Repeat("x", 150))); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if n := segments(); n != 3 {
		t.Fatalf("%d segments after 3 batches with internal.segment.bytes=200", n)
	}

	if err := alterTopic(t, b.Addr(), topic, false, set("max.message.bytes", "100")); err != nil {
		t.Fatal(err)
	}
	if r := produce(-1, brokertest.Batch(strings.Repeat("x", 150))); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("a 200-byte batch with max.message.bytes=100: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	if err := alterTopic(t, b.Addr(), topic, false, set("max.message.bytes", "1048588"), set("min.insync.replicas", "2")); err != nil {
		t.Fatal(err)
	}
	if r := produce(-1, brokertest.Batch("x")); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with min.insync.replicas=2: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := produce(1, brokertest.Batch("x")); r.ErrorCode != 0 {
		t.Fatalf("acks=1 with min.insync.replicas=2: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	if err := alterTopic(t, b.Addr(), topic, false, set("min.insync.replicas", "1"), set("message.timestamp.type", "LogAppendTime")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	before := time.Now().UnixMilli()
	r := produce(-1, brokertest.BuildBatchAt(old, "stamped"))
	if r.ErrorCode != 0 || r.LogAppendTime < before {
		t.Fatalf("LogAppendTime produce: %v, append time %d", kerr.ErrorForCode(r.ErrorCode), r.LogAppendTime)
	}
	recs := consumeN(t, b.Addr(), topic, 5)
	last := recs[len(recs)-1]
	if string(last.Value) != "stamped" || last.Timestamp.UnixMilli() != r.LogAppendTime || last.Attrs.TimestampType() != 1 {
		t.Fatalf("consumed %q at %v (type %d), want the append time %d", last.Value, last.Timestamp, last.Attrs.TimestampType(), r.LogAppendTime)
	}

	// Retention: two hour-old batches, each in its own segment, then a
	// fresh one; with retention.ms one minute the retention check (every
	// 20ms here) deletes the two old segments and moves the log start.
	brokertest.CreateTopic(t, b.Addr(), "retained", 1, map[string]*string{"internal.segment.bytes": kmsg.StringPtr("100")})
	for _, ts := range []time.Time{old, old, time.Now()} {
		pr := c.RoundTrip(brokertest.ProduceRequest("retained", 0, -1, brokertest.BuildBatchAt(ts, strings.Repeat("r", 50)))).(*kmsg.ProduceResponse)
		if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	if err := alterTopic(t, b.Addr(), "retained", false, set("retention.ms", "60000")); err != nil {
		t.Fatal(err)
	}
	adm := brokertest.Admin(t, b.Addr())
	brokertest.Eventually(t, 10*time.Second, "retention to delete the old segments", func() bool {
		starts, err := adm.ListStartOffsets(brokertest.Context(t, 5*time.Second), "retained")
		if err != nil {
			return false
		}
		o, _ := starts.Lookup("retained", 0)
		return o.Offset == 2
	})
	if m, _ := filepath.Glob(filepath.Join(b.DataDir(), "retained-0", "*.log")); len(m) != 1 {
		t.Fatalf("%d segment files left, want the fresh one", len(m))
	}
}

// TestAlterBrokerConfigs: dynamic broker configs, cluster-wide and for
// this broker, become the defaults of topics without overrides, are
// validated as Apache does (INVALID_REQUEST), and persist.
func TestAlterBrokerConfigs(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	brokertest.CreateTopic(t, b.Addr(), "plain", 1, nil)
	brokertest.CreateTopic(t, b.Addr(), "overridden", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("4194304")})
	alter := func(addr string, brokers []int32, cfgs ...kadm.AlterConfig) error {
		t.Helper()
		resp, err := brokertest.Admin(t, addr).AlterBrokerConfigs(brokertest.Context(t, 10*time.Second), cfgs, brokers...)
		if err != nil {
			t.Fatal(err)
		}
		if resp[0].Err != nil {
			return fmt.Errorf("%w: %s", resp[0].Err, resp[0].ErrMessage)
		}
		return nil
	}
	if err := alter(b.Addr(), nil, set("log.segment.bytes", "3145728")); err != nil {
		t.Fatal(err)
	}
	if got := summary(configOf(t, describeTopic(t, b.Addr(), "plain"), "segment.bytes")); got !=
		"segment.bytes=3145728 DYNAMIC_DEFAULT_BROKER_CONFIG [DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=3145728, DEFAULT_CONFIG:log.segment.bytes=1073741824]" {
		t.Fatalf("cluster default: %s", got)
	}
	if c := configOf(t, describeTopic(t, b.Addr(), "overridden"), "segment.bytes"); *c.Value != "4194304" {
		t.Fatalf("a topic override lost to a broker default: %s", summary(c))
	}
	if err := alter(b.Addr(), []int32{0}, set("log.segment.bytes", "1048576")); err != nil {
		t.Fatal(err)
	}
	if got := summary(configOf(t, describeTopic(t, b.Addr(), "plain"), "segment.bytes")); !strings.HasPrefix(got,
		"segment.bytes=1048576 DYNAMIC_BROKER_CONFIG [DYNAMIC_BROKER_CONFIG:log.segment.bytes=1048576, DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=3145728") {
		t.Fatalf("per-broker over cluster default: %s", got)
	}
	cluster, err := brokertest.Admin(t, b.Addr()).DescribeBrokerConfigs(brokertest.Context(t, 10*time.Second))
	if err != nil || len(cluster) != 1 || len(cluster[0].Configs) != 1 {
		t.Fatalf("cluster defaults: %v %+v", err, cluster)
	}

	// The partitions use it: 1 MiB segments, so each 700 KB batch rolls one.
	c := brokertest.Dial(t, b.Addr())
	for i := 0; i < 3; i++ {
		c.RoundTrip(brokertest.ProduceRequest("plain", 0, -1, brokertest.Batch(strings.Repeat("y", 700_000))))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "plain-0", "*.log")); len(m) != 3 {
		t.Fatalf("%d segments with log.segment.bytes=1048576", len(m))
	}

	for _, tc := range []struct {
		name    string
		brokers []int32
		cfg     kadm.AlterConfig
		msg     string
	}{
		{"per-broker not dynamic", []int32{0}, set("auto.create.topics.enable", "false"), "Cannot update"},
		{"not dynamic", nil, set("num.partitions", "3"), "Cannot update"},
		{"read-only synonym", nil, set("log.retention.hours", "1"), "Cannot update"},
		{"bad value", nil, set("log.retention.ms", "never"), "log.retention.ms"},
		{"unknown", nil, set("no.such.config", "1"), "no.such.config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := alter(b.Addr(), tc.brokers, tc.cfg); !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%v, want INVALID_REQUEST mentioning %q", err, tc.msg)
			}
		})
	}
	// Another broker's id (kadm would route it to that broker: ask this one).
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "3"
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "log.segment.bytes", kmsg.StringPtr("1048576")
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	if r := c.RoundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("another broker's id: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Persisted, and still applied after a restart; DELETE restores the
	// default.
	brokertest.Stop(t, b)
	if _, err := os.Stat(filepath.Join(dir, "__cluster", "configs", "cluster-default.json")); err != nil {
		t.Fatal(err)
	}
	b = brokertest.StartIn(t, dir)
	if c := configOf(t, describeTopic(t, b.Addr(), "plain"), "segment.bytes"); *c.Value != "1048576" {
		t.Fatalf("after restart: %s", summary(c))
	}
	if err := alter(b.Addr(), []int32{0}, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "log.segment.bytes"}); err != nil {
		t.Fatal(err)
	}
	if err := alter(b.Addr(), nil, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "log.segment.bytes"}); err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, describeTopic(t, b.Addr(), "plain"), "segment.bytes"); *c.Value != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after DELETE: %s", summary(c))
	}
}
