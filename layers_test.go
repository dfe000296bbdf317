// The layering rule, enforced. Imports point down only:
//
//	cmd, bench ─▶ broker ─▶ broker/fetchsession, broker/auth, broker/peers, broker/cluster (belowHandlers)
//	                  ├───▶ net
//	                  ├───▶ coord ──────────────▶ state, storage ─▶ model
//	                  └───▶ actors ─▶ messages ─▶ state, storage ─▶ model
//
// model (the names every layer shares, such as a topic partition, and
// model/proc, the process's own CPU reading bench and storage share) is the
// bottom layer and metrics a leaf: anyone may import either, they import
// nothing of kaas. chaos (the fault checker, run by cmd) imports no
// layer but model: it drives the kaas binary through clients.
// coord (cluster coordination
// through etcd) sits beside actors: the broker wires the two together. A package may import packages
// of its own layer and of the layers its row below lists; tests are held
// to the same rule as the code they test. The packages under broker/
// named in belowHandlers are layers of their own below the handlers: the
// broker (and whatever may import it) may import them, they may not
// import the broker. protoactor-go stays inside
// actors/ (bench measures it bare), gnet inside net/.
package kaas_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// mayImport lists, for each layer (the first path element under the
// module), the layers its packages may import besides their own.
var mayImport = map[string][]string{
	"cmd":      {"bench", "chaos", "broker", "net", "coord", "actors", "messages", "state", "storage", "metrics", "model"},
	"bench":    {"broker", "net", "coord", "actors", "messages", "state", "storage", "metrics", "model"},
	"chaos":    {"model"}, // drives the kaas binary through clients only (model: loopback's port picker)
	"broker":   {"net", "coord", "actors", "messages", "state", "storage", "metrics", "model"},
	"coord":    {"state", "storage", "metrics", "model"},
	"deploy":   {}, // manifests and the test that decodes them
	"net":      {"metrics", "model"},
	"actors":   {"messages", "state", "storage", "metrics", "model"},
	"messages": {"state", "storage", "model"},
	"state":    {"model"}, // pure: nothing of storage, not even its types (but stillImportsStorage)
	"storage":  {"model"},
	"metrics":  {},
	"model":    {}, // the bottom: imports nothing of kaas
}

// stillImportsStorage is the one state machine that still builds the
// storage records it has written (storage/offsetlog's), allowed until it
// hands the writer records of its own (issue 26). Nothing may join it.
var stillImportsStorage = map[string]string{
	"kaas/state/consumergroup": "kaas/storage/offsetlog",
}

// belowHandlers: the packages under broker/ that hold what is not a
// handler, each with the layers it may import.
var belowHandlers = map[string][]string{
	"broker/fetchsession": {"state", "storage", "metrics", "model"},
	"broker/auth":         {"net", "state", "storage", "metrics", "model"},
	"broker/peers":        {"broker/auth", "messages", "state", "storage", "metrics", "model"},
	"broker/cluster":      {"coord", "state", "storage", "metrics", "model"},
}

// confined third-party modules: only these layers may import them.
var confined = map[string][]string{
	"github.com/asynkron/protoactor-go": {"actors", "bench"},
	"github.com/panjf2000/gnet":         {"net"},
	"go.etcd.io/etcd":                   {"coord"},
	"k8s.io/":                           {"deploy"},
}

func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		"./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "kaas/"
	layerOf := func(path string) string {
		rest, ok := strings.CutPrefix(path, mod)
		if !ok {
			return ""
		}
		layer, sub, _ := strings.Cut(rest, "/")
		sub, _, _ = strings.Cut(sub, "/")
		if _, below := belowHandlers[layer+"/"+sub]; below {
			return layer + "/" + sub
		}
		return layer
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	seen := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := fields[0]
		from := layerOf(pkg)
		if from == "" {
			continue // the module root: this test
		}
		allowed, known := mayImport[from]
		if own, below := belowHandlers[from]; below {
			allowed, known = own, true
		}
		if !known {
			t.Errorf("%s: top-level folder %q has no row in mayImport; give it a layer", pkg, from)
			continue
		}
		seen++
		done := map[string]bool{}
		for _, imp := range fields[1:] {
			if done[imp] {
				continue // listed by both the package and its tests
			}
			done[imp] = true
			if to := layerOf(imp); to != "" {
				if _, below := belowHandlers[to]; below && (from == "broker" || contains(allowed, "broker")) {
					continue // below the handlers
				}
				if stillImportsStorage[pkg] == imp {
					continue
				}
				if to != from && !contains(allowed, to) {
					t.Errorf("%s imports %s: layer %s may not import layer %s", pkg, imp, from, to)
				}
				continue
			}
			for prefix, layers := range confined {
				if strings.HasPrefix(imp, prefix) && !contains(layers, from) {
					t.Errorf("%s imports %s, which only %v may import", pkg, imp, layers)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("go list returned no packages")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
