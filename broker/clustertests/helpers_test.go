package clustertests

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/loopback"
	"kaas/coord/etcdembed"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// testTTL keeps failover fast; the margin makes the deadline 1.67 s.
const testTTL = "2s"

// cluster is an etcd and the brokers sharing one data directory.
type cluster struct {
	t       *testing.T
	etcd    *etcdembed.Server
	etcdDir string // etcd's data, to start it again (restartEtcd)
	name    string
	dataDir string
	brokers map[int32]*member
	// listen gives the listener flags of a broker on addr (default
	// --listen addr); clientOpts reach those listeners.
	listen     func(addr string) []string
	clientOpts []kgo.Opt
}

type member struct {
	id    int32
	addr  string
	admin string // the admin listener (inspector, /metrics, /api/cluster)
	proc  *brokertest.Process
}

func startEtcd(t *testing.T, listen, dir string) *etcdembed.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	e, err := etcdembed.Start(etcdembed.Config{Listen: listen, DataDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// restartEtcd starts the cluster's etcd again, on its address and data,
// after a test closed it.
func (c *cluster) restartEtcd() {
	c.t.Helper()
	c.etcd = startEtcd(c.t, strings.TrimPrefix(c.etcd.Endpoint(), "http://"), c.etcdDir)
}

// newCluster starts etcd and n brokers (ids 1..n).
func newCluster(t *testing.T, n int) *cluster { return newClusterWith(t, n, nil) }

// newClusterWith is newCluster with setup applied first (listeners, client
// options).
func newClusterWith(t *testing.T, n int, setup func(*cluster)) *cluster {
	t.Helper()
	etcdDir := t.TempDir()
	c := &cluster{t: t, etcd: startEtcd(t, loopback.FreeAddr(t), etcdDir), etcdDir: etcdDir, name: "c" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10), dataDir: t.TempDir(), brokers: map[int32]*member{}}
	c.listen = func(addr string) []string { return []string{"--listen", addr} }
	if setup != nil {
		setup(c)
	}
	for id := int32(1); id <= int32(n); id++ {
		c.start(id)
	}
	c.waitMembers(n)
	return c
}

func (c *cluster) args(id int32, addr string) []string {
	return append([]string{"--cluster-etcd", c.etcd.Endpoint(), "--cluster-name", c.name,
		"--broker-id", strconv.Itoa(int(id)), "--session-ttl", testTTL,
		"--fence-poll-interval", "200ms"}, c.listen(addr)...)
}

// start starts broker id (again, on a new port, if it ran before).
func (c *cluster) start(id int32) *member {
	c.t.Helper()
	addr, admin := loopback.FreeAddr(c.t), loopback.FreeAddr(c.t)
	m := &member{id: id, addr: addr, admin: admin, proc: brokertest.Serve(c.t, c.dataDir, append(c.args(id, addr), "--admin", admin)...)}
	c.brokers[id] = m
	return m
}

// restart starts broker id again on the address it had.
func (c *cluster) restart(id int32) *member {
	c.t.Helper()
	addr, admin := c.brokers[id].addr, c.brokers[id].admin
	m := &member{id: id, addr: addr, admin: admin, proc: brokertest.Serve(c.t, c.dataDir, append(c.args(id, addr), "--admin", admin)...)}
	c.brokers[id] = m
	return m
}

// endOffsets lists every partition's end offset of topic.
func (c *cluster) endOffsets(topic string) map[int32]int64 {
	c.t.Helper()
	var out map[int32]int64
	adm := c.admin()
	brokertest.Eventually(c.t, 30*time.Second, "end offsets of "+topic, func() bool {
		ends, err := adm.ListEndOffsets(brokertest.Context(c.t, 10*time.Second), topic)
		if err != nil || ends.Error() != nil {
			return false
		}
		out = map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return true
	})
	return out
}

func (c *cluster) seeds() []string {
	var out []string
	for _, m := range c.brokers {
		out = append(out, m.addr)
	}
	return out
}

func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RetryTimeout(60 * time.Second), kgo.RecordDeliveryTimeout(90 * time.Second)}
	base = append(base, c.clientOpts...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

func (c *cluster) admin() *kadm.Client { return kadm.NewClient(c.client()) }

// waitMembers waits until Metadata lists n brokers, none of them absent.
func (c *cluster) waitMembers(n int, absent ...int32) {
	c.t.Helper()
	adm := c.admin()
	brokertest.Eventually(c.t, 30*time.Second, fmt.Sprintf("%d brokers in metadata", n), func() bool {
		ctx := brokertest.Context(c.t, 5*time.Second)
		bs, err := adm.ListBrokers(ctx)
		if err != nil || len(bs) != n {
			return false
		}
		for _, b := range bs {
			if slices.Contains(absent, b.NodeID) {
				return false
			}
		}
		return true
	})
}

// leaders returns partition → (leader, epoch) once every partition of
// topic has a live leader that is none of avoid.
func (c *cluster) leaders(topic string, partitions int, avoid ...int32) map[int32][2]int32 {
	c.t.Helper()
	adm := c.admin()
	var out map[int32][2]int32
	brokertest.Eventually(c.t, 30*time.Second, "every partition of "+topic+" led", func() bool {
		ctx := brokertest.Context(c.t, 5*time.Second)
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != partitions {
			return false
		}
		live := map[int32]bool{}
		for _, b := range md.Brokers {
			live[b.NodeID] = true
		}
		for _, id := range avoid {
			live[id] = false
		}
		out = map[int32][2]int32{}
		for p, pd := range td.Partitions {
			if pd.Err != nil || !live[pd.Leader] {
				return false
			}
			out[p] = [2]int32{pd.Leader, pd.LeaderEpoch}
		}
		return true
	})
	return out
}

func (c *cluster) createTopic(name string, partitions int32) {
	c.t.Helper()
	resp, err := c.admin().CreateTopic(brokertest.Context(c.t, 30*time.Second), partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("creating %s: %v", name, err)
	}
}

// readAll consumes every partition of topic from the start until want
// records are seen (or the deadline), and returns value → count.
func (c *cluster) readAll(topic string, want int) map[string]int {
	c.t.Helper()
	cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	total := 0
	deadline := time.Now().Add(60 * time.Second)
	for total < want && time.Now().Before(deadline) {
		ctx := brokertest.Context(c.t, 5*time.Second)
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			total++
		})
	}
	return seen
}

// checkLeaderEpochs checks CurrentLeaderEpoch as Apache does, on Fetch
// and ListOffsets to the partition's leader: the leader's epoch and none
// (-1) pass, an older one is FENCED_LEADER_EPOCH, a newer one
// UNKNOWN_LEADER_EPOCH.
func (c *cluster) checkLeaderEpochs(topic string, p, leader, epoch int32) {
	c.t.Helper()
	raw := brokertest.Dial(c.t, c.brokers[leader].addr)
	defer raw.Close()
	cases := []struct {
		current int32
		want    error
	}{{epoch, nil}, {-1, nil}, {epoch + 1, kerr.UnknownLeaderEpoch}}
	if epoch > 0 {
		cases = append(cases, struct {
			current int32
			want    error
		}{epoch - 1, kerr.FencedLeaderEpoch})
	}
	for _, tc := range cases {
		fr := brokertest.FetchRequest(topic, p, 0, 0, 1, 1<<20, 1<<20)
		fr.Topics[0].Partitions[0].CurrentLeaderEpoch = tc.current
		resp := raw.RoundTrip(fr).(*kmsg.FetchResponse)
		lr := kmsg.NewPtrListOffsetsRequest()
		lr.SetVersion(7)
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = p, -1, tc.current
		lt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{lp}
		lr.Topics = []kmsg.ListOffsetsRequestTopic{lt}
		lresp := raw.RoundTrip(lr).(*kmsg.ListOffsetsResponse)
		for api, code := range map[string]int16{"fetch": resp.Topics[0].Partitions[0].ErrorCode, "list offsets": lresp.Topics[0].Partitions[0].ErrorCode} {
			if got := kerr.ErrorForCode(code); got != tc.want {
				c.t.Errorf("%s to broker %d with current leader epoch %d (the leader's is %d): %v, want %v", api, leader, tc.current, epoch, got, tc.want)
			}
		}
	}
}

// adminGet fetches path from broker id's admin listener.
func (c *cluster) adminGet(id int32, path string) []byte {
	c.t.Helper()
	resp, err := http.Get("http://" + c.brokers[id].admin + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s on broker %d: %d %v\n%s", path, id, resp.StatusCode, err, b)
	}
	return b
}

// metricValue is the value of an unlabelled metric in a /metrics page
// (0 when absent).
func metricValue(page, name string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// brokerStatus is what the tests read of a broker's /api/cluster.
type brokerStatus struct {
	Alive    bool  `json:"alive"`
	Handoffs int64 `json:"handoffs"`
	// Slots counts, per broker id, the coordinator slots it owns.
	Slots map[string]struct{ Txn, Offsets int } `json:"coordinator_slots"`
}

// status is broker id's /api/cluster.
func (c *cluster) status(id int32) brokerStatus {
	var st brokerStatus
	if err := json.Unmarshal(c.adminGet(id, "/api/cluster"), &st); err != nil {
		c.t.Fatal(err)
	}
	return st
}

// brokerClient talks to broker id alone.
func (c *cluster) brokerClient(id int32) *kgo.Client {
	return c.client(kgo.SeedBrokers(c.brokers[id].addr))
}

// groupState is the group's state as its coordinator describes it.
func (c *cluster) groupState(group string) string {
	c.t.Helper()
	gs, err := c.admin().DescribeGroups(brokertest.Context(c.t, 5*time.Second), group)
	if err != nil {
		return ""
	}
	return gs[group].State
}
