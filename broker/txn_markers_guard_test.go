package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// markers is WriteTxnMarkers v1: one ABORT for pid on partition 0 of topic.
func markers(topic string, pid int64, epoch int16, coordinatorEpoch int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = pid, epoch, coordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

func markerCode(resp kmsg.Response) int16 {
	return resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
}

// Issue 9 row 11: any client could send WriteTxnMarkers, and an ABORT at
// producer epoch 32000 and coordinator epoch 2³⁰ locked a transactional
// producer out for good. Without an authorizer, clients may no longer
// send markers (CLUSTER_AUTHORIZATION_FAILED, nothing written); and even
// a sender that may (--allow-client-txn-markers, or CLUSTER_ACTION) cannot
// write a marker whose epochs no coordinator issued: the producer goes on
// committing transactions.
func TestForgedTxnMarkersCannotLockAProducerOut(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "victim", 1, nil)
	c := brokertest.Dial(t, b.Addr())
	if code := markerCode(c.RoundTrip(markers("victim", 1<<40, 0, 0))); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("a client's WriteTxnMarkers: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if end := listOffsetRaw(t, c, "victim", -1); end.Offset != 0 {
		t.Fatalf("log end %d: a refused marker was written", end.Offset)
	}

	b = brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) { c.AllowClientTxnMarkers = true }))
	brokertest.CreateTopic(t, b.Addr(), "victim", 1, nil)
	// A classic (TV1) victim: a TV2 EndTxn hands out an epoch above the
	// fence floor (markerBeyondIssued).
	tv1 := kversion.Stable()
	tv1.SetMaxKeyVersion(0, 11)
	tv1.SetMaxKeyVersion(26, 4)
	tv1.SetMaxKeyVersion(28, 4)
	victim := brokertest.Client(t, b.Addr(), kgo.TransactionalID("victim-txn"), kgo.DefaultProduceTopic("victim"), kgo.MaxVersions(tv1))
	commit := func(value string) {
		t.Helper()
		ctx := brokertest.Context(t, 30*time.Second)
		if err := victim.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := victim.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", value, err)
		}
		if err := victim.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %s: %v", value, err)
		}
	}
	commit("before")
	pid, epoch, err := victim.ProducerID(brokertest.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c = brokertest.Dial(t, b.Addr())
	for _, tc := range []struct {
		name             string
		epoch            int16
		coordinatorEpoch int32
		want             int16
	}{
		{"epoch 32000, coordinator epoch 2³⁰", 32000, 1 << 30, kerr.InvalidProducerEpoch.Code},
		{"the producer's next epoch", epoch + 1, 0, kerr.InvalidProducerEpoch.Code},
		{"coordinator epoch 2³⁰", epoch, 1 << 30, kerr.InvalidRequest.Code},
	} {
		if code := markerCode(c.RoundTrip(markers("victim", pid, tc.epoch, tc.coordinatorEpoch))); code != tc.want {
			t.Errorf("forged marker, %s: %v, want %v", tc.name, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
	}
	commit("after")
	if id, _, err := victim.ProducerID(brokertest.Context(t, 10*time.Second)); err != nil || id != pid {
		t.Fatalf("producer id %d (%v) after the forged markers, want %d", id, err, pid)
	}
}
