// Package loopback picks loopback addresses for processes that must know
// their address before they start: the tests' brokers and etcd, the
// bench's clusters and the chaos run's. It sits with model, the layer
// every other may import, since chaos (which imports no other layer of
// kaas) and bench pick addresses as the tests do (their FreeAddr is in
// broker/brokertest/loopback), and a port picked from "127.0.0.1:0" is
// not safe to reuse (see Pick).
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Pick returns a loopback host:port that nothing listens on, for a
// process that must know its address before it starts (cluster brokers
// register the address they listen on) or that comes back at the same
// address after it is killed.
//
// The port is picked below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range). A port taken from "127.0.0.1:0" lies
// inside that range: once its listener closes, the kernel may hand it to
// any outbound connection as its local port, and under load tests lost
// that race — the child that was to bind it, or the broker restarted at
// its old address, failed with "address already in use". The kernel never
// hands out a port below the range on its own, so only another explicit
// bind can take one; a random pick that is checked to bind, and never
// given twice by this process, makes that unlikely between test
// processes running at once.
func Pick() (string, error) {
	low := ephemeralLow()
	const floor = 10000
	for range 100 {
		port := floor + rand.IntN(low-floor)
		if !handOut(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // bound by someone else
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port in [%d, %d) after 100 tries", floor, low)
}

var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// handOut reserves port for this process; false if it was handed out
// before (its taker may not have bound it yet).
func handOut(port int) bool {
	handedMu.Lock()
	defer handedMu.Unlock()
	if handed[port] {
		return false
	}
	handed[port] = true
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default, 32768, where it cannot be read).
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 11000 {
		return linuxDefault
	}
	return low
}
