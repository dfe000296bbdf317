package clustertests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// transaction.version across a cluster (R-FEA-1, R-FEA-2): a downgrade
// asked of one broker is refused while a TV2 transaction another broker
// coordinates is open; once committed it is applied, and every broker's
// ApiVersions then finalizes 1 at the next epoch.
func TestClusterTransactionVersionUpdate(t *testing.T) {
	c := newCluster(t, 3)
	c.createTopic("feat", 3)
	c.leaders("feat", 3)
	const id = "feat-txn"
	coordinator := c.coordinatorOf(id)
	var asked int32 = -1
	for m := range c.brokers {
		if m != coordinator {
			asked = m
		}
	}
	ctx := brokertest.Context(t, 60*time.Second)
	prod := c.client(kgo.TransactionalID(id), kgo.DefaultProduceTopic("feat"))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	conn := brokertest.Dial(t, c.brokers[asked].addr)
	downgrade := func() *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.SetVersion(2)
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, 2
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		return conn.RoundTrip(req).(*kmsg.UpdateFeaturesResponse)
	}
	if r := downgrade(); r.ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("downgrade on broker %d with a TV2 transaction open on broker %d: %v, want INVALID_UPDATE_VERSION", asked, coordinator, kerr.ErrorForCode(r.ErrorCode))
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 30*time.Second, "the downgrade applied once the transaction is committed", func() bool {
		return downgrade().ErrorCode == 0
	})
	for m, b := range c.brokers {
		brokertest.Eventually(t, 30*time.Second, fmt.Sprintf("broker %d finalizing transaction.version 1", m), func() bool {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(4)
			resp := brokertest.Dial(t, b.addr).RoundTrip(req).(*kmsg.ApiVersionsResponse)
			for _, f := range resp.FinalizedFeatures {
				if f.Name == "transaction.version" {
					return f.MaxVersionLevel == 1 && resp.FinalizedFeaturesEpoch == 1
				}
			}
			return false
		})
	}
}

// Two brokers updating the features at once (R-FEA-1): every update that
// succeeds gets an epoch of its own, so the finalized epoch every broker
// ends at is the number of updates applied. A broker that checked an
// update against features another broker changed meanwhile checks it
// again (the store's compare), instead of stamping the same epoch twice.
func TestClusterConcurrentFeatureUpdatesEachGetAnEpoch(t *testing.T) {
	c := newCluster(t, 2)
	const perBroker = 8
	applied := make(chan int, 2)
	for m, b := range c.brokers {
		conn := brokertest.Dial(t, b.addr)
		go func() {
			n := 0
			for range perBroker {
				req := kmsg.NewPtrUpdateFeaturesRequest()
				req.SetVersion(2)
				u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
				u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 2, 1
				req.FeatureUpdates = append(req.FeatureUpdates, u)
				switch r := conn.RoundTrip(req).(*kmsg.UpdateFeaturesResponse); r.ErrorCode {
				case 0:
					n++
				case kerr.RequestTimedOut.Code: // lost the race three times: not applied
				default:
					t.Errorf("broker %d: %v", m, kerr.ErrorForCode(r.ErrorCode))
				}
			}
			applied <- n
		}()
	}
	total := <-applied + <-applied
	if total == 0 {
		t.Fatal("no update applied")
	}
	for m, b := range c.brokers {
		brokertest.Eventually(t, 30*time.Second, fmt.Sprintf("broker %d at epoch %d", m, total), func() bool {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(4)
			resp := brokertest.Dial(t, b.addr).RoundTrip(req).(*kmsg.ApiVersionsResponse)
			if resp.FinalizedFeaturesEpoch > int64(total) {
				t.Fatalf("broker %d: epoch %d after %d updates", m, resp.FinalizedFeaturesEpoch, total)
			}
			return resp.FinalizedFeaturesEpoch == int64(total)
		})
	}
}
