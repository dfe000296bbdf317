package partlog

// The leader-epoch cache (Apache's LeaderEpochFileCache, KIP-101/KIP-320):
// for each leader epoch that wrote to the log, the first offset it wrote.
// OffsetForLeaderEpoch answers from it (a consumer that read up to some
// offset in epoch e asks where e ended, to detect a log that was cut
// under it), and ListOffsets names the epoch of the offsets it finds.
//
// Epochs is kept by the partition actor and published in every View;
// each change makes a new slice (copy on write), so a View's entries
// never change under a reader. The rules below are Apache's, so answers
// match a Kafka broker's entry for entry.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"start_offset"`
}

// Epochs is a leader-epoch cache: entries in ascending epoch and start
// offset order.
type Epochs []EpochEntry

// Apache's OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH and
// UNDEFINED_EPOCH_OFFSET.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// Latest is the newest entry.
func (e Epochs) Latest() (EpochEntry, bool) {
	if len(e) == 0 {
		return EpochEntry{}, false
	}
	return e[len(e)-1], true
}

// needsAssign is Apache's isUpdateNeeded: a new epoch, or the latest one
// starting earlier than recorded.
func (e Epochs) needsAssign(n EpochEntry) bool {
	last, ok := e.Latest()
	return !ok || n.Epoch != last.Epoch || n.StartOffset < last.StartOffset
}

// assign records that epoch n.Epoch starts at n.StartOffset. As Apache's
// assign, entries the new one contradicts (an epoch at or above it, or a
// start at or after it) are dropped first: a leader that took over
// before anything was written in the previous epoch replaces that epoch.
// Negative epochs or offsets are never recorded (batches of clients that
// do not stamp an epoch carry -1).
func (e Epochs) assign(n EpochEntry) (Epochs, bool) {
	if n.Epoch < 0 || n.StartOffset < 0 || !e.needsAssign(n) {
		return e, false
	}
	keep := len(e)
	for keep > 0 && (e[keep-1].Epoch >= n.Epoch || e[keep-1].StartOffset >= n.StartOffset) {
		keep--
	}
	out := make(Epochs, keep, keep+1)
	copy(out, e[:keep])
	return append(out, n), true
}

// truncateFromStart drops what lies before a new log start offset: the
// last entry at or below it stays, moved up to start (Apache's
// truncateFromStart: the epoch of the first remaining offset is kept).
func (e Epochs) truncateFromStart(start int64) (Epochs, bool) {
	n := 0
	for n < len(e) && e[n].StartOffset <= start {
		n++
	}
	if n == 0 || (n == 1 && e[0].StartOffset == start) {
		return e, false
	}
	out := make(Epochs, 0, len(e)-n+1)
	out = append(out, EpochEntry{Epoch: e[n-1].Epoch, StartOffset: start})
	return append(out, e[n:]...), true
}

// truncateFromEnd drops entries that start at or after end (the log end
// offset after recovery): nothing of theirs is in the log.
func (e Epochs) truncateFromEnd(end int64) (Epochs, bool) {
	n := len(e)
	for n > 0 && e[n-1].StartOffset >= end {
		n--
	}
	if n == len(e) {
		return e, false
	}
	return append(Epochs(nil), e[:n]...), true
}

// EndOffsetFor is Apache's LeaderEpochFileCache.endOffsetFor: the largest
// epoch at or below requested and where it ended (the start of the next
// epoch, or logEnd for the latest). An undefined requested epoch, or one
// above every known epoch, is (UndefinedEpoch, UndefinedEpochOffset). One
// below every known epoch answers the requested epoch and the first
// known epoch's start (the data before it is gone).
func (e Epochs) EndOffsetFor(requested int32, logEnd int64) (int32, int64) {
	if requested == UndefinedEpoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if last, ok := e.Latest(); ok && last.Epoch == requested {
		return requested, logEnd
	}
	higher := len(e)
	for i, x := range e {
		if x.Epoch > requested {
			higher = i
			break
		}
	}
	switch {
	case higher == len(e):
		return UndefinedEpoch, UndefinedEpochOffset
	case higher == 0:
		return requested, e[0].StartOffset
	}
	return e[higher-1].Epoch, e[higher].StartOffset
}

// EpochForOffset is the epoch that wrote offset (Apache's epochForOffset):
// the last entry starting at or before it. ok is false for an offset
// before every entry.
func (e Epochs) EpochForOffset(offset int64) (int32, bool) {
	epoch, ok := UndefinedEpoch, false
	for _, x := range e {
		if x.StartOffset > offset {
			break
		}
		epoch, ok = x.Epoch, true
	}
	return epoch, ok
}

// epochCheckpointFile is the cache on disk, in Apache's format.
const epochCheckpointFile = "leader-epoch-checkpoint"

// encode writes Apache's leader-epoch-checkpoint format: a version line
// (0), a count line, then "epoch startOffset" per entry.
func (e Epochs) encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "0\n%d\n", len(e))
	for _, x := range e {
		fmt.Fprintf(&b, "%d %d\n", x.Epoch, x.StartOffset)
	}
	return []byte(b.String())
}

// parseEpochs reads the checkpoint format; anything malformed, out of
// order or negative is an error (the cache is then rebuilt from the log).
func parseEpochs(b []byte) (Epochs, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "0" {
		return nil, errors.New("not a version 0 leader-epoch checkpoint")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("entry count %q does not match %d entries", lines[1], len(lines)-2)
	}
	out := make(Epochs, 0, n)
	for _, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("bad entry %q", line)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("bad entry %q", line)
		}
		x := EpochEntry{Epoch: int32(epoch), StartOffset: start}
		if last, ok := out.Latest(); ok && (x.Epoch <= last.Epoch || x.StartOffset < last.StartOffset) {
			return nil, fmt.Errorf("entry %q is out of order", line)
		}
		out = append(out, x)
	}
	return out, nil
}
