package brokertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"kaas/broker"
)

// PKI is a throwaway certificate authority for one test: certificates are
// generated with crypto/x509 when the test runs, never committed.
type PKI struct {
	t      testing.TB
	Dir    string
	CA     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAPool *x509.CertPool
	CAFile string // PEM
	serial int64
}

// NewPKI creates a CA in a temporary directory.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{t: t, Dir: t.TempDir(), serial: 1}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kaas test CA", Organization: []string{"kaas"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.CA, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CAPool = x509.NewCertPool()
	p.CAPool.AddCert(p.CA)
	p.CAFile = filepath.Join(p.Dir, "ca.pem")
	writePEM(t, p.CAFile, "CERTIFICATE", der)
	return p
}

// Cert is a certificate the CA signed, as files and as a tls.Certificate.
type Cert struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
	Leaf              *x509.Certificate
}

// CertOptions shape a certificate.
type CertOptions struct {
	Subject  pkix.Name
	Server   bool          // for 127.0.0.1/localhost, else a client certificate
	Validity time.Duration // 0: a day; negative: expired that long ago
	SignedBy *PKI          // another CA (an untrusted certificate); nil: this one
}

// Issue signs a certificate and writes it (and its key) as PEM files named
// after name.
func (p *PKI) Issue(name string, o CertOptions) Cert {
	t := p.t
	t.Helper()
	signer := p
	if o.SignedBy != nil {
		signer = o.SignedBy
	}
	signer.serial++
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	switch {
	case o.Validity < 0:
		notBefore, notAfter = time.Now().Add(2*o.Validity), time.Now().Add(o.Validity)
	case o.Validity > 0:
		notAfter = time.Now().Add(o.Validity)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(signer.serial),
		Subject:      o.Subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if o.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.CA, &key.PublicKey, signer.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := Cert{CertFile: filepath.Join(p.Dir, name+".pem"), KeyFile: filepath.Join(p.Dir, name+"-key.pem")}
	writePEM(t, c.CertFile, "CERTIFICATE", der)
	writePEM(t, c.KeyFile, "EC PRIVATE KEY", keyDER)
	c.Leaf, _ = x509.ParseCertificate(der)
	c.TLS = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c.Leaf}
	return c
}

// ClientTLS is a client configuration trusting the CA, presenting certs.
func (p *PKI) ClientTLS(certs ...Cert) *tls.Config {
	cfg := &tls.Config{RootCAs: p.CAPool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	for _, c := range certs {
		cfg.Certificates = append(cfg.Certificates, c.TLS)
	}
	return cfg
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	f, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Renamed into place, as a certificate renewal would be.
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
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
