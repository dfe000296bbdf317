package broker_test

import (
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/net/server"
)

func TestParseListeners(t *testing.T) {
	protocols, err := broker.ParseProtocolMap("INTERNAL:SASL_SSL, EXTERNAL:SSL")
	if err != nil {
		t.Fatal(err)
	}
	got, err := broker.ParseListeners("PLAINTEXT://127.0.0.1:9092, INTERNAL://:9096,EXTERNAL://0.0.0.0:9093", protocols)
	want := []broker.Listener{
		{Name: "PLAINTEXT", Protocol: server.Plaintext, Addr: "127.0.0.1:9092"},
		{Name: "INTERNAL", Protocol: server.SASLSSL, Addr: ":9096"},
		{Name: "EXTERNAL", Protocol: server.SSL, Addr: "0.0.0.0:9093"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for spec, msg := range map[string]string{
		"CUSTOM://:1":                   "not a security protocol",
		"PLAINTEXT://:1,PLAINTEXT://:2": "used twice",
		"PLAINTEXT:1":                   "want NAME://host:port",
		"PLAINTEXT://nohost":            "missing port",
		"":                              "no listener",
	} {
		if _, err := broker.ParseListeners(spec, nil); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an error mentioning %q", spec, err, msg)
		}
	}
	adv, err := broker.ParseAdvertisedListeners("SASL_SSL://kafka.example.com:9095")
	if err != nil || adv["SASL_SSL"] != "kafka.example.com:9095" {
		t.Errorf("advertised: %v %v", adv, err)
	}
	if _, err := broker.ParseProtocolMap("X:NOPE"); err == nil {
		t.Error("a map to an unknown protocol: want an error")
	}
}

// Metadata and FindCoordinator answer with the address of the listener
// the client came in on (advertised.listeners per listener).
func TestAdvertisedPerListener(t *testing.T) {
	s := startSecure(t, brokertest.WithConfig(func(c *broker.Config) {
		c.AdvertisedListeners = map[string]string{lSASL: "sasl.example.com:19094"}
	}))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g"
	for listener, want := range map[string]string{lSASL: "sasl.example.com:19094", lPlain: s.addr(lPlain)} {
		c := s.conn(t, listener, map[string]string{lSASL: "admin"}[listener])
		r := c.RoundTrip(md).(*kmsg.MetadataResponse)
		if got := net.JoinHostPort(r.Brokers[0].Host, fmt.Sprint(r.Brokers[0].Port)); got != want {
			t.Errorf("%s: metadata advertises %s, want %s", listener, got, want)
		}
		f := c.RoundTrip(fc).(*kmsg.FindCoordinatorResponse)
		if got := net.JoinHostPort(f.Host, fmt.Sprint(f.Port)); f.ErrorCode == 0 && got != want {
			t.Errorf("%s: coordinator at %s, want %s", listener, got, want)
		}
	}
}
