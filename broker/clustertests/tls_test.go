package clustertests

import (
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
	"kaas/broker/certs"
)

// Brokers whose only listener is SSL with client certificates required
// (mutual TLS) talk to each other over it: a transaction spanning both
// brokers commits, so its markers reached the peer (WriteTxnMarkers) and
// the peer verified its batches with the coordinator (AddPartitionsToTxn
// v4), each over TLS with the CA checking the peer's certificate and the
// broker presenting its own. The peer connections show as TLS in
// /api/connections.
func TestClusterPeersOverMutualTLS(t *testing.T) {
	ca, err := certs.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("", "broker", certs.Options{Subject: pkix.Name{CommonName: "broker"}, Server: true, ClientToo: true})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("", "client", certs.Options{Subject: pkix.Name{CommonName: "client"}})
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterWith(t, 2, func(c *cluster) {
		c.listen = func(addr string) []string {
			return []string{"--listeners", "SSL://" + addr, "--tls-cert", server.CertFile, "--tls-key", server.KeyFile, "--tls-client-ca", ca.File}
		}
		c.clientOpts = []kgo.Opt{kgo.DialTLSConfig(ca.ClientTLS(client))}
	})
	const topic, parts = "tls-txn", 6
	c.createTopic(topic, parts)
	leaders := c.leaders(topic, parts)
	coordinator := c.coordinatorOf("tls")
	var peer int32 = -1
	for _, l := range leaders {
		if l[0] != coordinator {
			peer = l[0]
		}
	}
	if peer < 0 {
		t.Fatalf("every partition is led by the coordinator %d: %v", coordinator, leaders)
	}

	prod := c.client(kgo.TransactionalID("tls"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := brokertest.Context(t, 90*time.Second)
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "v%d", p)}).FirstErr(); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]bool{}
	brokertest.Eventually(t, 60*time.Second, "every committed record read_committed", func() bool {
		cons.PollFetches(brokertest.Context(t, 2*time.Second)).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		return len(seen) == parts
	})

	// The coordinator's markers reached the peer over TLS, as a broker.
	var page struct {
		Connections []struct {
			Mechanism  string `json:"sasl_mechanism"`
			TLSVersion string `json:"tls_version"`
			ClientCert string `json:"tls_client_subject"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(c.adminGet(peer, "/api/connections"), &page); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cn := range page.Connections {
		if cn.Mechanism == "KAAS-PEER" {
			found = true
			if cn.TLSVersion == "" || cn.ClientCert == "" {
				t.Errorf("a peer connection to broker %d without TLS or a client certificate: %+v", peer, cn)
			}
		}
	}
	if !found {
		t.Errorf("no peer broker connection on broker %d: %+v", peer, page.Connections)
	}
}
