package broker_test

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// FuzzServeFrame feeds request frames through a live broker: each input
// is one frame body (header and request) sent on a fresh connection. The
// broker may answer or close the connection, but must never crash or
// hang: after every input a health connection must still get an
// ApiVersions answer. Seeds are every served API at its lowest and
// highest version plus a few requests with content; in a plain `go test`
// they run as a regression suite. `make test` fuzzes it for a bounded
// time.
//
// CreateTopics and CreatePartitions are left out, as is auto-creation:
// mutated partition counts would create thousands of partitions (two
// file descriptors each) and exhaust the process, which tests the
// machine, not the broker. Their handlers are covered by the seeds of
// FuzzParseRequest and by the topic tests.
func FuzzServeFrame(f *testing.F) {
	b := brokertest.Start(f, brokertest.WithConfig(func(c *broker.Config) {
		c.AutoCreateTopics = false
		c.MaxRequestBytes = 1 << 20
	}))
	brokertest.CreateTopic(f, b.Addr(), "fuzz", 2, nil)
	versions := brokertest.Dial(f, b.Addr()).RoundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	for _, k := range versions.ApiKeys {
		if skippedInFuzz(k.ApiKey) {
			continue
		}
		for _, v := range []int16{k.MinVersion, k.MaxVersion} {
			req := kmsg.RequestForKey(k.ApiKey)
			req.SetVersion(v)
			f.Add(requestBody(req, 1))
		}
	}
	produce := brokertest.ProduceRequest("fuzz", 1, -1, brokertest.Batch("seed", "records"))
	f.Add(requestBody(produce, 2))
	f.Add(requestBody(brokertest.FetchRequest("fuzz", 0, 0, 10*time.Millisecond, 1, 1<<20, 1<<20), 3))
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("fuzz")}}
	f.Add(requestBody(meta, 4))
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "fuzz", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -3}}}}
	f.Add(requestBody(lo, 5))
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fuzz"}}
	f.Add(requestBody(dc, 6))

	aq := kmsg.NewPtrAlterClientQuotasRequest()
	aq.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: kmsg.StringPtr("fuzz")}},
		Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1 << 20}}}}
	f.Add(requestBody(aq, 7))
	pt := kmsg.NewPtrPushTelemetryRequest()
	pt.ClientInstanceID, pt.CompressionType, pt.Metrics = [16]byte{1, 2, 3}, 1, []byte("\x1f\x8b not gzip")
	f.Add(requestBody(pt, 8))
	cm := kmsg.NewPtrIncrementalAlterConfigsRequest()
	cm.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeClientMetrics, ResourceName: "fuzz",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "metrics", Value: kmsg.StringPtr("*")}}}}
	f.Add(requestBody(cm, 9))

	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) >= 2 && skippedInFuzz(int16(binary.BigEndian.Uint16(body))) {
			return
		}
		nc, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
		if err != nil {
			t.Fatalf("the broker stopped accepting connections: %v", err)
		}
		frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
		if _, err := nc.Write(frame); err != nil && !errors.Is(err, net.ErrClosed) {
			// The broker may close before reading everything; that is fine.
			t.Logf("write: %v", err)
		}
		// Read whatever comes back until the broker closes or goes quiet.
		_ = nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		buf := make([]byte, 64<<10)
		for {
			if _, err := nc.Read(buf); err != nil {
				break
			}
		}
		nc.Close()
		// Still serving? (A hung event loop or a dead broker fails here.)
		health := brokertest.Dial(t, b.Addr())
		health.Send(kmsg.NewPtrApiVersionsRequest())
		if _, _, err := health.Read(10 * time.Second); err != nil {
			t.Fatalf("the broker stopped answering after this frame: %v", err)
		}
		health.Close()
	})
}

func skippedInFuzz(key int16) bool { return key == 19 || key == 37 }
