package bench

import (
	"crypto/x509/pkix"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"kaas/broker"
	"kaas/broker/certs"
	"kaas/net/server"
)

// The security figure: the produce scenario against one kaas broker per
// side, each reached through a different listener — PLAINTEXT (gnet event
// loops), SSL (crypto/tls on a goroutine pair per connection) and
// SASL_SSL with SCRAM-SHA-512 (the same, after the SASL exchange) — in
// the same run, with the TLS sides as ratios of the plaintext one.
func init() {
	register(&Scenario{
		Name:     "produce-secure",
		About:    "the produce scenario over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), one kaas broker per side",
		Headline: "records", Latency: "ack",
		Sides:     []string{sidePlain, sideTLS, sideSASLSSL},
		Reference: sidePlain,
		// Every side notes its process CPU per record: what TLS and SASL
		// add holds steadier than the throughput on shared cores.
		Run: produceAtFullRate(produceOpts{}),
	})
}

const (
	sidePlain   = "kaas-plaintext"
	sideTLS     = "kaas-ssl"
	sideSASLSSL = "kaas-sasl_ssl"
)

// secureUser is the SCRAM user of the SASL_SSL side.
const secureUser, securePassword = "bench", "bench-secret"

// startSecureKaas starts kaas with the one listener side needs and
// returns the client options that reach it.
func startSecureKaas(side string, o *Options) (*Target, error) {
	dir, err := os.MkdirTemp(o.TempDir, "kaas-bench-")
	if err != nil {
		return nil, err
	}
	cfg := kaasBenchConfig(o, dir)
	var clientOpts []kgo.Opt
	if side != sidePlain {
		ca, err := certs.NewCA(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		cert, err := ca.Issue("", "server", certs.Options{Subject: pkix.Name{CommonName: "localhost"}, Server: true})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		cfg.TLSCertFile, cfg.TLSKeyFile = cert.CertFile, cert.KeyFile
		clientOpts = append(clientOpts, kgo.DialTLSConfig(ca.ClientTLS()))
	}
	switch side {
	case sidePlain:
		cfg.Listeners = []broker.Listener{{Name: "PLAINTEXT", Protocol: server.Plaintext, Addr: "127.0.0.1:0"}}
	case sideTLS:
		cfg.Listeners = []broker.Listener{{Name: "SSL", Protocol: server.SSL, Addr: "127.0.0.1:0"}}
	case sideSASLSSL:
		cfg.Listeners = []broker.Listener{{Name: "SASL_SSL", Protocol: server.SASLSSL, Addr: "127.0.0.1:0"}}
		cfg.SASLMechanisms = []string{"SCRAM-SHA-512"}
		if err := broker.AddUser(dir, secureUser, "SCRAM-SHA-512", securePassword, 4096); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		clientOpts = append(clientOpts, kgo.SASL(scram.Auth{User: secureUser, Pass: securePassword}.AsSha512Mechanism()))
	default:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("unknown side %q", side)
	}
	t, err := startKaasWith(cfg, o, dir)
	if err != nil {
		return nil, err
	}
	t.Side, t.ClientOpts = side, clientOpts
	return t, nil
}
