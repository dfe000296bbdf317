package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// tlsFiles serves the TLS listeners' certificate, key and client CA from
// their files and re-reads them when they change (a renewed certificate
// needs no restart): at most once a second, a new handshake compares the
// files' modification times and sizes with the loaded ones and reloads
// them; a reload that fails is logged and the previous files stay in use.
// TLS 1.2 is the oldest version offered.
type tlsFiles struct {
	cert, key, ca string
	log           *slog.Logger

	mu      sync.Mutex // one reload at a time
	checked time.Time
	stamps  []fileStamp

	// Built configurations, replaced on reload: the listeners' (optional
	// client certificates, verified when given) and the one that
	// requires a client certificate (SSL listeners with --tls-client-ca).
	optional atomic.Pointer[tls.Config]
	required atomic.Pointer[tls.Config]
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func (f *tlsFiles) files() []string {
	out := []string{f.cert, f.key}
	if f.ca != "" {
		out = append(out, f.ca)
	}
	return out
}

func (f *tlsFiles) stat() ([]fileStamp, error) {
	var out []fileStamp
	for _, p := range f.files() {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out = append(out, fileStamp{fi.ModTime(), fi.Size()})
	}
	return out, nil
}

// load reads the files and builds the configurations.
func (f *tlsFiles) load() error {
	stamps, err := f.stat()
	if err != nil {
		return err
	}
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return fmt.Errorf("loading --tls-cert %s and --tls-key %s: %w", f.cert, f.key, err)
	}
	var pool *x509.CertPool
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return err
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-client-ca %s holds no PEM certificate", f.ca)
		}
	}
	build := func(auth tls.ClientAuthType) *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, ClientAuth: auth, ClientCAs: pool}
	}
	optional := tls.NoClientCert
	if pool != nil {
		optional = tls.VerifyClientCertIfGiven
	}
	f.optional.Store(build(optional))
	f.required.Store(build(tls.RequireAndVerifyClientCert))
	f.stamps = stamps
	return nil
}

// maybeReload re-reads the files if they changed since the last look.
func (f *tlsFiles) maybeReload() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < time.Second {
		return
	}
	f.checked = time.Now()
	stamps, err := f.stat()
	if err != nil {
		f.log.Warn("TLS files unreadable; keeping the loaded certificate", "err", err)
		return
	}
	same := len(stamps) == len(f.stamps)
	for i := 0; same && i < len(stamps); i++ {
		same = stamps[i] == f.stamps[i]
	}
	if same {
		return
	}
	if err := f.load(); err != nil {
		f.log.Warn("reloading TLS files failed; keeping the loaded certificate", "err", err)
		return
	}
	f.log.Info("reloaded TLS certificate", "cert", f.cert, "client_ca", f.ca)
}

// listenerConfig is what a TLS listener hands crypto/tls: every handshake
// asks for the current configuration.
func (f *tlsFiles) listenerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		f.maybeReload()
		return f.optional.Load(), nil
	}}
}

// requireClientCerts is listenerConfig for a listener that refuses clients
// without a certificate the client CA signed (mutual TLS).
func (f *tlsFiles) requireClientCerts(*tls.Config) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		f.maybeReload()
		return f.required.Load(), nil
	}}
}

// startTLS loads the files when some listener needs them.
func (b *Broker) startTLS() (*tls.Config, error) {
	needed := false
	for _, l := range b.cfg.listeners() {
		needed = needed || l.Protocol.TLS()
	}
	if !needed {
		return nil, nil
	}
	b.tls = &tlsFiles{cert: b.cfg.TLSCertFile, key: b.cfg.TLSKeyFile, ca: b.cfg.TLSClientCAFile, log: b.log}
	if err := b.tls.load(); err != nil {
		return nil, errors.Join(errors.New("TLS listeners"), err)
	}
	return b.tls.listenerConfig(), nil
}

// tlsHandshake counts TLS handshakes by outcome.
func (b *Broker) tlsHandshake(listener string, err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	b.metrics.TLSHandshakes.WithLabelValues(listener, result).Inc()
}

// peerTLS is the peer client's TLS configuration for an inter-broker
// listener that is TLS: peers' certificates are verified against
// --inter-broker-tls-ca (else --tls-client-ca, else the system roots),
// for the host each peer registered; this broker presents its own
// certificate (--tls-cert, as re-read) to listeners that ask for one, as
// Apache's brokers present their keystore's.
func (b *Broker) peerTLS() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	ca := b.cfg.InterBrokerTLSCAFile
	if ca == "" {
		ca = b.cfg.TLSClientCAFile
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("inter-broker TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("inter-broker TLS CA %s holds no PEM certificate", ca)
		}
	}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if b.tls == nil {
			return &tls.Certificate{}, nil // no certificate to offer
		}
		b.tls.maybeReload()
		return &b.tls.optional.Load().Certificates[0], nil
	}
	return cfg, nil
}
