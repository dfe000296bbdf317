package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterGroupConfigsReq sets (value non-nil) or deletes configs of one
// group with IncrementalAlterConfigs and returns the resource's code and
// message.
func alterGroupConfigsReq(t *testing.T, cl *kgo.Client, group string, op kmsg.IncrementalAlterConfigOp, validateOnly bool, kvs ...string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = kvs[i], op
		if op != kmsg.IncrementalAlterConfigOpDelete {
			c.Value = kmsg.StringPtr(kvs[i+1])
		}
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}

// describeGroupConfigs describes one group's configs with synonyms and
// documentation.
func describeGroupConfigs(t *testing.T, cl *kgo.Client, group string, names ...string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, names
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0]
}

func configByName(r kmsg.DescribeConfigsResponseResource) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range r.Configs {
		out[c.Name] = c
	}
	return out
}

// TestGroupConfigs: GROUP config resources through the wire as Apache
// 4.2 — every group config described with the broker's value
// (DEFAULT_CONFIG) until the group sets its own (GROUP_CONFIG), set for
// a group that does not exist yet, validated with Apache's codes,
// listed by ListConfigResources, and still there after a restart.
func TestGroupConfigs(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir, func(c *Config) { c.ShareRecordLockDuration = 20 * time.Second })
	cl := newClient(t, b)

	d := describeGroupConfigs(t, cl, "g1")
	cfgs := configByName(d)
	if d.ErrorCode != 0 || len(cfgs) != 14 {
		t.Fatalf("described %d configs, code %d: %+v", len(cfgs), d.ErrorCode, d)
	}
	for name, want := range map[string]string{"share.record.lock.duration.ms": "20000", "share.auto.offset.reset": "latest",
		"share.isolation.level": "read_uncommitted", "share.delivery.count.limit": "5", "consumer.session.timeout.ms": "45000",
		"share.renew.acknowledge.enable": "true"} {
		c := cfgs[name]
		if c.Value == nil || *c.Value != want || c.Source != kmsg.ConfigSourceDefaultConfig || c.ReadOnly || c.Documentation == nil {
			t.Errorf("%s: %+v, want %s from DEFAULT_CONFIG", name, c, want)
		}
	}
	if c := cfgs["share.record.lock.duration.ms"]; c.ConfigType != kmsg.ConfigTypeInt {
		t.Errorf("type %v", c.ConfigType)
	}

	if code, msg := alterGroupConfigsReq(t, cl, "g1", kmsg.IncrementalAlterConfigOpSet, false,
		"share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "15000"); code != 0 {
		t.Fatalf("set: %v %s", kerr.ErrorForCode(code), msg)
	}
	cfgs = configByName(describeGroupConfigs(t, cl, "g1", "share.auto.offset.reset", "share.record.lock.duration.ms", "share.session.timeout.ms"))
	if c := cfgs["share.auto.offset.reset"]; len(cfgs) != 3 || *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig ||
		len(c.ConfigSynonyms) != 1 || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after set: %+v", cfgs)
	}

	for _, tc := range []struct {
		group string
		op    kmsg.IncrementalAlterConfigOp
		kvs   []string
		code  int16
		msg   string
	}{
		{"g1", kmsg.IncrementalAlterConfigOpSet, []string{"share.unknown", "1"}, kerr.InvalidConfig.Code, "Unknown group config name: share.unknown"},
		{"g1", kmsg.IncrementalAlterConfigOpSet, []string{"share.record.lock.duration.ms", "x"}, kerr.InvalidConfig.Code,
			"Invalid value x for configuration share.record.lock.duration.ms: Not a number of type INT"},
		{"g1", kmsg.IncrementalAlterConfigOpSet, []string{"share.record.lock.duration.ms", "70000"}, kerr.InvalidConfig.Code,
			"share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"},
		{"g1", kmsg.IncrementalAlterConfigOpSet, []string{"share.isolation.level", "dirty"}, kerr.InvalidConfig.Code,
			"Invalid value dirty for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"},
		{"g1", kmsg.IncrementalAlterConfigOpSet, []string{"share.heartbeat.interval.ms", "15000", "share.session.timeout.ms", "45000"}, 0, ""},
		{"g1", kmsg.IncrementalAlterConfigOpSet, []string{"share.heartbeat.interval.ms", "15000", "share.session.timeout.ms", "15000"},
			kerr.InvalidConfig.Code, "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"},
		{"g1", kmsg.IncrementalAlterConfigOpAppend, []string{"share.auto.offset.reset", "latest"}, kerr.InvalidConfig.Code,
			"Can't APPEND to key share.auto.offset.reset because its type is not LIST."},
		{"", kmsg.IncrementalAlterConfigOpSet, []string{"share.auto.offset.reset", "latest"}, kerr.InvalidRequest.Code, "Default group resources are not allowed."},
	} {
		code, msg := alterGroupConfigsReq(t, cl, tc.group, tc.op, false, tc.kvs...)
		if code != tc.code || msg != tc.msg && tc.msg != "" {
			t.Errorf("%q %v %v: got %v %q, want %v %q", tc.group, tc.op, tc.kvs, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(tc.code), tc.msg)
		}
	}
	if d := describeGroupConfigs(t, cl, ""); d.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("describing the empty group: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	// validate_only changes nothing; DELETE goes back to the default.
	if code, _ := alterGroupConfigsReq(t, cl, "g1", kmsg.IncrementalAlterConfigOpSet, true, "share.delivery.count.limit", "3"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if code, _ := alterGroupConfigsReq(t, cl, "g1", kmsg.IncrementalAlterConfigOpDelete, false, "share.heartbeat.interval.ms", ""); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	cfgs = configByName(describeGroupConfigs(t, cl, "g1"))
	if *cfgs["share.delivery.count.limit"].Value != "5" || cfgs["share.heartbeat.interval.ms"].Source != kmsg.ConfigSourceDefaultConfig ||
		cfgs["share.session.timeout.ms"].Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after validate_only and delete: %+v", cfgs)
	}

	listed := func(cl *kgo.Client) []string {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("list config resources: %v %v", err, resp)
		}
		var out []string
		for _, r := range resp.ConfigResources {
			out = append(out, fmt.Sprintf("%d/%s", r.Type, r.Name))
		}
		return out
	}
	if got := fmt.Sprint(listed(cl)); got != "[32/g1]" {
		t.Fatalf("listed %s", got)
	}

	closeBroker(t, b)
	b = startGroupBroker(t, dir, func(c *Config) { c.ShareRecordLockDuration = 20 * time.Second })
	cl = newClient(t, b)
	cfgs = configByName(describeGroupConfigs(t, cl, "g1"))
	if *cfgs["share.auto.offset.reset"].Value != "earliest" || *cfgs["share.record.lock.duration.ms"].Value != "15000" ||
		cfgs["share.record.lock.duration.ms"].Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after a restart: %+v", cfgs)
	}
	if got := fmt.Sprint(listed(cl)); got != "[32/g1]" {
		t.Fatalf("listed after a restart %s", got)
	}
}

// TestShareGroupHonoursGroupConfigs: a share group runs with its own
// configs. The broker starts share-partitions at the latest offset; a
// group set to earliest (before it exists, as franz-go's suite does)
// gets the records produced before it joined, and its heartbeat
// interval and delivery count limit are its own — a record released
// twice is archived at share.delivery.count.limit=2 — while a group
// without configs keeps the broker's.
func TestShareGroupHonoursGroupConfigs(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), func(c *Config) {
		c.ShareHeartbeatInterval = 100 * time.Millisecond
		c.ShareSessionTimeout = 5 * time.Second
		c.ShareAutoOffsetReset = "latest"
	})
	addr := b.Addr()
	adm := newAdmin(t, addr)
	cl := newClient(t, b)
	createGroupTopic(t, adm, "cfgwork", 1)
	const n = 20
	produce(t, addr, "cfgwork", 0, n)

	if code, msg := alterGroupConfigsReq(t, cl, "own", kmsg.IncrementalAlterConfigOpSet, false,
		"share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2", "share.heartbeat.interval.ms", "4000"); code != 0 {
		t.Fatalf("%v %s", kerr.ErrorForCode(code), msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if hb := shareHeartbeat(t, ctx, cl, "own", "m-own", 0, "cfgwork"); hb.ErrorCode != 0 || hb.HeartbeatIntervalMillis != 4000 {
		t.Fatalf("heartbeat of a group with its own interval: %+v", hb)
	}
	if hb := shareHeartbeat(t, ctx, cl, "plain", "m-plain", 0, "cfgwork"); hb.ErrorCode != 0 || hb.HeartbeatIntervalMillis != 100 {
		t.Fatalf("heartbeat of a group without configs: %+v", hb)
	}
	for _, g := range []string{"own", "plain"} {
		_ = shareHeartbeat(t, ctx, cl, g, "m-"+g, -1)
	}

	// Release everything: each record is delivered twice, then archived.
	own := startShareConsumer(t, addr, "own", "cfgwork", "own", func(delivery) kgo.AckStatus { return kgo.AckRelease })
	waitUntil(t, 20*time.Second, "every record delivered twice, then archived", func() (bool, string) {
		p, ok := sharePartitionState(t, b, "own")
		return ok && p.Start == n && len(own.deliveries()) == 2*n, fmt.Sprintf("%+v, %d deliveries", p, len(own.deliveries()))
	})
	for _, d := range own.deliveries() {
		if d.count < 1 || d.count > 2 {
			t.Fatalf("delivery count %d at a limit of 2", d.count)
		}
	}
	// A group left at the broker's latest sees nothing already produced.
	plain := startShareConsumer(t, addr, "plain", "cfgwork", "plain", nil)
	waitUntil(t, 20*time.Second, "the group without configs starts at the end", func() (bool, string) {
		p, ok := sharePartitionState(t, b, "plain")
		return ok && p.Start == n, fmt.Sprintf("%+v", p)
	})
	produce(t, addr, "cfgwork", 0, 1)
	waitUntil(t, 20*time.Second, "the group without configs gets the new record only", func() (bool, string) {
		ds := plain.deliveries()
		return len(ds) == 1 && ds[0].offset == n, fmt.Sprint(ds)
	})
}

// TestShareGroupDeleteAndOffsetAPIs: a share group's id is not a consumer
// group's — OffsetCommit, OffsetFetch and OffsetDelete on it are
// GROUP_ID_NOT_FOUND, as Apache's ShareGroup — and DeleteGroups deletes a
// share group only when it has no members (NON_EMPTY_GROUP before), with
// its share state: after a restart the group is gone and a new member
// starts again from share.auto.offset.reset with first deliveries.
func TestShareGroupDeleteAndOffsetAPIs(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir, shareTimings(30*time.Second, 5))
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "deljobs", 1)
	const n = 10
	produce(t, addr, "deljobs", 0, n)
	sc := startShareConsumer(t, addr, "sgdel", "deljobs", "c1", nil)
	waitUntil(t, 20*time.Second, "every record accepted", func() (bool, string) {
		p, ok := sharePartitionState(t, b, "sgdel")
		return ok && p.Start == n, fmt.Sprintf("%+v", p)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "deljobs", Partition: 0, At: 3, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(ctx, "sgdel", offs)
	if err != nil {
		t.Fatal(err)
	}
	if c := committed["deljobs"][0]; !errors.Is(c.Err, kerr.GroupIDNotFound) {
		t.Fatalf("OffsetCommit on a share group: %+v", c)
	}
	if _, err := adm.FetchOffsets(ctx, "sgdel"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("OffsetFetch on a share group: %v", err)
	}
	set := kadm.TopicsSet{}
	set.Add("deljobs", 0)
	if _, err := adm.DeleteOffsets(ctx, "sgdel", set); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("OffsetDelete on a share group: %v", err)
	}
	// The classic protocol's member requests: not a classic group
	// (Apache's getOrMaybeCreateClassicGroup), as JoinGroup.
	conn := newRawGroupClient(t, b)
	classic := map[string]kmsg.Request{}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "sgdel", 30000, 30000, "consumer"
	join.Protocols = append(join.Protocols, kmsg.JoinGroupRequestProtocol{Name: "range"})
	classic["JoinGroup"] = join
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "sgdel", "m", 1
	classic["Heartbeat"] = hb
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "sgdel", "m", 1
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	classic["SyncGroup"] = sync
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "sgdel", "m"
	leave.SetVersion(2)
	classic["LeaveGroup"] = leave
	for name, req := range classic {
		var code int16
		switch r := conn.request(req).(type) {
		case *kmsg.JoinGroupResponse:
			code = r.ErrorCode
		case *kmsg.HeartbeatResponse:
			code = r.ErrorCode
		case *kmsg.SyncGroupResponse:
			code = r.ErrorCode
		case *kmsg.LeaveGroupResponse:
			code = r.ErrorCode
		}
		if code != kerr.GroupIDNotFound.Code {
			t.Errorf("%s on a share group: %v, want GROUP_ID_NOT_FOUND", name, kerr.ErrorForCode(code))
		}
	}

	del, err := adm.DeleteGroup(ctx, "sgdel")
	if err != nil && !errors.Is(err, kerr.NonEmptyGroup) || !errors.Is(del.Err, kerr.NonEmptyGroup) {
		t.Fatalf("DeleteGroups of a share group with a member: %v %+v", err, del)
	}
	sc.close()
	waitUntil(t, 20*time.Second, "the share group is empty", func() (bool, string) {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return false, err.Error()
		}
		return listed["sgdel"].State == "Empty", fmt.Sprintf("%+v", listed["sgdel"])
	})
	if del, err := adm.DeleteGroup(ctx, "sgdel"); err != nil || del.Err != nil {
		t.Fatalf("DeleteGroups of an empty share group: %v %+v", err, del)
	}
	if _, ok := sharePartitionState(t, b, "sgdel"); ok {
		t.Fatal("share-partition state kept after DeleteGroups")
	}
	if del, _ := adm.DeleteGroup(ctx, "sgdel"); !errors.Is(del.Err, kerr.GroupIDNotFound) {
		t.Fatalf("deleting it again: %+v", del)
	}

	closeBroker(t, b)
	b = startGroupBroker(t, dir, shareTimings(30*time.Second, 5))
	addr = b.Addr()
	adm = newAdmin(t, addr)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["sgdel"]; ok {
		t.Fatalf("deleted share group back after a restart: %+v", listed["sgdel"])
	}
	again := startShareConsumer(t, addr, "sgdel", "deljobs", "c2", nil)
	waitUntil(t, 20*time.Second, "a new member starts again from the earliest record", func() (bool, string) {
		return len(again.deliveries()) == n, fmt.Sprint(len(again.deliveries()))
	})
	for _, d := range again.deliveries() {
		if d.count != 1 {
			t.Fatalf("delivery count %d after the group was deleted: %+v", d.count, d)
		}
	}
}
