package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	stdsync "sync"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// The log cleaner (cleanup.policy=compact), as Apache's LogCleaner:
//
//   - a pass cleans whole closed segments only, below the first
//     uncleanable offset: the lowest of the last stable offset, the
//     active segment's base and the first segment newer than
//     min.compaction.lag.ms, rounded down to a segment base;
//   - it maps every key of the dirty part (from the cleaner checkpoint up
//     to that offset) to its latest offset, in a map of bounded size: a
//     partition whose dirty keys do not fit is cleaned in several passes;
//   - it then rewrites every segment from the log start up to the last
//     offset mapped, keeping the latest record of each key at its
//     original offset (offsets and timestamps never change), grouped so
//     that small segments merge (a new segment takes the next old one in
//     while what it holds and that segment's bytes fit segment.bytes);
//   - a tombstone (null value) is kept until the delete horizon stamped
//     into its batch when the cleaner first rewrote it (KIP-534: now +
//     delete.retention.ms, in the batch's base timestamp with attribute
//     bit 6), then removed; transaction markers likewise, once no batch
//     of their transaction is left;
//   - aborted transactional data is removed (the .txnindex says which);
//   - the last batch of every active producer id is kept, emptied if none
//     of its records survive, so producer state (epoch, last sequence)
//     can be rebuilt from the log after a restart or a change of owner;
//   - a batch whose records all survive keeps its bytes; one that loses
//     records is rebuilt, uncompressed, with the producer id, epoch, base
//     sequence, last offset delta and transactional/control attributes
//     of the original, and a new CRC.
//
// The partition actor plans a pass (PlanClean: a copy of what the pass
// reads, taken on the actor), a cleaner goroutine runs it (Run: reads
// closed segments, writes new files beside them, never touches the live
// segment set), and the actor installs the result (InstallCleaned,
// clean_swap.go). Appends go on meanwhile: they only touch the active
// segment, which a pass never reads.

// attrDeleteHorizon marks a batch whose base timestamp is its delete
// horizon (KIP-534).
const attrDeleteHorizon = 0x40

// cleanerOffsetFile holds the cleaner checkpoint: the first dirty
// offset, and the earliest delete horizon of the batches kept. It is a
// hint (missing, unreadable or behind, the next pass only cleans more),
// so the actor does not write it when it installs a pass: the next pass
// writes it first thing, off the actor (at most once every
// cleanerCheckpointInterval), and Close writes what is left. Its two
// fsyncs then never hold appends.
const cleanerOffsetFile = "cleaner-offset-checkpoint"

// cleanerCheckpointInterval is the least time between two passes' writes
// of the checkpoint: a compacted partition under load is cleaned in
// passes a few hundred milliseconds apart, and the write (a file created,
// two fsyncs, a rename) was a sixth of such a pass's CPU. It is Apache's
// default log.cleaner.backoff.ms, so that with the default backoff every
// pass writes it as before; a crash costs at most this long of cleaning
// done again (the checkpoint is a hint).
const cleanerCheckpointInterval = 15 * time.Second

// ProducerLast is what the cleaner must keep of one active producer id:
// the last offset of its last data batch (-1 if its last entry is a
// marker) and its epoch (Apache's LastRecord).
type ProducerLast struct {
	LastDataOffset int64
	Epoch          int16
}

// cleanSeg is what a pass reads of one closed segment, copied on the
// actor (the segment's own fields are the actor's).
type cleanSeg struct {
	seg       *segment // identity only: checked again at install
	base      int64
	next      int64
	size      int64
	file      *segFile
	created   time.Time
	firstTime int64
	abortedN  int
}

// CleanPlan is one cleaning pass, ready to run off the actor.
type CleanPlan struct {
	// scratch is the pass's decompression buffer; rbuf and wbuf its
	// read and write buffers, out the batches it rebuilds and kept the
	// records of one to be compressed (Run's goroutine only).
	// One of each for the whole pass: a pass that allocated them per
	// segment left tens of MiB of garbage beside the dedupe buffer, which
	// the collector (goal: twice the live heap, the map included) let
	// pile up past the memory goal.
	scratch []byte
	recs    []keyRec // a batch's records (keysOf)
	keep    []bool   // which of them a batch keeps
	rbuf    []byte   // eachBatch's read buffer
	wbuf    []byte
	dir     string
	env     durable.Env
	tag     string // in the new files' names: an owner's files never collide with another's
	segs    []cleanSeg
	dirty   int    // index in segs of the first dirty segment
	out     []byte // a batch rebuilt
	// compactionDelay: how far past max.compaction.lag.ms the first dirty
	// record was at planning (CleanStats.CompactionDelay).
	compactionDelay time.Duration
	kept            []byte // its records before they are compressed
	// checkedTo: buildMap checked the CRC of the dirty segments' batches
	// below it (checkedByMap).
	checkedTo int64
	// mapOnly (tests) decides every record by the map, the dirty ones
	// too, as the map's bitmaps (clean_bits.go) must agree with it.
	mapOnly bool

	firstDirty, uncleanable int64
	nowMs                   int64
	deleteRetentionMs       int64
	segmentBytes            int64
	indexInterval           int64
	producers               map[int64]ProducerLast
	aborted                 []AbortedTxn
	// checkpoint is the cleaner checkpoint the last install left, for
	// Run to write before anything else (nil: written already).
	checkpoint []byte

	// DirtyRatio is the cleanable share of the log's bytes (Apache's
	// cleanableRatio), for choosing the dirtiest partition first.
	DirtyRatio float64
	// CleanableBytes are the bytes of the dirty segments.
	CleanableBytes int64
}

// CleanerState is what the inspector and the metrics show of a
// compacted log's cleaning.
type CleanerState struct {
	CleanedTo   int64   // the first dirty offset (cleaner checkpoint)
	DirtyRatio  float64 // as of the last plan
	NextHorizon int64   // earliest delete horizon of a kept tombstone or marker (ms), 0: none
}

// CleanerState returns the log's cleaning state.
func (l *Log) CleanerState() CleanerState {
	return CleanerState{CleanedTo: max(l.cleanedTo, l.logStart), DirtyRatio: l.dirtyRatio, NextHorizon: l.nextHorizon}
}

// PlanClean prepares a pass, or returns nil when the log needs none:
// no dirty closed segment below the first uncleanable offset, or a dirty
// ratio below min.cleanable.dirty.ratio with no record older than
// max.compaction.lag.ms and no delete horizon passed. lso is the last
// stable offset; producers are the active producer ids' last batches;
// tag names the pass's files.
func (l *Log) PlanClean(now time.Time, lso int64, producers map[int64]ProducerLast, tag string) *CleanPlan {
	if l.failed != nil || !l.cfg.Compact || len(l.segments) < 2 {
		return nil
	}
	nowMs := now.UnixMilli()
	firstDirty := max(l.cleanedTo, l.logStart)
	// The first uncleanable offset, rounded down to a segment base.
	bound := min(lso, l.active().base)
	for _, s := range l.segments[:len(l.segments)-1] {
		if s.next <= firstDirty {
			continue
		}
		if l.cfg.MinCompactionLagMs > 0 && s.maxTimestamp >= 0 && s.maxTimestamp > nowMs-l.cfg.MinCompactionLagMs {
			bound = min(bound, s.base)
			break
		}
	}
	p := &CleanPlan{dir: l.dir, env: l.env, tag: tag, nowMs: nowMs, deleteRetentionMs: l.cfg.DeleteRetentionMs,
		segmentBytes: l.cfg.SegmentBytes, indexInterval: l.cfg.IndexIntervalBytes, producers: producers, firstDirty: firstDirty}
	var cleanBytes int64
	p.dirty = -1
	for i, s := range l.segments[:len(l.segments)-1] {
		// Only whole segments below bound: the next one starts at or
		// below it.
		if l.segments[i+1].base > bound {
			break
		}
		p.segs = append(p.segs, cleanSeg{seg: s, base: s.base, next: s.next, size: s.size, file: s.log, created: s.created,
			firstTime: s.firstTimestamp, abortedN: len(s.aborted)})
		if s.next > firstDirty {
			if p.dirty < 0 {
				p.dirty = len(p.segs) - 1
			}
			p.CleanableBytes += s.size
		} else {
			cleanBytes += s.size
		}
		p.aborted = append(p.aborted, s.aborted...)
	}
	if len(p.segs) == 0 {
		return nil
	}
	p.uncleanable = l.segments[len(p.segs)].base
	// Aborted transactions whose markers sit in later segments cover data here too.
	for _, s := range l.segments[len(p.segs):] {
		for _, a := range s.aborted {
			if a.FirstOffset < p.uncleanable {
				p.aborted = append(p.aborted, a)
			}
		}
	}
	if total := cleanBytes + p.CleanableBytes; total > 0 {
		p.DirtyRatio = float64(p.CleanableBytes) / float64(total)
	}
	l.dirtyRatio = p.DirtyRatio
	due := false
	if p.dirty >= 0 {
		first := p.segs[p.dirty]
		// max.compaction.lag.ms: the first dirty segment's first record
		// has waited too long (Apache's needCompactionNow).
		lagged := l.cfg.MaxCompactionLagMs < math.MaxInt64 && first.firstTime >= 0 && nowMs-first.firstTime > l.cfg.MaxCompactionLagMs
		if lagged {
			p.compactionDelay = time.Duration(nowMs-first.firstTime-l.cfg.MaxCompactionLagMs) * time.Millisecond
		}
		due = p.CleanableBytes > 0 && (p.DirtyRatio > l.cfg.MinCleanableRatio || lagged)
	} else {
		p.dirty = len(p.segs)
	}
	// A kept tombstone or marker whose horizon passed: clean to remove
	// it even with nothing dirty.
	horizon := l.nextHorizon > 0 && nowMs >= l.nextHorizon
	if !due && !horizon {
		return nil
	}
	if l.checkpointDue && now.Sub(l.checkpointAt) >= cleanerCheckpointInterval {
		p.checkpoint, l.checkpointDue, l.checkpointAt = l.cleanerOffsetBytes(), false, now
	}
	return p
}

// Superseded reports whether a segment the plan reads is no longer in
// the log (retention or DeleteRecords removed it meanwhile): a pass that
// failed reading it failed for that, not for a fault of the log.
func (l *Log) Superseded(p *CleanPlan) bool {
	live := make(map[*segment]bool, len(l.segments))
	for _, s := range l.segments {
		live[s] = true
	}
	for _, s := range p.segs {
		if !live[s.seg] {
			return true
		}
	}
	return false
}

// CleanOptions are a pass's resources.
type CleanOptions struct {
	// MapBytes bounds the key→offset map (log.cleaner.dedupe.buffer.size
	// over log.cleaner.threads).
	MapBytes int64
	// Throttle is called with each chunk of bytes read or written, and
	// may sleep (log.cleaner.io.max.bytes.per.second); nil: none.
	Throttle func(n int)
	// MayAct says whether this broker still owns the partition (cluster
	// mode); the pass stops writing as soon as it says no. Nil: always.
	MayAct func() bool
}

// cleanIOBytes is the size of a pass's writes.
const cleanIOBytes = 1 << 20

// cleanReadBytes is the size of a pass's read buffer: a few of the
// largest usual batches (1 MiB, the default max.request.size), so that
// few batches cross its end and are moved.
const cleanReadBytes = 4 << 20

// passBuffers are a pass's read, batch, write and decompression buffers,
// kept between passes: a compacted topic under load is cleaned in many
// short passes, and fresh megabytes for each cost page faults and
// zeroing that showed as a good part of the cleaner's CPU.
type passBuffers struct {
	rbuf, wbuf, scratch, out, kept []byte
	recs                           []keyRec
	keep                           []bool
}

// passBufs keeps the buffers of passes that ended, for the next ones:
// not a sync.Pool, which two collections empty: a broker under produce
// collects several times between two passes of a partition, so most
// passes found the pool empty and allocated, zeroed and faulted in their
// megabytes afresh. It keeps at most maxKeptPassBuffers sets (one for
// each cleaner thread that ran at once, up to that), and keepSmall
// bounds each set.
var passBufs struct {
	mu   stdsync.Mutex
	free []*passBuffers
}

const maxKeptPassBuffers = 4

func getPassBuffers() *passBuffers {
	passBufs.mu.Lock()
	defer passBufs.mu.Unlock()
	if n := len(passBufs.free); n > 0 {
		b := passBufs.free[n-1]
		passBufs.free = passBufs.free[:n-1]
		return b
	}
	return new(passBuffers)
}

func putPassBuffers(b *passBuffers) {
	b.keepSmall()
	passBufs.mu.Lock()
	defer passBufs.mu.Unlock()
	if len(passBufs.free) < maxKeptPassBuffers {
		passBufs.free = append(passBufs.free, b)
	}
}

// keepSmall drops a buffer a huge batch grew: only the usual sizes are
// kept between passes.
func (b *passBuffers) keepSmall() {
	const most = 4 * cleanIOBytes
	if cap(b.rbuf) > most {
		b.rbuf = nil
	}
	if cap(b.out) > most {
		b.out = nil
	}
	if cap(b.kept) > most {
		b.kept = nil
	}
	if cap(b.wbuf) > most {
		b.wbuf = nil
	}
	if cap(b.scratch) > most {
		b.scratch = nil
	}
	if cap(b.recs) > most/64 {
		b.recs, b.keep = nil, nil
	}
	clear(b.recs[:cap(b.recs)]) // no batch's bytes held between passes
}

// bigMapBytes is the size of map a pass frees explicitly when it ends.
const bigMapBytes = 16 << 20

// ErrCleanStale stops a pass whose owner's lease is in doubt.
var ErrCleanStale = errors.New("cleaning stopped: the partition's ownership is in doubt")

// ErrCleanCorrupt is a pass that met a batch it cannot decode in a closed
// segment: the partition is not cleaned (its data untouched).
var ErrCleanCorrupt = errors.New("a closed segment holds a batch the cleaner cannot decode")

// CleanStats count a pass's work.
type CleanStats struct {
	BytesRead, BytesWritten     int64
	RecordsRead, RecordsRemoved int64
	KeylessSkipped              int64
	MapEntries                  int
	Passes                      int
	// MapBytes is what the pass's key map took of MapBudget, its share of
	// log.cleaner.dedupe.buffer.size (Apache's buffer utilization).
	MapBytes, MapBudget int64
	// Elapsed is the pass's wall time, throttling included.
	Elapsed time.Duration
	// CompactionDelay is how far past max.compaction.lag.ms the first
	// dirty record was when the pass was planned (0: not past it).
	CompactionDelay time.Duration
}

// CleanResult is a finished pass: new segment files written beside the
// old ones, to be installed by the actor.
type CleanResult struct {
	dir    string
	groups []cleanedGroup
	// manifest is the pass's swap manifest under its uncommitted name
	// (writeManifest), "" if no group changed.
	manifest  string
	endOffset int64
	// nextHorizon is the earliest delete horizon of the batches kept in
	// the rewritten segments (0: none).
	nextHorizon int64
	Stats       CleanStats
	// EndOffset is the first offset not cleaned: the next pass's first
	// dirty offset. Below the plan's uncleanable offset when the map
	// filled (another pass follows).
	EndOffset   int64
	Uncleanable int64
}

// cleanedGroup is one run of old segments rewritten into one new one.
type cleanedGroup struct {
	old      []*segment
	from, to int64 // old offsets replaced: [from, to)
	seg      *segment
	tag      string
	// suffixes are the files written under their .cleaned names: the
	// .log first (renamed first), then its indexes and .txnindex.
	suffixes  []string
	unchanged bool // one old segment, every batch kept as it was: nothing to install
}

// cleanedSuffix ends the names of files a pass writes.
const cleanedSuffix = ".cleaned"

func cleanedPath(dir string, base int64, suffix, tag string) string {
	return segmentPath(dir, base, suffix) + "." + tag + cleanedSuffix
}

// Run runs the pass. It may run on any goroutine: it reads the closed
// segments through their files and writes only new files.
func (p *CleanPlan) Run(opts CleanOptions) (res *CleanResult, err error) {
	may := func() error {
		if opts.MayAct != nil && !opts.MayAct() {
			return ErrCleanStale
		}
		return nil
	}
	throttle := func(n int) {
		if opts.Throttle != nil {
			opts.Throttle(n)
		}
	}
	res = &CleanResult{dir: p.dir, Uncleanable: p.uncleanable}
	start := time.Now()
	res.Stats.CompactionDelay = p.compactionDelay
	defer func() { res.Stats.Elapsed = time.Since(start) }()
	if p.checkpoint != nil {
		if err := may(); err != nil {
			return res, err
		}
		if err := durable.WriteFile(p.env.FS, filepath.Join(p.dir, cleanerOffsetFile), p.checkpoint); err != nil {
			return res, fmt.Errorf("writing the cleaner checkpoint: %w", err)
		}
	}
	bufs := getPassBuffers()
	p.rbuf, p.wbuf, p.scratch, p.out, p.kept, p.recs, p.keep = bufs.rbuf, bufs.wbuf, bufs.scratch, bufs.out, bufs.kept, bufs.recs, bufs.keep
	defer func() {
		bufs.rbuf, bufs.wbuf, bufs.scratch, bufs.out, bufs.kept, bufs.recs, bufs.keep = p.rbuf, p.wbuf, p.scratch, p.out, p.kept, p.recs, p.keep
		p.rbuf, p.wbuf, p.scratch, p.out, p.kept, p.recs, p.keep = nil, nil, nil, nil, nil, nil, nil
		putPassBuffers(bufs)
	}()
	defer func() {
		// A pass stopped by the gate writes nothing more, not even a
		// removal: the files are the next recovery's.
		if err != nil && !errors.Is(err, ErrCleanStale) {
			res.removeFiles(p.env)
		}
	}()
	m := newOffsetMap(opts.MapBytes, p.uncleanable-p.firstDirty)
	m.startBits(p.firstDirty, p.uncleanable-p.firstDirty)
	defer func() {
		// A big map is returned to the system at once: otherwise the next
		// pass's map is allocated before the collector frees this one,
		// and the broker holds two dedupe buffers. Its tables are given
		// back as they are (their own mapping); what it has on the heap
		// (the keys' chunks, the bitmaps) asks for a collection if big.
		onHeap := m.used
		if m.mem != nil {
			onHeap -= int64(len(m.slots)) * mapSlotBytes
		}
		m.release()
		if onHeap >= bigMapBytes {
			m.chunks, m.bits = nil, nil
			debug.FreeOSMemory()
		}
	}()
	end, err := p.buildMap(m, throttle, &res.Stats)
	if err != nil {
		return res, err
	}
	res.endOffset, res.EndOffset = end, end
	res.Stats.MapEntries = m.len()
	res.Stats.MapBytes, res.Stats.MapBudget = m.filled(), m.budget
	txn := newTxnTracker(p.aborted)
	// Segments go into one new segment for as long as what it holds
	// already and the next segment's bytes fit segment.bytes (and the
	// span of its offsets the indexes' 31 bits): a group that lost most
	// of its records takes the next segments in, where Apache's
	// groupSegmentsBySize, going by the old sizes, writes each small
	// result into a file of its own (three files and their fsyncs more a
	// pass: the compact bench's clean head, all but a few of its records
	// replaced by the segment rolled since, beside that segment's).
	var g *groupWriter
	finish := func() error {
		err := p.finishGroup(g, res)
		if err != nil && !errors.Is(err, ErrCleanStale) {
			g.cg.suffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}
			removeCleaned(p.env.FS, p.dir, g.cg)
		}
		g = nil
		return err
	}
	for i, s := range p.segs {
		if s.base >= end {
			break
		}
		if g != nil && (g.w.pos+s.size > p.segmentBytes || s.next-1-g.cg.from > math.MaxInt32) {
			if err := finish(); err != nil {
				return res, err
			}
		}
		if g == nil {
			if err := may(); err != nil {
				return res, err
			}
			g = p.startGroup(s, m, txn, may, throttle)
		}
		if err := p.fillGroup(g, i, res); err != nil {
			if g.w.f != nil {
				g.w.f.Close()
			}
			if !errors.Is(err, ErrCleanStale) {
				g.cg.suffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}
				removeCleaned(p.env.FS, p.dir, g.cg)
			}
			return res, err
		}
	}
	if g != nil {
		if err := finish(); err != nil {
			return res, err
		}
	}
	if err := p.writeManifest(res, may); err != nil {
		return res, err
	}
	return res, nil
}

// buildMap maps the dirty records' keys to their latest offsets and
// returns the first offset not mapped (the pass cleans below it). The
// map takes at least one whole batch, so every pass makes progress.
func (p *CleanPlan) buildMap(m *offsetMap, throttle func(int), st *CleanStats) (int64, error) {
	txn := newTxnTracker(p.aborted)
	latest := p.firstDirty - 1
	full := false
	for _, s := range p.segs[p.dirty:] {
		err := p.eachBatch(s, throttle, unchecked, func(batch []byte, h BatchHeader) (bool, error) {
			p.checkedTo = h.NextOffset()
			st.BytesRead += h.Size()
			if h.IsControl() {
				txn.onControl(h, batch)
			} else if !txn.onData(h) && h.NextOffset() > p.firstDirty {
				force := latest < p.firstDirty
				if !m.coverBits(h.LastOffset(), force) {
					return false, nil // the map is full: its bitmaps are
				}
				body, err := p.recordsOf(batch, h)
				if err != nil {
					return false, err
				}
				if p.recs, err = keysOf(p.recs, body, h); err != nil {
					return false, err
				}
				if len(p.recs) != int(h.NumRecords) {
					m.bits.markSlow(max(h.BaseOffset, p.firstDirty))
				}
				for g := 0; g < len(p.recs) && !full; g += mapPrefetch {
					group := p.recs[g:min(g+mapPrefetch, len(p.recs))]
					m.prefetch(group, math.MaxInt64)
					for _, r := range group {
						if r.off < p.firstDirty {
							continue
						}
						if r.tombstone {
							m.bits.markSlow(r.off)
						}
						if r.key == nil {
							// Invalid in a compacted log: it goes.
							m.bits.markDrop(r.off)
							st.KeylessSkipped++
							continue
						}
						if !m.putHashed(r.key, r.hash, r.off, force) {
							full = true
							break
						}
					}
				}
				if full {
					return false, nil
				}
			}
			if h.NextOffset() > p.firstDirty {
				latest = h.LastOffset()
			}
			return true, nil
		})
		if err != nil {
			return 0, err
		}
		if full {
			break
		}
	}
	if latest < p.firstDirty {
		// Nothing dirty: clean what is clean already (expired tombstones
		// and markers), up to the first uncleanable offset.
		m.latest = p.uncleanable - 1
		return p.uncleanable, nil
	}
	m.latest = latest
	m.bits.to = min(latest+1, m.bits.from+64*int64(len(m.bits.drop)))
	return latest + 1, nil
}

// eachBatch reads a segment's batches in order, each CRC checked unless
// checked says this pass checked it already. batch is valid until fn
// returns. The segment is read in chunks of up to cleanReadBytes into the
// pass's read buffer and each batch is handed on where it lies there
// (moved to the front with what follows when it crosses the end): one copy
// of the log's bytes (the kernel's), where a buffered reader and a batch
// buffer made two of every byte, twice a pass.
func (p *CleanPlan) eachBatch(s cleanSeg, throttle func(int), checked func(BatchHeader) bool, fn func(batch []byte, h BatchHeader) (bool, error)) error {
	buf := p.rbuf[:cap(p.rbuf)]
	if len(buf) < cleanReadBytes {
		buf = make([]byte, cleanReadBytes)
	}
	defer func() { p.rbuf = buf[:0] }()
	lo, hi := 0, 0   // the bytes read and not yet handed on: buf[lo:hi]
	pos := int64(0)  // the segment position of buf[lo]
	read := int64(0) // the segment position of buf[hi]
	// have makes buf[lo:] hold at least n bytes, reading on.
	have := func(n int) error {
		if hi-lo >= n {
			return nil
		}
		if n > len(buf) {
			nb := make([]byte, n)
			hi = copy(nb, buf[lo:hi])
			buf = nb
		} else {
			hi = copy(buf, buf[lo:hi])
		}
		lo = 0
		for hi < n {
			want := int(min(int64(len(buf)-hi), s.size-read))
			if want <= 0 {
				return io.ErrUnexpectedEOF
			}
			m, err := s.file.ReadAt(buf[hi:hi+want], read)
			hi += m
			read += int64(m)
			if m < want {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		return nil
	}
	for pos < s.size {
		if err := have(logOverhead); err != nil {
			return fmt.Errorf("%w: segment %d at %d: %v", ErrCleanCorrupt, s.base, pos, err)
		}
		size := int64(int32(binary.BigEndian.Uint32(buf[lo+8:]))) + logOverhead
		if size < BatchHeaderSize || pos+size > s.size {
			return fmt.Errorf("%w: segment %d at %d: batch length %d", ErrCleanCorrupt, s.base, pos, size)
		}
		if err := have(int(size)); err != nil {
			return fmt.Errorf("%w: segment %d at %d: %v", ErrCleanCorrupt, s.base, pos, err)
		}
		batch := buf[lo : lo+int(size) : lo+int(size)]
		throttle(int(size))
		h, err := ParseBatchHeader(batch)
		if err != nil || h.Magic != 2 || !(checked(h) || ValidCRC(batch)) {
			return fmt.Errorf("%w: segment %d at %d: bad header or CRC", ErrCleanCorrupt, s.base, pos)
		}
		more, err := fn(batch, h)
		if err != nil || !more {
			return err
		}
		pos += size
		lo += int(size)
	}
	return nil
}

// unchecked is eachBatch's checked for a walk that checks every batch.
func unchecked(BatchHeader) bool { return false }

// checkedByMap says whether buildMap checked the batch's CRC: it walks
// the dirty segments from the first, in order, up to checkedTo. The
// cleaning walk reads the same closed, immutable bytes again moments
// later; a second CRC of them was a tenth of a pass's CPU.
func (p *CleanPlan) checkedByMap(h BatchHeader) bool {
	return p.dirty < len(p.segs) && h.BaseOffset >= p.segs[p.dirty].base && h.NextOffset() <= p.checkedTo
}

// groupWriter is one new segment being written from a run of old ones
// (Run decides how many). Lazily: while it holds one old segment and
// every batch is kept as it was, nothing is written; at the first batch
// that changes, or the next segment taken in, the bytes before are copied
// whole from the old file and the rest is written as it goes. A segment
// the pass drops nothing from (most of a log's clean part, once its keys
// are stable), on its own, costs a read and no write, no fsync and
// nothing to install; a group whose output is empty creates no file
// unless it is the last (a group it can fold into then takes its range:
// the new segment starts at the empty group's base).
type groupWriter struct {
	cg        cleanedGroup
	seg       *segment
	w         *cleanWriter
	first     cleanSeg
	unchanged bool // one old segment so far, every batch kept as it was
	m         *offsetMap
	txn       *txnTracker
	throttle  func(int)
}

func (p *CleanPlan) startGroup(first cleanSeg, m *offsetMap, txn *txnTracker, may func() error, throttle func(int)) *groupWriter {
	g := &groupWriter{first: first, unchanged: true, m: m, txn: txn, throttle: throttle,
		cg:  cleanedGroup{from: first.base, tag: p.tag},
		seg: &segment{dir: p.dir, base: first.base, next: first.base, maxTimestamp: -1, firstTimestamp: -1}}
	if p.wbuf == nil {
		p.wbuf = make([]byte, 0, 2*cleanIOBytes)
	}
	logPath := g.cg.path(p.dir, logSuffix)
	g.w = &cleanWriter{may: may, throttle: throttle, buf: p.wbuf[:0], src: first.file}
	g.w.open = func() error {
		f, err := p.env.FS.OpenFile(logPath, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Base(logPath), err)
		}
		g.cg.suffixes = append(g.cg.suffixes, logSuffix)
		g.w.f = f
		return nil
	}
	return g
}

// fillGroup writes the batches segment p.segs[i] keeps into the group.
func (p *CleanPlan) fillGroup(g *groupWriter, i int, res *CleanResult) error {
	s := p.segs[i]
	if len(g.cg.old) > 0 {
		g.unchanged = false // two old segments make one new file
	}
	g.cg.old = append(g.cg.old, s.seg)
	g.seg.created = s.created
	// The group replaces every offset up to the next segment's base.
	g.cg.to = p.uncleanable
	if i+1 < len(p.segs) {
		g.cg.to = p.segs[i+1].base
	}
	return p.eachBatch(s, g.throttle, p.checkedByMap, func(batch []byte, h BatchHeader) (bool, error) {
		res.Stats.BytesRead += h.Size() // the copy reads the log again
		out, same, horizon, err := p.filterBatch(batch, h, g.m, g.txn, &res.Stats)
		if err != nil {
			return false, err
		}
		g.unchanged = g.unchanged && same
		if out == nil {
			return true, nil
		}
		if horizon > 0 && (res.nextHorizon == 0 || horizon < res.nextHorizon) {
			res.nextHorizon = horizon
		}
		oh, _ := ParseBatchHeader(out)
		pos := g.w.pos
		if err := g.w.write(out, g.unchanged); err != nil {
			return false, err
		}
		g.seg.noteBatch(oh, pos, p.indexInterval)
		return true, nil
	})
}

// finishGroup completes the group's files (the .log, fsynced, and its
// indexes, here rather than on the actor: the swap then only renames)
// and adds it to the result; an unchanged one is added with nothing
// written.
func (p *CleanPlan) finishGroup(g *groupWriter, res *CleanResult) error {
	cg, seg, w := &g.cg, g.seg, g.w
	closeFile := func() {
		if w.f != nil {
			w.f.Close()
		}
	}
	seg.aborted = append(seg.aborted, g.txn.takeIndexed(cg.from, cg.to)...)
	// An unchanged segment keeps its aborted-transaction entries as they
	// were only if the tracker agrees; compare counts.
	cg.unchanged = g.unchanged && len(seg.aborted) == g.first.abortedN
	if cg.unchanged {
		res.groups = append(res.groups, *cg)
		return nil // nothing written: the old segment stays as it is
	}
	logPath := cg.path(p.dir, logSuffix)
	if err := w.materialize(); err != nil {
		closeFile()
		return err
	}
	if err := w.flush(); err != nil {
		closeFile()
		return err
	}
	seg.size = w.pos
	res.Stats.BytesWritten += w.pos
	if err := w.f.Sync(); err != nil {
		closeFile()
		return fmt.Errorf("fsync of %s: %w", filepath.Base(logPath), err)
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	idx, tix := seg.indexBytes()
	for _, f := range []struct {
		suffix string
		data   []byte
	}{{indexSuffix, idx}, {timeIndexSuffix, tix}} {
		cg.suffixes = append(cg.suffixes, f.suffix)
		if err := writeSynced(p.env, cg.path(p.dir, f.suffix), f.data); err != nil {
			return err
		}
	}
	seg.indexFlushed, seg.timesFlushed, seg.indexesExact = len(seg.index), len(seg.times), true
	if len(seg.aborted) > 0 {
		var b []byte
		for _, a := range seg.aborted {
			b = a.appendTo(b)
		}
		cg.suffixes = append(cg.suffixes, txnIndexSuffix)
		if err := writeSynced(p.env, cg.path(p.dir, txnIndexSuffix), b); err != nil {
			return err
		}
	}
	seg.synced, seg.syncedNext, seg.visible = seg.size, seg.next, seg.size
	cg.seg = seg
	res.groups = append(res.groups, *cg)
	return nil
}

// writeSynced creates path with data, fsynced.
func writeSynced(env durable.Env, path string, data []byte) error {
	f, err := env.FS.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cleanWriter buffers a new segment's bytes, asking the gate before each
// write. Lazily: while src is set and the batches are kept as they were,
// it only counts their bytes (skipped); the first batch that changes
// opens the file and copies the skipped bytes from src first.
type cleanWriter struct {
	f        vfs.File
	open     func() error
	src      io.ReaderAt // the old segment, while nothing is written
	skipped  int64       // its bytes not yet copied
	buf      []byte
	pos      int64 // bytes written, buffered and skipped
	flushed  int64
	may      func() error
	throttle func(int)
}

// write adds b to the new segment; same says b is the old segment's
// batch at the same position, unchanged, as all before it.
func (w *cleanWriter) write(b []byte, same bool) error {
	if w.f == nil && same {
		w.skipped += int64(len(b))
		w.pos += int64(len(b))
		return nil
	}
	if err := w.materialize(); err != nil {
		return err
	}
	w.buf = append(w.buf, b...)
	w.pos += int64(len(b))
	if len(w.buf) >= cleanIOBytes {
		return w.flush()
	}
	return nil
}

// materialize opens the file, if not yet, and copies the old segment's
// skipped bytes into it.
func (w *cleanWriter) materialize() error {
	if w.f != nil {
		return nil
	}
	if err := w.may(); err != nil {
		return err
	}
	if err := w.open(); err != nil {
		return err
	}
	for at := int64(0); at < w.skipped; {
		n := int(min(w.skipped-at, cleanIOBytes))
		w.buf = slices.Grow(w.buf[:0], n)[:n]
		if _, err := w.src.ReadAt(w.buf, at); err != nil {
			return fmt.Errorf("%w: copying segment bytes at %d: %v", ErrCleanCorrupt, at, err)
		}
		w.throttle(n)
		at += int64(n)
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.src, w.skipped = nil, 0
	return nil
}

func (w *cleanWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.may(); err != nil {
		return err
	}
	w.throttle(len(w.buf))
	if _, err := w.f.WriteAt(w.buf, w.flushed); err != nil {
		return fmt.Errorf("writing a cleaned segment: %w", err)
	}
	w.flushed += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// removeFiles deletes the files a failed or discarded pass wrote.
func (r *CleanResult) removeFiles(env durable.Env) {
	for _, g := range r.groups {
		removeCleaned(env.FS, r.dir, g)
	}
	if r.manifest != "" {
		_ = env.FS.Remove(r.manifest)
	}
	r.groups, r.manifest = nil, ""
}

func (l *Log) cleanerOffsetBytes() []byte {
	return []byte(fmt.Sprintf("%d %d\n", l.cleanedTo, l.nextHorizon))
}

// persistCleanerOffset writes the cleaner checkpoint at Close, if a pass
// was installed since the log was opened.
func (l *Log) persistCleanerOffset() error {
	if !l.installed {
		return nil
	}
	l.checkpointDue = false
	return durable.WriteFile(l.env.FS, filepath.Join(l.dir, cleanerOffsetFile), l.cleanerOffsetBytes())
}

// loadCleanerOffset reads the cleaner checkpoint, if any (a missing or
// unreadable one only means the next pass cleans more).
func (l *Log) loadCleanerOffset() {
	b, err := vfs.ReadFile(l.env.FS, filepath.Join(l.dir, cleanerOffsetFile))
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return
	}
	to, err1 := strconv.ParseInt(f[0], 10, 64)
	horizon, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || to < 0 || to > l.active().next {
		return
	}
	l.cleanedTo, l.nextHorizon = to, horizon
}
