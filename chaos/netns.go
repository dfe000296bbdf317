package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// network puts each broker in a network namespace of its own, joined to
// the harness's by a veth pair on a bridge:
//
//	root namespace: bridge kc<run>br  10.A.B.1 (clients)  10.A.B.2 (etcd)
//	kaas-chaos-<run>-bN: veth         10.A.B.(10+N)       (broker N)
//
// etcd listens on an address clients never use, so a partition is one
// blackhole route inside a broker's namespace: to 10.A.B.2 cuts it from
// etcd and keeps its clients (whose packets come from 10.A.B.1); adding
// its peers' addresses cuts it from them too. Healing deletes the routes.
// Every name carries the run's token (the harness's pid and a counter),
// so a later run removes what a killed one left behind.
type network struct {
	token    string
	bridge   string
	prefix   string // "10.A.B."
	clientIP string
	etcdIP   string
	brokerIP map[int]string
	ns       map[int]string

	mu   sync.Mutex
	cuts map[int][]string
}

var netRuns atomic.Int64

const nsPrefix = "kaas-chaos-"

// partitionsUnavailable says why this process cannot make namespaces,
// or "" when it can try.
func partitionsUnavailable() string {
	switch {
	case runtime.GOOS != "linux":
		return "network namespaces are Linux only"
	case os.Geteuid() != 0:
		return "not root (network namespaces need CAP_NET_ADMIN)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command (iproute2)"
	}
	return ""
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetwork builds the bridge and one namespace per broker.
func newNetwork(brokers int) (n *network, err error) {
	removeStaleNetworks()
	token := strconv.FormatInt(int64(os.Getpid()), 16) + strconv.FormatInt(netRuns.Add(1)%16, 16)
	prefix, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	n = &network{token: token, bridge: "kc" + token + "br", prefix: prefix, clientIP: prefix + "1", etcdIP: prefix + "2",
		brokerIP: map[int]string{}, ns: map[int]string{}, cuts: map[int][]string{}}
	defer func() {
		if err != nil {
			n.close()
			n = nil
		}
	}()
	steps := [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", n.clientIP + "/24", "dev", n.bridge},
		{"addr", "add", n.etcdIP + "/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for i := 1; i <= brokers; i++ {
		ns, host, peer, ip := nsPrefix+token+"-b"+strconv.Itoa(i), "kc"+token+"v"+strconv.Itoa(i), "kc"+token+"n"+strconv.Itoa(i), prefix+strconv.Itoa(10+i)
		n.ns[i], n.brokerIP[i] = ns, ip
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", host, "type", "veth", "peer", "name", peer},
			[]string{"link", "set", peer, "netns", ns},
			[]string{"link", "set", host, "master", n.bridge, "up"},
			[]string{"-n", ns, "addr", "add", ip + "/24", "dev", peer},
			[]string{"-n", ns, "link", "set", peer, "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			return n, err
		}
	}
	return n, nil
}

// freeSubnet picks a 10.A.B.0/24 no interface here uses.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return "", err
	}
	routes, _ := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	used := string(out) + string(routes)
	for range 100 {
		p := fmt.Sprintf("10.%d.%d.", 200+rand.IntN(50), rand.IntN(256))
		if !strings.Contains(used, " "+p) {
			return p, nil
		}
	}
	return "", errors.New("no free 10.x.y.0/24 subnet")
}

// exec is the command prefix that runs a program in broker id's namespace.
func (n *network) exec(id int) []string { return []string{"ip", "netns", "exec", n.ns[id]} }

// cut blackholes addrs inside broker id's namespace.
func (n *network) cut(id int, addrs ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range addrs {
		if err := ipCmd("-n", n.ns[id], "route", "add", "blackhole", a+"/32"); err != nil {
			return err
		}
		n.cuts[id] = append(n.cuts[id], a)
	}
	return nil
}

// heal removes every route cut added to broker id's namespace.
func (n *network) heal(id int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var first error
	for _, a := range n.cuts[id] {
		if err := ipCmd("-n", n.ns[id], "route", "del", "blackhole", a+"/32"); err != nil && first == nil {
			first = err
		}
	}
	delete(n.cuts, id)
	return first
}

// close removes the namespaces (their veth ends, and so the pairs, go
// with them) and the bridge.
func (n *network) close() {
	for _, ns := range n.ns {
		_ = ipCmd("netns", "del", ns)
	}
	_ = ipCmd("link", "del", n.bridge)
}

// removeStaleNetworks deletes namespaces and bridges of runs whose
// harness is gone (killed before it could clean up).
func removeStaleNetworks() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		token, _, ok := strings.Cut(rest, "-")
		if !ok || len(token) < 2 {
			continue
		}
		pid, err := strconv.ParseInt(token[:len(token)-1], 16, 64)
		if err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.FormatInt(pid, 10)); err == nil {
			continue // its harness still runs
		}
		_ = ipCmd("netns", "del", name)
		_ = ipCmd("link", "del", "kc"+token+"br")
	}
}
