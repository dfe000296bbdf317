package broker_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	xscram "github.com/xdg-go/scram"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// franz-go with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN on both SASL
// listeners: produce and consume as the super user. PLAIN is refused on
// the plaintext listener (it would send the password in the clear).
func TestSASLFranzGo(t *testing.T) {
	s := startSecure(t)
	ctx := brokertest.Context(t, 60*time.Second)
	for _, tc := range []struct{ listener, mech string }{
		{lSASL, "SCRAM-SHA-256"}, {lSASL, "SCRAM-SHA-512"},
		{lSASLSSL, "SCRAM-SHA-256"}, {lSASLSSL, "SCRAM-SHA-512"}, {lSASLSSL, "PLAIN"},
	} {
		topic := "sasl-" + tc.listener + "-" + tc.mech
		cl := s.client(t, tc.listener, "admin", tc.mech, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err := cl.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
			t.Fatalf("%s %s: produce: %v", tc.listener, tc.mech, err)
		}
		fs := cl.PollRecords(ctx, 1)
		if err := fs.Err0(); err != nil || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "hello" {
			t.Fatalf("%s %s: consume: %v %v", tc.listener, tc.mech, err, fs.Records())
		}
	}
	if n := authentications(s.b, lSASLSSL, "PLAIN", "ok"); n < 1 {
		t.Errorf("kaas_authentications_total{PLAIN,ok} = %v", n)
	}

	c := s.conn(t, lSASL, "")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	start := time.Now()
	r := c.RoundTrip(hs).(*kmsg.SASLHandshakeResponse)
	if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 2 {
		t.Errorf("PLAIN on SASL_PLAINTEXT: %v, offered %v", kerr.ErrorForCode(r.ErrorCode), r.SupportedMechanisms)
	}
	if time.Since(start) < failDelay || !c.Closed(5*time.Second) {
		t.Error("an unsupported mechanism must close the connection after the failed-authentication delay")
	}
}

// Wrong password and unknown user: the same SASL_AUTHENTICATION_FAILED
// and generic message, answered only after --failed-auth-delay, then the
// connection closes; the broker and other connections are unaffected.
func TestSASLFailedAuthentication(t *testing.T) {
	s := startSecure(t)
	other := s.conn(t, lSASL, "alice")
	var msgs []string
	for _, tc := range []struct{ user, pass string }{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			c := s.conn(t, lSASL, "")
			resp, took := scramExchange(t, c, mech, tc.user, tc.pass)
			if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
				t.Fatalf("%s/%s: got %v", tc.user, mech, kerr.ErrorForCode(resp.ErrorCode))
			}
			msgs = append(msgs, *resp.ErrorMessage)
			if took < failDelay {
				t.Errorf("%s/%s: failure answered after %v, before the %v delay", tc.user, mech, took, failDelay)
			}
			if !c.Closed(5 * time.Second) {
				t.Errorf("%s/%s: connection still open after a failed authentication", tc.user, mech)
			}
		}
	}
	// Unknown users and wrong passwords read the same, per mechanism.
	if msgs[0] != msgs[2] || msgs[1] != msgs[3] {
		t.Errorf("failure messages tell users apart: %q", msgs)
	}
	if want := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"; msgs[0] != want {
		t.Errorf("message %q, want Apache's %q", msgs[0], want)
	}
	// PLAIN says the same for both.
	for _, user := range []string{"alice", "mallory"} {
		c := s.conn(t, lSASLSSL, "")
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		c.RoundTrip(hs)
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = []byte("\x00" + user + "\x00nope")
		r := c.RoundTrip(req).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Authentication failed: Invalid username or password" {
			t.Errorf("PLAIN %s: %v %v", user, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	if n := authentications(s.b, lSASL, "SCRAM-SHA-256", "failed"); n != 2 {
		t.Errorf("kaas_authentications_total{SCRAM-SHA-256,failed} = %v, want 2", n)
	}
	// The connection authenticated before all this still works.
	md := kmsg.NewPtrMetadataRequest()
	other.RoundTrip(md)
}

// Before authentication a SASL listener answers ApiVersions and
// SaslHandshake only: any other request, a second ApiVersions, a token
// before the handshake, or a frame over the 512 KiB pre-authentication
// limit (a 1 GB SASL token) closes the connection; nothing else is hurt.
func TestSASLBeforeAuthentication(t *testing.T) {
	s := startSecure(t)
	other := s.conn(t, lSASL, "admin")
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4

	c := s.conn(t, lSASL, "")
	c.Send(md)
	if !c.Closed(5 * time.Second) {
		t.Error("Metadata before authentication: connection still open")
	}

	c = s.conn(t, lSASL, "")
	c.RoundTrip(kmsg.NewPtrApiVersionsRequest())
	c.Send(kmsg.NewPtrApiVersionsRequest())
	if !c.Closed(5 * time.Second) {
		t.Error("a second ApiVersions before authentication: connection still open")
	}

	c = s.conn(t, lSASL, "")
	c.Send(kmsg.NewPtrSASLAuthenticateRequest())
	if !c.Closed(5 * time.Second) {
		t.Error("SaslAuthenticate before SaslHandshake: connection still open")
	}

	c = s.conn(t, lSASL, "")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-256"
	c.RoundTrip(hs)
	c.Send(md) // v1 handshake: only SaslAuthenticate may follow
	if !c.Closed(5 * time.Second) {
		t.Error("Metadata during the SASL exchange: connection still open")
	}

	for _, listener := range []string{lSASL, lSASLSSL} {
		c = s.conn(t, listener, "")
		var frame [8]byte
		binary.BigEndian.PutUint32(frame[:], 1<<30) // a 1 GB token follows, supposedly
		c.WriteRaw(frame[:])
		if !c.Closed(5 * time.Second) {
			t.Errorf("%s: a 1 GB frame before authentication: connection still open", listener)
		}
	}

	// SaslHandshake where there is nothing to authenticate, or again
	// after authenticating: ILLEGAL_SASL_STATE, and the connection lives.
	for _, c := range []*brokertest.Conn{s.conn(t, lPlain, ""), other} {
		if r := c.RoundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("SaslHandshake after authentication: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		if r := c.RoundTrip(kmsg.NewPtrSASLAuthenticateRequest()).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("SaslAuthenticate after authentication: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if r := other.RoundTrip(md).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Error("the authenticated connection stopped working")
	}
}

// A v0 SaslHandshake is followed by bare SASL tokens (no Kafka framing
// beyond the size): SCRAM-SHA-512 over them, then requests as usual.
func TestSASLHandshakeV0(t *testing.T) {
	s := startSecure(t)
	c := s.conn(t, lSASL, "")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, "SCRAM-SHA-512"
	if r := c.RoundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	cl, _ := xscram.SHA512.NewClient("alice", "alice-secret", "")
	conv := cl.NewConversation()
	msg, _ := conv.Step("")
	for i := 0; i < 2; i++ {
		c.WriteRaw(binary.BigEndian.AppendUint32(nil, uint32(len(msg))))
		c.WriteRaw([]byte(msg))
		reply := readRawToken(t, c)
		var err error
		if msg, err = conv.Step(string(reply)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if !conv.Valid() {
		t.Fatal("server signature not valid")
	}
	md := kmsg.NewPtrMetadataRequest()
	if r := c.RoundTrip(md).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatal("no metadata after a v0 exchange")
	}

	// A wrong password over bare tokens: no answer, the connection closes.
	c = s.conn(t, lSASL, "")
	c.RoundTrip(hs)
	cl, _ = xscram.SHA512.NewClient("alice", "wrong", "")
	conv = cl.NewConversation()
	msg, _ = conv.Step("")
	c.WriteRaw(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...))
	msg, _ = conv.Step(string(readRawToken(t, c)))
	c.WriteRaw(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...))
	if !c.Closed(5 * time.Second) {
		t.Error("failed v0 exchange: connection still open")
	}
}

func readRawToken(t *testing.T, c *brokertest.Conn) []byte {
	t.Helper()
	// ReadFrame splits off 4 bytes as a correlation id: put them back.
	corr, rest, err := c.ReadFrame(5 * time.Second)
	if err != nil {
		t.Fatalf("reading a bare token: %v", err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(corr)), rest...)
}

// Users are managed over the wire (KIP-554) by a principal with ALTER on
// the cluster, survive a restart, and take effect for new connections.
func TestUsersOverTheWire(t *testing.T) {
	s := startSecure(t)
	ctx := brokertest.Context(t, 60*time.Second)
	admin := s.admin(t, "admin")
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("upsert carol: %v %v", err, res.Error())
	}
	d, err := admin.DescribeUserSCRAMs(ctx, "carol", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if c := d["carol"]; c.Err != nil || len(c.CredInfos) != 1 || c.CredInfos[0].Iterations != 8192 {
		t.Errorf("describe carol: %+v", c)
	}
	if !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Errorf("describe nobody: %v", d["nobody"].Err)
	}
	carol := s.client(t, lSASL, "carol", "SCRAM-SHA-512")
	if err := carol.Ping(ctx); err != nil {
		t.Fatalf("carol cannot authenticate: %v", err)
	}
	// Once most users have kadm's salt and 8192 iterations, an unknown
	// user is offered the same: the server-first message does not tell.
	var more []kadm.UpsertSCRAM
	for _, u := range []string{"erin", "frank", "gina"} {
		more = append(more, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: u + "-secret"})
	}
	if res, err := admin.AlterUserSCRAMs(ctx, nil, more); err != nil || res.Error() != nil {
		t.Fatalf("upsert: %v %v", err, res.Error())
	}
	if known, unknown := scramShape(t, s, "carol"), scramShape(t, s, "nobody"); known != unknown || !strings.HasSuffix(known, "i=8192") {
		t.Errorf("server-first for carol %q, for an unknown user %q", known, unknown)
	}

	// Apache's validation.
	res, err = admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "nobody", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "x"}, {User: "dave", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		want := kerr.DuplicateResource
		if r.User == "nobody" {
			want = kerr.ResourceNotFound
		}
		if !errors.Is(r.Err, want) {
			t.Errorf("%s: %v, want %v", r.User, r.Err, want)
		}
	}
	// A user who is not a super user and has no ALTER on the cluster.
	alice := s.admin(t, "alice")
	res, err = alice.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err == nil && !errors.Is(res.Error(), kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice altering users: %v %v", err, res.Error())
	}
	if _, err := alice.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice describing users: %v", err)
	}

	// Durable: after a restart carol still authenticates; deleted, she
	// cannot.
	brokertest.Stop(t, s.b)
	s.b = brokertest.StartIn(t, s.dir, brokertest.WithConfig(func(c *broker.Config) {
		c.Listeners = []broker.Listener{{Name: lSASL, Protocol: "SASL_PLAINTEXT", Addr: "127.0.0.1:0"}}
		c.Authorizer, c.SuperUsers = true, []string{superUser}
		c.FailedAuthDelay = failDelay
	}))
	admin = s.admin(t, "admin")
	if d, err := admin.DescribeUserSCRAMs(ctx, "carol"); err != nil || d["carol"].Err != nil {
		t.Fatalf("carol after a restart: %v %+v", err, d)
	}
	if res, err := admin.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete carol: %v %v", err, res.Error())
	}
	c := s.conn(t, lSASL, "")
	if resp, _ := scramExchange(t, c, "SCRAM-SHA-512", "carol", "carol-secret"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Errorf("deleted carol authenticated: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	// Nothing but keys on disk.
	raw, err := os.ReadFile(filepath.Join(s.dir, "__cluster", "security", "scram-credentials.json"))
	if err != nil || bytes.Contains(raw, []byte("secret")) {
		t.Errorf("credential file holds a password (or cannot be read: %v)", err)
	}
}

// scramShape is what SCRAM-SHA-512's server-first message shows of user's
// credential: the salt's length and the iterations.
func scramShape(t *testing.T, s *secureBroker, user string) string {
	t.Helper()
	c := s.conn(t, lSASL, "")
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
	c.RoundTrip(hs)
	cl, _ := xscram.SHA512.NewClient(user, "x", "")
	first, _ := cl.NewConversation().Step("")
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, []byte(first)
	r := c.RoundTrip(req).(*kmsg.SASLAuthenticateResponse)
	_, rest, _ := strings.Cut(string(r.SASLAuthBytes), ",s=")
	salt, iters, _ := strings.Cut(rest, ",")
	return fmt.Sprintf("salt of %d base64 characters, %s", len(salt), iters)
}
