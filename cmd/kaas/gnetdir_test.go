package main

import (
	"path/filepath"
	"testing"

	"kaas/broker/brokertest"
)

// TestServeKilledLeavesNoGnetDir: gnet's private socket directory
// (kaas-gnet-* in the temp directory) is gone once the broker listens, so
// a SIGKILL leaves none behind.
func TestServeKilledLeavesNoGnetDir(t *testing.T) {
	tmp := t.TempDir()
	p := brokertest.ServeInShell(t, t.TempDir(), "export TMPDIR="+tmp)
	gnetDirs := func() []string {
		m, err := filepath.Glob(filepath.Join(tmp, "kaas-gnet-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := gnetDirs(); len(m) != 0 {
		t.Fatalf("listening broker still has %v", m)
	}
	if !brokertest.Accepts(p.Addr) {
		t.Fatalf("broker on %s does not accept connections", p.Addr)
	}
	p.Kill()
	if m := gnetDirs(); len(m) != 0 {
		t.Fatalf("killed broker left %v", m)
	}
}
