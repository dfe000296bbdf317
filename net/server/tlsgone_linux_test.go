package server

// Linux only, as the watch it tests (tlsgone_linux.go).

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// selfSigned is a throwaway server certificate for 127.0.0.1.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// As TestGoneFiresWhileReadsArePaused, on a TLS listener: its reader does
// not read while it waits, so it watches the socket for the client's FIN.
func TestGoneFiresWhileATLSConnectionWaits(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, func(c *Config) {
		c.Listeners = []Listener{{Name: "SSL", Protocol: SSL, Addr: "127.0.0.1:0", TLS: selfSigned(t)}}
	})
	tc, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	for corr := int32(1); corr <= 2; corr++ {
		if _, err := tc.Write(formatter.AppendRequest(nil, metadata(), corr)); err != nil {
			t.Fatal(err)
		}
	}
	held := h.next(t, patience) // the second request waits behind it
	h.none(t, 2*peerWatchAfter, "the request behind an unanswered one")
	tc.Close()
	select {
	case <-held.Gone():
	case <-time.After(patience):
		t.Fatal("the call in flight never saw its waiting TLS connection close")
	}
}
