package broker

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"

	"kaas/net/server"
	"kaas/state/acl"
)

// Listener is one of --listeners (Apache's listeners): a name, the
// security protocol it maps to, and the address it binds.
type Listener struct {
	Name     string
	Protocol server.Protocol
	Addr     string // host:port; port 0 picks one
}

func (l Listener) String() string { return l.Name + "://" + l.Addr }

// ParseListeners reads Apache's listeners syntax,
// "PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9095". A listener's security
// protocol is its name unless protocolMap (listener.security.protocol.map,
// "INTERNAL:SASL_SSL,EXTERNAL:SSL") maps the name to one.
func ParseListeners(spec string, protocolMap map[string]server.Protocol) ([]Listener, error) {
	named, err := parseNamedAddrs("listener", spec)
	if err != nil {
		return nil, err
	}
	var out []Listener
	for _, n := range named {
		proto, ok := protocolMap[n.name]
		if !ok {
			if proto, ok = server.ParseProtocol(n.name); !ok {
				return nil, fmt.Errorf("listener %s: not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); map it with --listener-security-protocol-map", n.name)
			}
		}
		out = append(out, Listener{Name: n.name, Protocol: proto, Addr: n.addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listener in %q", spec)
	}
	return out, nil
}

// ParseProtocolMap reads listener.security.protocol.map.
func ParseProtocolMap(spec string) (map[string]server.Protocol, error) {
	out := map[string]server.Protocol{}
	for _, item := range splitList(spec) {
		name, p, ok := strings.Cut(item, ":")
		proto, known := server.ParseProtocol(p)
		if !ok || !known {
			return nil, fmt.Errorf("listener security protocol map entry %q: want NAME:PROTOCOL", item)
		}
		out[name] = proto
	}
	return out, nil
}

// ParseAdvertisedListeners reads advertised.listeners: listener name →
// the host:port clients are told.
func ParseAdvertisedListeners(spec string) (map[string]string, error) {
	named, err := parseNamedAddrs("advertised listener", spec)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range named {
		out[n.name] = n.addr
	}
	return out, nil
}

type namedAddr struct{ name, addr string }

// parseNamedAddrs reads "NAME://host:port,..." with each name once.
func parseNamedAddrs(what, spec string) ([]namedAddr, error) {
	var out []namedAddr
	seen := map[string]bool{}
	for _, item := range splitList(spec) {
		name, addr, ok := strings.Cut(item, "://")
		if !ok {
			return nil, fmt.Errorf("%s %q: want NAME://host:port", what, item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, item, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s name %s is used twice", what, name)
		}
		seen[name] = true
		out = append(out, namedAddr{name, addr})
	}
	return out, nil
}

// splitList splits a comma-separated setting, dropping blanks.
func splitList(spec string) []string {
	var out []string
	for _, item := range strings.Split(spec, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// listeners are the configured listeners: --listeners, or one PLAINTEXT
// listener on --listen.
func (c Config) listeners() []Listener {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []Listener{{Name: string(server.Plaintext), Protocol: server.Plaintext, Addr: c.Listen}}
}

// interBrokerListener is the listener peer brokers connect to:
// --inter-broker-listener-name, else the first.
func (c Config) interBrokerListener() Listener {
	ls := c.listeners()
	for _, l := range ls {
		if l.Name == c.InterBrokerListener {
			return l
		}
	}
	return ls[0]
}

// checkListeners validates the listener settings together.
func (c Config) checkListeners() error {
	ls := c.listeners()
	names := map[string]bool{}
	needTLS := false
	for _, l := range ls {
		names[l.Name] = true
		needTLS = needTLS || l.Protocol.TLS()
	}
	for name := range c.AdvertisedListeners {
		if !names[name] {
			return fmt.Errorf("advertised listener %s is not one of the listeners", name)
		}
	}
	if c.InterBrokerListener != "" && !names[c.InterBrokerListener] {
		return fmt.Errorf("inter-broker listener %s is not one of the listeners", c.InterBrokerListener)
	}
	if needTLS && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return fmt.Errorf("TLS listeners need --tls-cert and --tls-key")
	}
	if c.TLSClientCAFile != "" && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key")
	}
	return nil
}

// serverListeners turns the listeners into the front end's, with TLS and
// the principal a connection starts with: the client certificate's
// subject on an SSL listener that verified one, anonymous otherwise (SASL
// listeners set the principal when the exchange succeeds).
func (b *Broker) serverListeners(tlsCfg *tls.Config) []server.Listener {
	var out []server.Listener
	for _, l := range b.cfg.listeners() {
		sl := server.Listener{Name: l.Name, Protocol: l.Protocol, Addr: l.Addr}
		if l.Protocol.TLS() {
			sl.TLS = tlsCfg
			if l.Protocol == server.SSL && b.cfg.TLSClientCAFile != "" {
				sl.TLS = b.tls.requireClientCerts(tlsCfg)
			}
		}
		sl.Principal = func(state *tls.ConnectionState) string {
			if state != nil && l.Protocol == server.SSL && len(state.PeerCertificates) > 0 {
				return acl.CertificatePrincipal(state.PeerCertificates[0])
			}
			return acl.Anonymous
		}
		out = append(out, sl)
	}
	return out
}

// setAdvertised fixes, for each listener, the address clients are told:
// --advertised-listeners, else the bound address (--advertised-listener,
// the older single-listener flag, names the first listener's).
func (b *Broker) setAdvertised() error {
	b.advertisedAddrs = map[string]hostPort{}
	for i, l := range b.cfg.listeners() {
		addr, ok := b.cfg.AdvertisedListeners[l.Name]
		if !ok && i == 0 {
			addr = b.cfg.AdvertisedAddr
		}
		if addr == "" {
			addr = b.srv.Addrs()[i].String()
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("advertised listener %q: %w", addr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return fmt.Errorf("advertised listener %q: bad port", addr)
		}
		b.advertisedAddrs[l.Name] = hostPort{host, int32(p)}
	}
	return nil
}

type hostPort struct {
	host string
	port int32
}

// listenersSpec is the listeners in Apache's syntax with the bound
// (advertised=false) or advertised addresses, for DescribeConfigs.
func (b *Broker) listenersSpec(advertised bool) string {
	var parts []string
	for i, l := range b.cfg.listeners() {
		addr := b.srv.Addrs()[i].String()
		if advertised {
			hp := b.advertisedAddrs[l.Name]
			addr = net.JoinHostPort(hp.host, strconv.Itoa(int(hp.port)))
		}
		parts = append(parts, l.Name+"://"+addr)
	}
	return strings.Join(parts, ",")
}

// Listeners are the listeners with their bound addresses, as Apache
// writes them (NAME://host:port,...).
func (b *Broker) Listeners() string { return b.listenersSpec(false) }
