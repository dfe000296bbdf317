package broker_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/net/server"
)

// secureBroker is a broker with every kind of listener, TLS from a
// throwaway CA, the authorizer on, "admin" as super user and two more
// users; their passwords are their names followed by "-secret".
type secureBroker struct {
	b      *broker.Broker
	dir    string
	pki    *brokertest.PKI
	server brokertest.Cert
}

const (
	lPlain     = "PLAINTEXT"
	lSSL       = "SSL"
	lSASL      = "SASL_PLAINTEXT"
	lSASLSSL   = "SASL_SSL"
	failDelay  = 150 * time.Millisecond
	superUser  = "User:admin"
	aliceUser  = "User:alice"
	clientCN   = "client-1"
	clientCert = "User:CN=client-1,O=kaas"
)

func startSecure(t *testing.T, opts ...brokertest.Option) *secureBroker {
	t.Helper()
	s := &secureBroker{dir: t.TempDir(), pki: brokertest.NewPKI(t)}
	for _, u := range []string{"admin", "alice", "bob"} {
		brokertest.AddUser(t, s.dir, u, u+"-secret")
	}
	s.server = s.pki.Issue("server", brokertest.CertOptions{Subject: pkix.Name{CommonName: "localhost"}, Server: true})
	base := brokertest.WithConfig(func(c *broker.Config) {
		c.Listeners = []broker.Listener{
			{Name: lPlain, Protocol: server.Plaintext, Addr: "127.0.0.1:0"},
			{Name: lSSL, Protocol: server.SSL, Addr: "127.0.0.1:0"},
			{Name: lSASL, Protocol: server.SASLPlaintext, Addr: "127.0.0.1:0"},
			{Name: lSASLSSL, Protocol: server.SASLSSL, Addr: "127.0.0.1:0"},
		}
		c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = s.server.CertFile, s.server.KeyFile, s.pki.CAFile
		c.SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
		c.Authorizer = true
		c.SuperUsers = []string{superUser}
		c.FailedAuthDelay = failDelay
		c.GroupInitialRebalanceDelay = 0
	})
	s.b = brokertest.StartIn(t, s.dir, append([]brokertest.Option{base}, opts...)...)
	return s
}

func (s *secureBroker) addr(listener string) string { return s.b.ListenerAddr(listener) }

// client is a franz-go client on a SASL listener as user, with mechanism
// mech (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512).
func (s *secureBroker) client(t *testing.T, listener, user, mech string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var m sasl.Mechanism
	pass := user + "-secret"
	switch mech {
	case "PLAIN":
		m = plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	default:
		t.Fatalf("mechanism %s", mech)
	}
	o := []kgo.Opt{kgo.SASL(m)}
	if listener == lSASLSSL {
		o = append(o, kgo.DialTLSConfig(s.pki.ClientTLS()))
	}
	return brokertest.Client(t, s.addr(listener), append(o, opts...)...)
}

// admin is a kadm client authenticated as user on the SASL_PLAINTEXT
// listener.
func (s *secureBroker) admin(t *testing.T, user string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(s.client(t, lSASL, user, "SCRAM-SHA-256"))
}

// grant creates ACLs as the super user and fails the test on any error.
func (s *secureBroker) grant(t *testing.T, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := s.admin(t, "admin").CreateACLs(brokertest.Context(t, 30*time.Second), b)
	if err == nil {
		for _, r := range res {
			if err = r.Err; err != nil {
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("creating ACLs: %v", err)
	}
}

// conn is a bare connection to a listener: TLS when the listener has it
// (presenting certs), authenticated with SCRAM-SHA-256 as user on SASL
// listeners ("" leaves it unauthenticated).
func (s *secureBroker) conn(t *testing.T, listener, user string, certs ...brokertest.Cert) *brokertest.Conn {
	t.Helper()
	var c *brokertest.Conn
	if listener == lSSL || listener == lSASLSSL {
		c = brokertest.DialTLS(t, s.addr(listener), s.pki.ClientTLS(certs...))
	} else {
		c = brokertest.Dial(t, s.addr(listener))
	}
	if user != "" {
		resp, _ := scramExchange(t, c, "SCRAM-SHA-256", user, user+"-secret")
		if resp.ErrorCode != 0 {
			t.Fatalf("authenticating %s: %v", user, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	return c
}

// scramExchange runs SaslHandshake v1 and the SaslAuthenticate exchange
// with xdg-go/scram's client. It returns the last answer (the failure if
// one came) and how long that answer took.
func scramExchange(t *testing.T, c *brokertest.Conn, mech, user, pass string) (*kmsg.SASLAuthenticateResponse, time.Duration) {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech
	if r := c.RoundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake %s: %v", mech, kerr.ErrorForCode(r.ErrorCode))
	}
	gen := xscram.SHA256
	if mech == "SCRAM-SHA-512" {
		gen = xscram.SHA512
	}
	cl, err := gen.NewClient(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	msg, _ := conv.Step("")
	var resp *kmsg.SASLAuthenticateResponse
	var took time.Duration
	for i := 0; i < 2; i++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, []byte(msg)
		start := time.Now()
		resp = c.RoundTrip(req).(*kmsg.SASLAuthenticateResponse)
		took = time.Since(start)
		if resp.ErrorCode != 0 {
			return resp, took
		}
		if msg, err = conv.Step(string(resp.SASLAuthBytes)); err != nil && i == 0 {
			t.Fatalf("client rejected the server-first message: %v", err)
		}
	}
	if !conv.Valid() {
		t.Fatal("the client did not accept the server's signature")
	}
	return resp, took
}

// denials reads kaas_authorization_denials_total for an API.
func denials(b *broker.Broker, api, resource string) float64 {
	return testutil.ToFloat64(b.Metrics().AuthorizationDenials.WithLabelValues(api, resource))
}

func authentications(b *broker.Broker, listener, mech, result string) float64 {
	return testutil.ToFloat64(b.Metrics().Authentications.WithLabelValues(listener, mech, result))
}

// withMaxVersion caps the TLS version a client offers.
func withMaxVersion(c *tls.Config, v uint16) *tls.Config {
	c.MaxVersion = v
	return c
}
