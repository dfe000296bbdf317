package broker_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/admin"
	"kaas/broker/brokertest"
)

// Mutual TLS: the SSL listener requires a certificate from the client CA
// and names the connection by its subject, as Apache's default principal
// mapping (User:CN=client-1,O=kaas). Untrusted, expired and missing
// client certificates and TLS 1.1 are refused at the handshake.
func TestMutualTLS(t *testing.T) {
	s := startSecure(t)
	ctx := brokertest.Context(t, 60*time.Second)
	good := s.pki.Issue("client", brokertest.CertOptions{Subject: pkix.Name{CommonName: clientCN, Organization: []string{"kaas"}}})
	other := brokertest.NewPKI(t)
	untrusted := s.pki.Issue("untrusted", brokertest.CertOptions{Subject: pkix.Name{CommonName: "intruder"}, SignedBy: other})
	expired := s.pki.Issue("expired", brokertest.CertOptions{Subject: pkix.Name{CommonName: clientCN, Organization: []string{"kaas"}}, Validity: -time.Hour})

	admin := s.admin(t, "admin")
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "mtls"); err != nil {
		t.Fatal(err)
	}
	s.grant(t, kadm.NewACLs().Allow(clientCert).Topics("mtls").Operations(kadm.OpWrite, kadm.OpRead))
	cl := brokertest.Client(t, s.addr(lSSL), kgo.DialTLSConfig(s.pki.ClientTLS(good)), kgo.DefaultProduceTopic("mtls"))
	if err := cl.ProduceSync(ctx, kgo.StringRecord("by certificate")).FirstErr(); err != nil {
		t.Fatalf("produce with a client certificate: %v", err)
	}
	// The broker sees the principal: the ACL named it, and the session
	// lists it.
	var seen bool
	for _, sess := range s.b.Sessions() {
		seen = seen || (sess.Listener == lSSL && sess.Principal() == clientCert)
	}
	if !seen {
		t.Errorf("no session on %s with principal %s", lSSL, clientCert)
	}
	// Another topic: no ACL for this principal.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}}
	c := brokertest.DialTLS(t, s.addr(lSSL), s.pki.ClientTLS(good))
	if r := c.RoundTrip(md).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("metadata for secret: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}

	failed := testutil.ToFloat64(s.b.Metrics().TLSHandshakes.WithLabelValues(lSSL, "failed"))
	for name, cfg := range map[string]*tls.Config{
		"no certificate":        s.pki.ClientTLS(),
		"untrusted certificate": s.pki.ClientTLS(untrusted),
		"expired certificate":   s.pki.ClientTLS(expired),
		"TLS 1.1":               withMaxVersion(s.pki.ClientTLS(good), tls.VersionTLS11),
	} {
		if handshakeAccepted(t, s.addr(lSSL), cfg) {
			t.Errorf("%s: accepted", name)
		}
	}
	brokertest.Eventually(t, 10*time.Second, "failed handshakes counted", func() bool {
		return testutil.ToFloat64(s.b.Metrics().TLSHandshakes.WithLabelValues(lSSL, "failed")) >= failed+4
	})
	// A client certificate on SASL_SSL is checked if given, but the
	// principal comes from SASL.
	if handshakeAccepted(t, s.addr(lSASLSSL), s.pki.ClientTLS(untrusted)) {
		t.Error("SASL_SSL accepted an untrusted client certificate")
	}
}

// handshakeAccepted dials with cfg and reports whether the broker
// answers ApiVersions (with TLS 1.3 a refused client certificate only
// shows at the first read).
func handshakeAccepted(t *testing.T, addr string, cfg *tls.Config) bool {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return false
	}
	defer nc.Close()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(frame); err != nil {
		return false
	}
	var b [4]byte
	_, err = nc.Read(b[:])
	return err == nil
}

// The wrong protocol on either side, and a handshake cut short, close
// that connection only.
func TestTLSBadInput(t *testing.T) {
	s := startSecure(t)
	healthy := s.conn(t, lSASLSSL, "admin")
	md := kmsg.NewPtrMetadataRequest()

	// A plaintext client on a TLS port.
	c := brokertest.Dial(t, s.addr(lSSL))
	c.Send(kmsg.NewPtrApiVersionsRequest())
	if !c.Closed(5 * time.Second) {
		t.Error("plaintext request on the SSL listener: connection still open")
	}
	// A TLS client on a plaintext port: its ClientHello reads as a frame
	// of hundreds of megabytes (or, before SASL, over 512 KiB).
	for _, l := range []string{lPlain, lSASL} {
		if handshakeAccepted(t, s.addr(l), s.pki.ClientTLS()) {
			t.Errorf("TLS client on %s: handshake accepted", l)
		}
	}
	// A truncated ClientHello, then the client stops writing.
	hello := clientHello(t, s)
	nc, err := net.DialTimeout("tcp", s.addr(lSASLSSL), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(hello[:len(hello)/2]); err != nil {
		t.Fatal(err)
	}
	_ = nc.(*net.TCPConn).CloseWrite()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 64)); err == nil {
		t.Errorf("truncated handshake answered %d bytes", n)
	}
	// A client that stalls mid-handshake holds nothing but its own
	// goroutines: others connect and are served meanwhile.
	stalled, err := net.DialTimeout("tcp", s.addr(lSASLSSL), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write(hello[:10]); err != nil {
		t.Fatal(err)
	}
	fresh := s.conn(t, lSASLSSL, "alice")
	fresh.RoundTrip(md)
	healthy.RoundTrip(md)
}

// clientHello captures the first flight of a TLS client.
func clientHello(t *testing.T, s *secureBroker) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	go func() {
		_ = tls.Client(client, s.pki.ClientTLS()).Handshake()
	}()
	buf := make([]byte, 4096)
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := server.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// A renewed certificate is picked up without a restart: new connections
// get it once the files change.
func TestTLSCertificateReload(t *testing.T) {
	s := startSecure(t)
	serial := func() string {
		nc, err := tls.Dial("tcp", s.addr(lSASLSSL), s.pki.ClientTLS())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		return nc.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	renewed := s.pki.Issue("server", brokertest.CertOptions{Subject: pkix.Name{CommonName: "localhost"}, Server: true})
	want := renewed.Leaf.SerialNumber.String()
	if want == before {
		t.Fatal("the renewed certificate has the old serial")
	}
	brokertest.Eventually(t, 20*time.Second, "the renewed certificate served", func() bool { return serial() == want })
}

// The inspector lists every connection with its principal: SASL users,
// certificate subjects, anonymous, and those still authenticating.
func TestInspectorShowsPrincipals(t *testing.T) {
	s := startSecure(t, brokertest.WithConfig(func(c *broker.Config) { c.AdminAddr = "127.0.0.1:0" }))
	cert := s.pki.Issue("client", brokertest.CertOptions{Subject: pkix.Name{CommonName: clientCN, Organization: []string{"kaas"}}})
	s.conn(t, lSASL, "alice").RoundTrip(kmsg.NewPtrApiVersionsRequest())
	brokertest.DialTLS(t, s.addr(lSSL), s.pki.ClientTLS(cert)).RoundTrip(kmsg.NewPtrApiVersionsRequest())
	s.conn(t, lSASLSSL, "").RoundTrip(kmsg.NewPtrApiVersionsRequest())
	var got struct{ Connections []admin.Connection }
	brokertest.Eventually(t, 10*time.Second, "three connections listed", func() bool {
		resp, err := http.Get("http://" + s.b.AdminAddr() + "/api/connections")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		got.Connections = nil
		return json.NewDecoder(resp.Body).Decode(&got) == nil && len(got.Connections) >= 3
	})
	want := map[string]string{lSASL: aliceUser, lSSL: clientCert, lSASLSSL: "User:ANONYMOUS"}
	for _, c := range got.Connections {
		if p, ok := want[c.Listener]; ok && c.Principal == p {
			delete(want, c.Listener)
			if c.Listener == lSSL && (c.TLSVersion == "" || c.ClientCert != "CN=client-1,O=kaas") {
				t.Errorf("SSL connection without its TLS details: %+v", c)
			}
			if c.Listener == lSASL && c.Mechanism != "SCRAM-SHA-256" {
				t.Errorf("SASL connection without its mechanism: %+v", c)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("missing connections %v in %+v", want, got.Connections)
	}
}
