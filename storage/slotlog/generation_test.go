package slotlog

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseGeneration(t *testing.T) {
	for name, want := range map[string]struct {
		base string
		gen  int64
		ok   bool
	}{
		"slot-03.log":     {"slot-03", 0, true},
		"slot-03.g7.log":  {"slot-03", 7, true},
		"slot-03.g12.log": {"slot-03", 12, true},
		"slot-03.json":    {"", 0, false},
		".tmp-0000abcd":   {"", 0, false},
	} {
		base, gen, ok := ParseGeneration(name)
		if base != want.base || gen != want.gen || ok != want.ok {
			t.Errorf("ParseGeneration(%q) = %q, %d, %v; want %+v", name, base, gen, ok, want)
		}
	}
}

// A deposed owner keeps writing into the file it had open after a new
// owner adopted the slot: none of it is read back, and its late
// compaction (a rename into its own generation's name) is ignored by the
// next adoption and by a single broker's open.
func TestAdoptSealsTheDeposedOwnersFile(t *testing.T) {
	dir := t.TempDir()
	e := env(dir)
	p1, err := Adopt(e, dir, "slot-01", Owner{Gen: 1})
	if err != nil || p1 != GenerationPath(dir, "slot-01", 1) {
		t.Fatalf("first adoption: %s, %v", p1, err)
	}
	old, _ := open(t, e, p1)
	appendSync(t, old, "a", "b")

	p2, err := Adopt(e, dir, "slot-01", Owner{Gen: 2})
	if err != nil || p2 != GenerationPath(dir, "slot-01", 2) {
		t.Fatalf("takeover: %s, %v", p2, err)
	}
	if _, err := os.Stat(p1); !os.IsNotExist(err) {
		t.Fatalf("the deposed generation's file is still there: %v", err)
	}
	// The deposed owner writes late, and compacts late.
	appendSync(t, old, "late")
	if err := old.Rewrite(func(yield func([]byte) bool) { yield([]byte("stale")) }); err != nil {
		t.Fatal(err)
	}
	cur, got := open(t, e, p2)
	if !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("the new owner read %q", got)
	}
	appendSync(t, cur, "c")
	cur.Close()

	if p, _ := Latest(e.Or().FS, dir, "slot-01"); p != p2 {
		t.Fatalf("Latest = %s, want %s", p, p2)
	}
	p3, err := Adopt(e, dir, "slot-01", Owner{Gen: 1}) // an owner epoch below the files': still newer
	if err != nil || p3 != GenerationPath(dir, "slot-01", 3) {
		t.Fatalf("next takeover: %s, %v", p3, err)
	}
	_, got = open(t, e, p3)
	if !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("the next owner read %q", got)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	if !reflect.DeepEqual(names, []string{filepath.Base(p3)}) {
		t.Fatalf("files left: %v", names)
	}
}

// Found by the chaos checker (the partition form of it): a broker paused
// between claiming a slot and adopting its file resumes with a claim that
// no longer holds, while another broker owns the slot and appends to its
// generation. Adopting anyway would copy the owner's file into a newer
// generation and unlink the one it appends to — everything it then
// acknowledges lost. A claim whose gate says no writes nothing.
func TestAdoptWithAStaleClaimWritesNothing(t *testing.T) {
	dir := t.TempDir()
	e := env(dir)
	p2, err := Adopt(e, dir, "slot-01", Owner{Gen: 2})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := open(t, e, p2)
	appendSync(t, owner, "a")
	if _, err := Adopt(e, dir, "slot-01", Owner{Gen: 1, MayAct: func() bool { return false }}); err != ErrClaimGone {
		t.Fatalf("adopting with a stale claim: %v, want ErrClaimGone", err)
	}
	appendSync(t, owner, "b")
	owner.Close()
	if p, _ := Latest(e.Or().FS, dir, "slot-01"); p != p2 {
		t.Fatalf("Latest = %s after a stale adoption, want the owner's %s", p, p2)
	}
	_, got := open(t, e, p2)
	if !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("the owner's file holds %q", got)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("files after a stale adoption: %v", ents)
	}
}
