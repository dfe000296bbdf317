package broker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/admin"
	"kaas/broker/brokertest"
)

// reauthLifetime is the test brokers' connections.max.reauth.ms: long
// enough for franz-go's one-second margin and Apache's one
// re-authentication a second, short enough to see several.
const reauthLifetime = 2500 * time.Millisecond

// KIP-368: sessions end after --connections-max-reauth; franz-go and
// sarama re-authenticate on their connections before that and keep
// producing; the broker refuses a new principal or mechanism, a request
// in the middle of the exchange, a deleted user, and closes a
// connection that lets its session end.
func TestSASLReauthentication(t *testing.T) {
	s := startSecure(t, brokertest.WithConfig(func(c *broker.Config) { c.ConnectionsMaxReauth, c.AdminAddr = reauthLifetime, "127.0.0.1:0" }))
	ctx := brokertest.Context(t, 90*time.Second)
	adm := s.admin(t, "admin")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "reauth"); err != nil {
		t.Fatal(err)
	}
	s.grant(t, kadm.NewACLs().Allow(aliceUser, "User:bob").Topics("reauth").Operations(kadm.OpWrite))

	// Real clients, for a few session lifetimes, concurrently with the
	// checks below.
	var wg sync.WaitGroup
	defer wg.Wait()
	until := time.Now().Add(3 * reauthLifetime)
	franz := s.client(t, lSASLSSL, "alice", "SCRAM-SHA-512", kgo.DefaultProduceTopic("reauth"))
	// Closed after the checks below, which look for its connection.
	producer, err := sarama.NewSyncProducer([]string{s.addr(lSASL)}, saramaConfig("bob", sarama.SASLTypeSCRAMSHA256))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { producer.Close() })
	wg.Add(2)
	go func() {
		defer wg.Done()
		for time.Now().Before(until) {
			if err := franz.ProduceSync(ctx, kgo.StringRecord("franz")).FirstErr(); err != nil {
				t.Errorf("franz-go producing across re-authentications: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond) // pacing, not synchronisation
		}
	}()
	go func() {
		defer wg.Done()
		for time.Now().Before(until) {
			if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "reauth", Value: sarama.StringEncoder("sarama")}); err != nil {
				t.Errorf("sarama producing across re-authentications: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	md := kmsg.NewPtrMetadataRequest()
	handshake := func(mech string) *kmsg.SASLHandshakeRequest {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, mech
		return hs
	}

	// The session's lifetime is announced, and the same principal may
	// re-authenticate at once, but not twice within a second.
	c := brokertest.Dial(t, s.addr(lSASL))
	resp, _ := scramExchange(t, c, "SCRAM-SHA-256", "alice", "alice-secret")
	if resp.SessionLifetimeMillis != reauthLifetime.Milliseconds() {
		t.Errorf("session_lifetime_ms %d, want %d", resp.SessionLifetimeMillis, reauthLifetime.Milliseconds())
	}
	if resp, _ := scramExchange(t, c, "SCRAM-SHA-256", "alice", "alice-secret"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != reauthLifetime.Milliseconds() {
		t.Errorf("re-authentication: %v, lifetime %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
	}
	c.RoundTrip(md)
	if r := c.RoundTrip(handshake("SCRAM-SHA-256")).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("a second re-authentication within a second: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.RoundTrip(md)

	// Another principal: refused with Apache's message, then closed.
	c = s.conn(t, lSASL, "alice")
	resp, _ = scramExchange(t, c, "SCRAM-SHA-256", "bob", "bob-secret")
	if want := "Cannot change principals during re-authentication from User.alice: User.bob"; resp.ErrorCode != kerr.SaslAuthenticationFailed.Code ||
		resp.ErrorMessage == nil || *resp.ErrorMessage != want {
		t.Errorf("re-authenticating as bob: %v %v, want %q", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, want)
	}
	if !c.Closed(5 * time.Second) {
		t.Error("re-authentication as another principal: connection still open")
	}

	// Another mechanism: the handshake is answered, the next token closes
	// the connection without an answer.
	c = s.conn(t, lSASL, "alice")
	if r := c.RoundTrip(handshake("SCRAM-SHA-512")).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Errorf("re-authentication handshake with another mechanism: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.Send(kmsg.NewPtrSASLAuthenticateRequest())
	if _, _, err := c.ReadFrame(5 * time.Second); !closedErr(err) {
		t.Errorf("re-authentication with another mechanism: read %v, want the connection closed", err)
	}

	// A request in the middle of the exchange closes the connection.
	c = s.conn(t, lSASL, "alice")
	c.RoundTrip(handshake("SCRAM-SHA-256"))
	c.Send(md)
	if !c.Closed(5 * time.Second) {
		t.Error("Metadata during re-authentication: connection still open")
	}

	// A deleted user keeps its connection until its next
	// re-authentication, which fails.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-secret"}}); err != nil {
		t.Fatal(err)
	}
	carol := s.conn(t, lSASL, "carol")
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha256}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("deleting carol: %v %v", err, res.Error())
	}
	carol.RoundTrip(md)
	if resp, _ := scramExchange(t, carol, "SCRAM-SHA-256", "carol", "carol-secret"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Errorf("deleted user re-authenticating: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if !carol.Closed(5 * time.Second) {
		t.Error("failed re-authentication: connection still open")
	}

	// A connection that lets its session end is closed at its next
	// request, unanswered.
	expired := testutil.ToFloat64(s.b.Metrics().ExpiredSessions.WithLabelValues(lSASL))
	c = s.conn(t, lSASL, "alice")
	time.Sleep(reauthLifetime + 100*time.Millisecond) // the session's lifetime is the subject
	c.Send(md)
	if _, _, err := c.ReadFrame(5 * time.Second); !closedErr(err) {
		t.Errorf("request after the session ended: read %v, want the connection closed", err)
	}
	if got := testutil.ToFloat64(s.b.Metrics().ExpiredSessions.WithLabelValues(lSASL)); got != expired+1 {
		t.Errorf("kaas_expired_sessions_closed_total = %v, want %v", got, expired+1)
	}

	wg.Wait()
	// Both clients re-authenticated on the connection they produced on:
	// some session of each has several re-authentications.
	for _, who := range []struct{ listener, principal string }{{lSASLSSL, aliceUser}, {lSASL, "User:bob"}} {
		var most int64
		for _, sess := range s.b.Sessions() {
			if sess.Listener == who.listener && sess.Principal() == who.principal {
				most = max(most, sess.Reauthentications())
			}
		}
		if most < 2 {
			t.Errorf("%s on %s: at most %d re-authentications on one connection, want 2 or more", who.principal, who.listener, most)
		}
	}
	// The inspector shows when each session ends and how often it was
	// renewed.
	var got struct{ Connections []admin.Connection }
	resp2, err := http.Get("http://" + s.b.AdminAddr() + "/api/connections")
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if err := json.NewDecoder(resp2.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	shown := false
	for _, c := range got.Connections {
		if c.Listener == lSASLSSL && c.Principal == aliceUser && c.Reauthentications >= 2 && c.SessionExpires != nil {
			shown = true
		}
	}
	if !shown {
		t.Errorf("no connection of alice on %s with its session expiry and re-authentications in %+v", lSASLSSL, got.Connections)
	}
	for _, m := range []struct{ listener, mech, result string }{
		{lSASLSSL, "SCRAM-SHA-512", "ok"}, {lSASL, "SCRAM-SHA-256", "ok"}, {lSASL, "SCRAM-SHA-256", "failed"},
	} {
		if n := testutil.ToFloat64(s.b.Metrics().Reauthentications.WithLabelValues(m.listener, m.mech, m.result)); n < 2 {
			t.Errorf("kaas_reauthentications_total{%s,%s,%s} = %v", m.listener, m.mech, m.result, n)
		}
	}
}

// closedErr tells a connection the broker closed from a read that timed
// out (no answer, but still open).
func closedErr(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// saramaConfig is a sarama client configuration authenticating as user
// (password user-secret) with a SCRAM mechanism.
func saramaConfig(user string, mech sarama.SASLMechanism) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = mech
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, user+"-secret"
	gen := xscramFor(mech)
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{gen: gen} }
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.ClientID = fmt.Sprintf("sarama-%s", user)
	return cfg
}
