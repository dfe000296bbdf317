package brokertest

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"

	"kaas/broker"
	"kaas/broker/certs"
)

// PKI is a throwaway certificate authority for one test (broker/certs):
// certificates are generated with crypto/x509 when the test runs, never
// committed.
type PKI struct {
	*certs.CA
	t      testing.TB
	CAPool *x509.CertPool
	CAFile string // PEM
}

// NewPKI creates a CA in a temporary directory.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	ca, err := certs.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{CA: ca, t: t, CAPool: ca.Pool, CAFile: ca.File}
}

// Cert is a certificate the CA signed, as files and as a tls.Certificate.
type Cert = certs.Cert

// CertOptions shape a certificate.
type CertOptions struct {
	Subject  pkix.Name
	Server   bool          // for 127.0.0.1 and localhost; else a client certificate
	Validity time.Duration // 0: a day; negative: expired that long ago
	SignedBy *PKI          // another CA (an untrusted certificate); nil: this one
}

// Issue signs a certificate and writes it (and its key) as PEM files named
// after name in the PKI's directory.
func (p *PKI) Issue(name string, o CertOptions) Cert {
	p.t.Helper()
	signer := p
	if o.SignedBy != nil {
		signer = o.SignedBy
	}
	c, err := signer.CA.Issue(p.Dir, name, certs.Options{Subject: o.Subject, Server: o.Server, Validity: o.Validity})
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// AddUser stores a SCRAM credential for user in dataDir for each
// mechanism (both SCRAM ones when none is named), as `kaas users add`
// does; no broker may be running on dataDir.
func AddUser(t testing.TB, dataDir, user, password string, mechanisms ...string) {
	t.Helper()
	if len(mechanisms) == 0 {
		mechanisms = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}
	}
	for _, m := range mechanisms {
		if err := broker.AddUser(dataDir, user, m, password, 4096); err != nil {
			t.Fatal(err)
		}
	}
}
