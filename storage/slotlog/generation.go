package slotlog

// Generations seal a slot log on a change of owner (cluster mode). A
// slot's file is named by the generation of the owner that writes it:
// <base>.log for generation 0 (a single broker, and every file written
// before generations existed), <base>.g<N>.log for N ≥ 1. A broker that
// takes a slot over copies the newest generation's bytes into a file of a
// higher generation (temporary file, fsync, rename, directory fsync)
// before it reads or writes anything, then removes the older files. A
// deposed owner that has not noticed yet keeps its descriptor on the old
// file: whatever it appends lands in a file no reader opens any more
// (locally an unlinked inode; on NFS the server answers its writes with
// ESTALE once the file is removed, or keeps an NFSv4 open file's data in
// an orphan), and a compaction it finishes late renames into its own, older
// generation's name, which recovery ignores. Its bytes can therefore
// neither become visible nor break a later recovery.

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

var generationName = regexp.MustCompile(`^(.+?)(?:\.g(\d+))?\.log$`)

// GenerationPath is the file of base's log at generation gen.
func GenerationPath(dir, base string, gen int64) string {
	if gen <= 0 {
		return filepath.Join(dir, base+".log")
	}
	return filepath.Join(dir, fmt.Sprintf("%s.g%d.log", base, gen))
}

// ParseGeneration splits a log file's name into its base and generation.
func ParseGeneration(name string) (base string, gen int64, ok bool) {
	m := generationName.FindStringSubmatch(name)
	if m == nil {
		return "", 0, false
	}
	if m[2] != "" {
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			return "", 0, false
		}
		gen = n
	}
	return m[1], gen, true
}

// generations lists the generations of base's log found in dir.
func generations(fsys vfs.FS, dir, base string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var out []int64
	for _, e := range ents {
		if b, gen, ok := ParseGeneration(e.Name()); ok && b == base {
			out = append(out, gen)
		}
	}
	return out, nil
}

// Latest is the file of base's newest generation in dir (generation 0's
// name when there is none yet): where a single broker reads and writes.
func Latest(fsys vfs.FS, dir, base string) (string, error) {
	gens, err := generations(fsys, dir, base)
	if err != nil {
		return "", err
	}
	newest := int64(0)
	for _, g := range gens {
		newest = max(newest, g)
	}
	return GenerationPath(dir, base, newest), nil
}

// Owner is a cluster broker taking a slot's file over: its generation
// (≥ 1, the owner key's epoch + 1) and whether it may still act.
type Owner struct {
	Gen int64
	// MayAct reports whether the owner's claim still holds (its lease is
	// certainly alive); nil: always. A claim that went stale while the
	// broker was paused between claiming and adopting must not write:
	// its copy would take a newer generation than the real owner's, and
	// its removals would unlink the file the real owner appends to.
	MayAct func() bool
}

// ErrClaimGone refuses a takeover whose claim no longer holds.
var ErrClaimGone = errors.New("the owner's claim no longer holds (its lease is not certainly alive): nothing written")

func (o Owner) check() error {
	if o.MayAct != nil && !o.MayAct() {
		return ErrClaimGone
	}
	return nil
}

// Adopt seals base's log for a new owner and returns the file it is to
// open: the newest generation's bytes copied into a file of generation
// max(o.Gen, newest+1), durably, and every older generation removed.
// Damage in the copied bytes is left for Open's recovery to judge as it
// would in place. o.MayAct is asked right before the copy and before each
// removal.
func Adopt(env durable.Env, dir, base string, o Owner) (string, error) {
	gen := o.Gen
	env = env.Or()
	gens, err := generations(env.FS, dir, base)
	if err != nil {
		return "", err
	}
	if len(gens) == 0 {
		return GenerationPath(dir, base, max(gen, 1)), nil
	}
	newest := gens[0]
	for _, g := range gens[1:] {
		newest = max(newest, g)
	}
	target := max(gen, newest+1)
	data, err := vfs.ReadFile(env.FS, GenerationPath(dir, base, newest))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading %s: %w", GenerationPath(dir, base, newest), err)
	}
	path := GenerationPath(dir, base, target)
	if err := o.check(); err != nil {
		return "", err
	}
	if err := durable.WriteFile(env.FS, path, data); err != nil {
		return "", err
	}
	removed := false
	for _, g := range gens {
		if err := o.check(); err != nil {
			return "", err
		}
		if err := env.FS.Remove(GenerationPath(dir, base, g)); err == nil {
			removed = true
		}
	}
	if removed {
		if err := durable.SyncDir(env.FS, dir); err != nil {
			return "", err
		}
	}
	return path, nil
}
