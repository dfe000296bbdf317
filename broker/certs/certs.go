// Package certs makes throwaway certificates — a CA and the server and
// client certificates it signs — for tests and benchmarks: generated with
// crypto/x509 when they run, written as PEM files, never committed.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CA is a certificate authority whose files live in Dir.
type CA struct {
	Dir    string
	Cert   *x509.Certificate
	Pool   *x509.CertPool
	File   string // its certificate, PEM
	key    *ecdsa.PrivateKey
	mu     sync.Mutex
	serial int64
}

// NewCA creates a CA in dir.
func NewCA(dir string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Dir: dir, Cert: cert, Pool: x509.NewCertPool(), File: filepath.Join(dir, "ca.pem"), key: key, serial: 1}
	ca.Pool.AddCert(cert)
	return ca, writePEM(ca.File, "CERTIFICATE", der)
}

// Cert is a certificate a CA signed, as files and as a tls.Certificate.
type Cert struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
	Leaf              *x509.Certificate
}

// Options shape a certificate.
type Options struct {
	Subject pkix.Name
	Server  bool // for 127.0.0.1 and localhost; else a client certificate
	// ClientToo makes a server certificate a client certificate as well
	// (a broker presenting its own to peers that require one).
	ClientToo bool
	Validity  time.Duration // 0: a day; negative: expired that long ago
}

// Issue signs a certificate and writes it and its key as PEM files named
// after name in dir (the CA's own directory when empty).
func (ca *CA) Issue(dir, name string, o Options) (Cert, error) {
	ca.mu.Lock()
	ca.serial++
	serial := ca.serial
	ca.mu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Cert{}, err
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	switch {
	case o.Validity < 0:
		notBefore, notAfter = time.Now().Add(2*o.Validity), time.Now().Add(o.Validity)
	case o.Validity > 0:
		notAfter = time.Now().Add(o.Validity)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      o.Subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if o.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		if o.ClientToo {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Cert{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Cert{}, err
	}
	if dir == "" {
		dir = ca.Dir
	}
	c := Cert{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem")}
	if err := writePEM(c.CertFile, "CERTIFICATE", der); err != nil {
		return Cert{}, err
	}
	if err := writePEM(c.KeyFile, "EC PRIVATE KEY", keyDER); err != nil {
		return Cert{}, err
	}
	c.Leaf, _ = x509.ParseCertificate(der)
	c.TLS = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c.Leaf}
	return c, nil
}

// ClientTLS is a client configuration trusting the CA and presenting
// certs.
func (ca *CA) ClientTLS(certs ...Cert) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	for _, c := range certs {
		cfg.Certificates = append(cfg.Certificates, c.TLS)
	}
	return cfg
}

// writePEM writes one PEM block to path through a temporary file renamed
// into place, as a certificate renewal would be.
func writePEM(path, typ string, der []byte) error {
	f, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
