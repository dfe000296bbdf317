package broker_test

// Client quotas through kadm (DescribeClientQuotas, AlterClientQuotas):
// set, describe with every match type, defaults, remove, validate-only,
// durable across a restart; and every bad input Apache refuses, with its
// message.

import (
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

func quotaEntity(pairs ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i+1 < len(pairs); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: pairs[i]}
		if pairs[i+1] != "<default>" {
			n := pairs[i+1]
			c.Name = &n
		}
		e = append(e, c)
	}
	return e
}

func setQuota(key string, v float64) kadm.AlterClientQuotaOp {
	return kadm.AlterClientQuotaOp{Key: key, Value: v}
}

// describedQuotas renders what DescribeClientQuotas returned, sorted.
func describedQuotas(t *testing.T, adm *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
	t.Helper()
	qs, err := adm.DescribeClientQuotas(brokertest.Context(t, 30*time.Second), strict, comps)
	if err != nil {
		t.Fatalf("describe client quotas: %v", err)
	}
	var out []string
	for _, q := range qs {
		var vals []string
		for _, v := range q.Values {
			vals = append(vals, v.String())
		}
		sort.Strings(vals)
		out = append(out, q.Entity.String()+" "+strings.Join(vals, ", "))
	}
	sort.Strings(out)
	return out
}

func alterQuotas(t *testing.T, adm *kadm.Client, entries ...kadm.AlterClientQuotaEntry) {
	t.Helper()
	res, err := adm.AlterClientQuotas(brokertest.Context(t, 30*time.Second), entries)
	if err != nil {
		t.Fatalf("alter client quotas: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter client quotas %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
}

func TestClientQuotasThroughKadm(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	adm := brokertest.Admin(t, b.Addr())
	alterQuotas(t, adm,
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{setQuota("producer_byte_rate", 1024), setQuota("request_percentage", 12.5)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "alice", "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{setQuota("consumer_byte_rate", 2048)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{setQuota("producer_byte_rate", 4096)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", "<default>"), Ops: []kadm.AlterClientQuotaOp{setQuota("controller_mutation_rate", 5)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("ip", "127.0.0.1"), Ops: []kadm.AlterClientQuotaOp{setQuota("connection_creation_rate", 100)}},
	)
	all := []string{
		"{client-id=<default>} producer_byte_rate=4096.000000",
		"{client-id=app, user=alice} consumer_byte_rate=2048.000000",
		"{ip=127.0.0.1} connection_creation_rate=100.000000",
		"{user=<default>} controller_mutation_rate=5.000000",
		"{user=alice} producer_byte_rate=1024.000000, request_percentage=12.500000",
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: got %q, want %q", what, got, want)
			}
		}
	}
	check("everything", describedQuotas(t, adm, false), all)
	alice := "alice"
	check("user=alice", describedQuotas(t, adm, false, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: &alice}), []string{all[1], all[4]})
	check("user=alice strict", describedQuotas(t, adm, true, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: &alice}), []string{all[4]})
	check("default user", describedQuotas(t, adm, false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}), []string{all[3]})
	check("any client-id", describedQuotas(t, adm, false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}), []string{all[0], all[1]})

	// Validate-only changes nothing; removing the last value removes the
	// entity.
	res, err := adm.ValidateAlterClientQuotas(brokertest.Context(t, 30*time.Second), []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("user", "bob"), Ops: []kadm.AlterClientQuotaOp{setQuota("producer_byte_rate", 1)}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("validate only: %v %v", err, res)
	}
	alterQuotas(t, adm, kadm.AlterClientQuotaEntry{Entity: quotaEntity("ip", "127.0.0.1"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}})
	check("after validate-only and remove", describedQuotas(t, adm, false), []string{all[0], all[1], all[3], all[4]})

	// Durable: a restart serves the same quotas.
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	check("after a restart", describedQuotas(t, brokertest.Admin(t, b.Addr()), false), []string{all[0], all[1], all[3], all[4]})
}

// Every bad alteration and filter gets INVALID_REQUEST (an unknown
// filter type UNSUPPORTED_VERSION) with Apache's message, and nothing
// is stored.
func TestClientQuotasBadInput(t *testing.T) {
	b := brokertest.Start(t)
	cl := brokertest.Client(t, b.Addr())
	ctx := brokertest.Context(t, 60*time.Second)
	str := func(s string) *string { return &s }
	type comp struct {
		typ  string
		name *string
	}
	type op struct {
		key    string
		value  float64
		remove bool
	}
	entry := func(comps []comp, ops ...op) kmsg.AlterClientQuotasRequestEntry {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		for _, c := range comps {
			x := kmsg.NewAlterClientQuotasRequestEntryEntity()
			x.Type, x.Name = c.typ, c.name
			e.Entity = append(e.Entity, x)
		}
		for _, o := range ops {
			x := kmsg.NewAlterClientQuotasRequestEntryOp()
			x.Key, x.Value, x.Remove = o.key, o.value, o.remove
			e.Ops = append(e.Ops, x)
		}
		return e
	}
	alice := []comp{{"user", str("alice")}}
	for _, tc := range []struct {
		name    string
		entries []kmsg.AlterClientQuotasRequestEntry
		want    string
	}{
		{"unknown entity type", []kmsg.AlterClientQuotasRequestEntry{entry([]comp{{"group", str("g")}}, op{"producer_byte_rate", 1, false})}, "Unhandled client quota entity type: group"},
		{"unknown key", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"bytes_per_fortnight", 1, false})}, "Invalid configuration key bytes_per_fortnight"},
		{"negative rate", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"producer_byte_rate", -5, false})}, "Quota producer_byte_rate must be greater than 0"},
		{"NaN rate", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"consumer_byte_rate", math.NaN(), false})}, "Quota consumer_byte_rate must be greater than 0"},
		{"zero percentage", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"request_percentage", 0, false})}, "Quota request_percentage must be greater than 0"},
		{"fractional byte rate", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"producer_byte_rate", 10.5, false})}, "producer_byte_rate cannot be a fractional value."},
		{"too large", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"producer_byte_rate", 1e30, false})}, "Proposed value for producer_byte_rate is too large for a LONG."},
		{"empty entity", []kmsg.AlterClientQuotasRequestEntry{entry(nil, op{"producer_byte_rate", 1, false})}, "Invalid empty client quota entity"},
		{"empty name", []kmsg.AlterClientQuotasRequestEntry{entry([]comp{{"client-id", str("")}}, op{"producer_byte_rate", 1, false})}, "Empty client-id not supported"},
		{"ip with user", []kmsg.AlterClientQuotasRequestEntry{entry([]comp{{"ip", str("10.0.0.1")}, {"user", nil}}, op{"connection_creation_rate", 1, false})}, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
		{"ip key on a user", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"connection_creation_rate", 1, false})}, "Invalid configuration key connection_creation_rate"},
		{"key twice", []kmsg.AlterClientQuotasRequestEntry{entry(alice, op{"producer_byte_rate", 1, false}, op{"producer_byte_rate", 2, false})}, "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"},
	} {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.Entries = tc.entries
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(resp.Entries) != 1 || resp.Entries[0].ErrorCode != kerr.InvalidRequest.Code || resp.Entries[0].ErrorMessage == nil || *resp.Entries[0].ErrorMessage != tc.want {
			t.Errorf("%s: %+v, want INVALID_REQUEST %q", tc.name, resp.Entries, tc.want)
		}
	}
	d := kmsg.NewPtrDescribeClientQuotasRequest()
	dr, err := d.RequestWith(ctx, cl)
	if err != nil || dr.ErrorCode != 0 || len(dr.Entries) != 0 {
		t.Fatalf("after only bad alterations: %v %+v", err, dr)
	}
	for _, tc := range []struct {
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
		want  string
	}{
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "group", MatchType: 2}}, kerr.UnsupportedVersion.Code, "Unsupported entity type group"},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "", MatchType: 2}}, kerr.InvalidRequest.Code, "Invalid empty entity type."},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0}}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 9}}, kerr.InvalidRequest.Code, "Unknown match type 9"},
	} {
		d := kmsg.NewPtrDescribeClientQuotasRequest()
		d.Components = tc.comps
		dr, err := d.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if dr.ErrorCode != tc.code || dr.ErrorMessage == nil || *dr.ErrorMessage != tc.want {
			t.Errorf("describe %+v: code %d %v, want %d %q", tc.comps, dr.ErrorCode, dr.ErrorMessage, tc.code, tc.want)
		}
	}
}
