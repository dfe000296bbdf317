package partlog

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

var (
	topicA = [16]byte{0xa, 1}
	topicB = [16]byte{0xb, 2}
)

const claimed = "/data/t-0"

// topicDir fills claimed with n acknowledged batches of topic a (no id
// file when a is zero, as a build before partition.metadata left it).
func topicDir(t *testing.T, fsys vfs.FS, a [16]byte, n int) durable.Env {
	t.Helper()
	env := durable.Env{FS: fsys, DataDir: "/data", Logger: quiet}
	if err := ClaimDir(env, claimed, a, nil); err != nil {
		t.Fatal(err)
	}
	l, err := Open(env, claimed, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		appendSync(t, l, time.Now(), batchOf(int64(i), "v"))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return env
}

// endAfterClaim claims claimed for id and opens it: the log's next offset.
func endAfterClaim(t *testing.T, env durable.Env, id [16]byte) int64 {
	t.Helper()
	if err := ClaimDir(env, claimed, id, nil); err != nil {
		t.Fatalf("ClaimDir: %v", err)
	}
	l, err := Open(env, claimed, testConfig())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	return l.EndOffset()
}

func dirID(t *testing.T, fsys vfs.FS) [16]byte {
	t.Helper()
	b, err := vfs.ReadFile(fsys, claimed+"/"+topicIDFile)
	if err != nil {
		t.Fatal(err)
	}
	id, err := parseDirID(b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A directory keeps its records for its own topic id, and one without an
// id file (an earlier build's) is adopted with them; for another id (a
// deleted topic of the same name) it opens empty, its stray removed.
func TestClaimDirByTopicID(t *testing.T) {
	m := memfs.New()
	env := topicDir(t, m, topicA, 3)
	if got := endAfterClaim(t, env, topicA); got != 3 {
		t.Fatalf("the topic's own directory opened at %d, want 3", got)
	}
	if got := endAfterClaim(t, env, topicB); got != 0 {
		t.Fatalf("another topic's directory opened at %d, want an empty log", got)
	}
	if dirID(t, m) != topicB {
		t.Fatal("partition.metadata does not name the new topic")
	}
	if _, err := m.Stat(strayDir(claimed)); err == nil {
		t.Fatal("the stray directory is still there")
	}

	old := memfs.New()
	env = topicDir(t, old, [16]byte{}, 2)
	if got := endAfterClaim(t, env, topicA); got != 2 || dirID(t, old) != topicA {
		t.Fatalf("a directory without an id opened at %d, want its 2 records adopted", got)
	}
}

// With the lease in doubt a stray directory is left as it is: a peer may
// own the directory of that name by now.
func TestClaimDirUnderAClosedGateChangesNothing(t *testing.T) {
	m := memfs.New()
	env := topicDir(t, m, topicA, 2)
	err := ClaimDir(env, claimed, topicB, func() bool { return false })
	if !errors.Is(err, ErrStaleTakeOver) {
		t.Fatalf("ClaimDir under a closed gate: %v, want ErrStaleTakeOver", err)
	}
	if dirID(t, m) != topicA || endAfterClaim(t, env, topicA) != 2 {
		t.Fatal("a claim under a closed gate changed the directory")
	}
}

// A power loss at any point of removing a stray directory leaves either
// the stray or nothing of it, and the next claim opens an empty log for
// the new topic: the deleted topic's records never surface under it.
func TestClaimDirCrashLoop(t *testing.T) { memfs.Rounds(t, 60, claimCrashRound) }

func claimCrashRound(t *testing.T, r *rand.Rand) {
	m := memfs.New()
	topicDir(t, m, topicA, 1+r.IntN(4))
	ef := errorfs.Wrap(m)
	stopAt, ops := r.IntN(14), 0
	dead := errors.New("power lost")
	ef.Set(func(op errorfs.Op) error {
		if op.Kind == errorfs.Read || op.Kind == errorfs.Stat || op.Kind == errorfs.ReadDir {
			return nil
		}
		if ops++; ops > stopAt {
			return dead
		}
		return nil
	})
	env := durable.Env{FS: ef, DataDir: "/data", Logger: quiet}
	_ = ClaimDir(env, claimed, topicB, nil) // dies part way, or not
	after := m.Crash(memfs.CrashOptions{Rand: r})
	env = durable.Env{FS: after, DataDir: "/data", Logger: quiet}
	if got := endAfterClaim(t, env, topicB); got != 0 {
		t.Fatalf("after a crash at op %d the new topic opened at %d: the deleted topic's records", stopAt, got)
	}
	if _, err := after.Stat(strayDir(claimed)); err == nil {
		t.Fatalf("after a crash at op %d the stray directory outlived the next claim", stopAt)
	}
}

// The stray of the longest legal topic's directory (249 characters and
// its partition) is moved aside under a name the file system accepts.
func TestClaimDirOfALongName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("x", 249)+"-99999")
	env := durable.Env{FS: vfs.OS, DataDir: filepath.Dir(dir), Logger: quiet}
	if err := ClaimDir(env, dir, topicA, nil); err != nil {
		t.Fatal(err)
	}
	if err := ClaimDir(env, dir, topicB, nil); err != nil {
		t.Fatalf("claiming a long name's stray: %v", err)
	}
}
