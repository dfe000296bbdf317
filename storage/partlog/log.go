package partlog

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// Config is the per-topic log configuration (Kafka's topic configs).
type Config struct {
	SegmentBytes       int64 // segment.bytes
	SegmentMs          int64 // segment.ms
	RetentionMs        int64 // retention.ms, -1 keeps forever
	RetentionBytes     int64 // retention.bytes, -1 is unlimited
	IndexIntervalBytes int64 // index.interval.bytes
	// FileDeleteDelay keeps deleted segments open this long, so a fetch
	// holding an older view still reads them (file.delete.delay.ms).
	FileDeleteDelay time.Duration

	// cleanup.policy: Delete applies retention.ms and retention.bytes,
	// Compact has the log cleaner keep the latest record per key.
	Compact, Delete bool
	// The cleaner's topic configs (clean.go).
	MinCleanableRatio  float64 // min.cleanable.dirty.ratio
	MinCompactionLagMs int64   // min.compaction.lag.ms
	MaxCompactionLagMs int64   // max.compaction.lag.ms
	DeleteRetentionMs  int64   // delete.retention.ms
}

// DefaultConfig matches Apache's broker defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		IndexIntervalBytes: 4096,
		FileDeleteDelay:    time.Minute,
		Delete:             true,
		MinCleanableRatio:  0.5,
		MaxCompactionLagMs: math.MaxInt64,
		DeleteRetentionMs:  24 * 3600 * 1000,
	}
}

// ErrOffsetOutOfRange is returned for reads outside [log start, high watermark].
var ErrOffsetOutOfRange = errors.New("offset out of range")

// ErrOffline is returned by every write to a log whose disk failed: a
// failed write or fsync is final for the log (the page cache may have
// dropped what it held, so nothing it covered can be acknowledged), and
// only a restart, which recovers from what is on disk, brings it back.
var ErrOffline = errors.New("the partition's log is offline after a disk failure")

const logStartFile = "log-start-offset"

// Log is one partition's log. It is owned by the partition actor: every
// method except View is called from that actor only. Readers use View.
type Log struct {
	dir      string
	cfg      Config
	env      durable.Env // its Logger is the log's
	segments []*segment
	logStart int64
	hw       int64 // visible end: everything below is durable (or, with a flush interval, written)

	dirty map[*segFile]struct{} // written since the last PrepareSync
	// failed is the write or fsync error that took the log offline.
	failed    error
	published atomic.Pointer[View]
	// checkpointed is the recovery point last written.
	checkpointed recoveryPoint

	// The leader-epoch cache (epoch_checkpoint.go): entries, what the
	// file holds, whether it exists, whether epochs changed since.
	epochs        Epochs
	epochsSaved   Epochs
	scannedEpochs Epochs // met by recovery's scans, for loadEpochs
	leaderEpoch   int32
	epochsOnDisk  bool
	epochsDirty   bool

	// dirtyDir: a file was created or removed since the last
	// PrepareSync. (The small fields sit together: every partition, idle
	// or not, has a Log, and at 360 bytes it took a 384-byte allocation
	// where 320 now do.)
	dirtyDir bool

	// The cleaner (clean.go): the first dirty offset (the cleaner
	// checkpoint), the earliest delete horizon kept, the last plan's
	// dirty ratio.
	cleanedTo, nextHorizon int64
	dirtyRatio             float64
	// checkpointDue: cleanedTo or nextHorizon changed since the
	// checkpoint was last handed to a pass; installed: a pass was
	// installed since the log was opened (Close writes the checkpoint:
	// the pass handed the last one may never run).
	checkpointDue, installed bool
	// checkpointAt is when a pass was last handed the checkpoint to
	// write (cleanerCheckpointInterval).
	checkpointAt time.Time
}

type segmentSize struct {
	seg        *segment
	size, next int64
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset still readable.
func (l *Log) LogStartOffset() int64 { return l.logStart }

// HighWatermark is the visible end of the log.
func (l *Log) HighWatermark() int64 { return l.hw }

// EndOffset is the offset the next batch gets (the log end offset).
func (l *Log) EndOffset() int64 { return l.active().next }

// Size is the total bytes of all segments.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// SegmentCount is the number of segments.
func (l *Log) SegmentCount() int { return len(l.segments) }

// SetConfig applies changed topic configs.
func (l *Log) SetConfig(cfg Config) { l.cfg = cfg }

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

// Append assigns offsets to one batch (rewriting its base offset in place),
// writes it, and returns its base offset. The batch is not visible to
// readers until a sync covering it is advanced (or AdvanceToEnd).
func (l *Log) Append(batch []byte, now time.Time) (BatchHeader, error) {
	if l.failed != nil {
		return BatchHeader{}, ErrOffline
	}
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return h, err
	}
	if h.Size() != int64(len(batch)) {
		return h, fmt.Errorf("%w: header says %d bytes, have %d", ErrShortBatch, h.Size(), len(batch))
	}
	if err := l.maybeRoll(h, now); err != nil {
		return h, err
	}
	seg := l.active()
	h.BaseOffset = seg.next
	SetBaseOffset(batch, h.BaseOffset)
	if err := l.noteAppendEpoch(h); err != nil {
		return h, err
	}
	if err := seg.appendBatch(batch, h, l.cfg.IndexIntervalBytes); err != nil {
		// Final, like a failed fsync: what a failed write left in the
		// page cache is unknown. Recovery cuts a partial batch.
		l.Fail(err)
		return h, err
	}
	l.markDirty(seg.log)
	return h, nil
}

// Fail takes the log offline after a failed write or fsync (the first
// error is kept). Every later write returns ErrOffline.
func (l *Log) Fail(err error) {
	if l.failed == nil {
		l.failed = err
	}
}

// Failed is the error that took the log offline, or nil.
func (l *Log) Failed() error { return l.failed }

// AppendAborted records an aborted transaction in the active segment's
// .txnindex (spec R-MRK-5).
func (l *Log) AppendAborted(a AbortedTxn) error {
	if l.failed != nil {
		return ErrOffline
	}
	seg := l.active()
	created := seg.txn == nil
	if err := seg.appendAborted(l.env.FS, a); err != nil {
		l.Fail(err)
		return err
	}
	if created {
		l.dirtyDir = true
	}
	l.markDirty(seg.txn)
	return nil
}

func (l *Log) markDirty(f *segFile) {
	if l.dirty == nil {
		l.dirty = make(map[*segFile]struct{})
	}
	l.dirty[f] = struct{}{}
}

// maybeRoll starts a new segment before the batch h when the active one
// is full (segment.bytes), old enough (segment.ms), or the batch's offsets
// would not fit the indexes' 32-bit relative offsets, as Apache's
// LogSegment.shouldRoll. Age is measured between record timestamps — the
// incoming batch's against the segment's first batch's — falling back to
// the wall clock for a segment without timestamps.
func (l *Log) maybeRoll(h BatchHeader, now time.Time) error {
	seg := l.active()
	if seg.size == 0 {
		return nil
	}
	full := seg.size+h.Size() > l.cfg.SegmentBytes
	var ageMs int64
	if seg.firstTimestamp >= 0 {
		ageMs = h.MaxTimestamp - seg.firstTimestamp
	} else {
		ageMs = now.Sub(seg.created).Milliseconds()
	}
	old := l.cfg.SegmentMs > 0 && ageMs > l.cfg.SegmentMs
	overflow := seg.next+int64(h.LastOffsetDelta)-seg.base > math.MaxInt32
	if !full && !old && !overflow {
		return nil
	}
	return l.roll(now)
}

// roll seals the active segment and starts the next. Sealing fsyncs the
// segment (and its aborted-transaction index) and writes its indexes
// before the next segment exists, so after any crash only the last
// segment can have a torn tail: damage found in an earlier one is
// corruption, never a crash's leftover (recover.go relies on this).
func (l *Log) roll(now time.Time) error {
	prev := l.active()
	if err := prev.cutRoom(); err != nil {
		l.Fail(err)
		return err
	}
	for _, f := range []*segFile{prev.log, prev.txn} {
		if f == nil {
			continue
		}
		if err := f.Sync(); err != nil {
			l.Fail(err)
			return err
		}
		delete(l.dirty, f)
	}
	if err := prev.writeIndexes(l.env.FS); err != nil {
		l.Fail(err)
		return err
	}
	next, err := createSegment(l.env.FS, l.dir, prev.next, now)
	if err != nil {
		l.Fail(err)
		return err
	}
	l.segments = append(l.segments, next)
	l.dirtyDir = true
	l.env.Logger.Debug("rolled segment", "dir", l.dir, "base", next.base)
	return nil
}

// SyncJob is an fsync to run off the actor; Advance then makes what it
// covered visible.
type SyncJob struct {
	files []*segFile
	fs    vfs.FS
	dir   string // to fsync too, when set
	upTo  int64
	sizes []segmentSize
}

// UpTo is the offset everything below which the job makes durable.
func (j *SyncJob) UpTo() int64 { return j.upTo }

// PrepareSync captures everything written so far. It returns nil when
// nothing was written since the last job.
func (l *Log) PrepareSync() *SyncJob {
	if l.failed != nil || (len(l.dirty) == 0 && !l.dirtyDir) {
		return nil
	}
	j := &SyncJob{upTo: l.active().next, fs: l.env.FS}
	for f := range l.dirty {
		j.files = append(j.files, f)
	}
	if l.dirtyDir {
		j.dir = l.dir
	}
	for _, s := range l.segments {
		j.sizes = append(j.sizes, segmentSize{s, s.size, s.next})
	}
	l.dirty = nil
	l.dirtyDir = false
	return j
}

// Run fsyncs the job's files. It may run on any goroutine. An error is
// final: the caller takes the log offline with Fail, and never retries
// (after a failed fsync the kernel may have dropped the dirty pages and
// reported the error once: a retry that succeeds proves nothing).
func (j *SyncJob) Run() error {
	for _, f := range j.files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if j.dir != "" {
		return durable.SyncDir(j.fs, j.dir)
	}
	return nil
}

// Advance makes a finished job's data visible and durable: the high
// watermark moves to its point. Jobs must be advanced in the order they
// were prepared.
func (l *Log) Advance(j *SyncJob) {
	if j.upTo > l.hw {
		l.hw = j.upTo
	}
	for _, ss := range j.sizes {
		if ss.size > ss.seg.visible {
			ss.seg.visible = ss.size
		}
	}
	l.MarkSynced(j)
}

// MarkSynced records what a finished job made durable (the recovery point
// may move up to it) without moving the high watermark: in flush-interval
// mode the data was visible before its fsync.
func (l *Log) MarkSynced(j *SyncJob) {
	for _, ss := range j.sizes {
		if ss.size > ss.seg.synced {
			ss.seg.synced, ss.seg.syncedNext = ss.size, ss.next
		}
	}
}

// AdvanceToEnd makes everything written visible without waiting for an
// fsync (--flush-interval-ms mode, Kafka's log.flush.interval.ms).
func (l *Log) AdvanceToEnd() {
	l.hw = l.active().next
	for _, s := range l.segments {
		s.visible = s.size
	}
}

// Publish builds a new read view at the current high watermark with the
// given last stable offset, and wakes fetches waiting on the previous one.
func (l *Log) Publish(lso int64) {
	v := &View{LogStart: l.logStart, HighWatermark: l.hw, LastStable: lso, EndOffset: l.active().next, Offline: l.failed,
		Epochs: l.epochs, LeaderEpoch: l.leaderEpoch}
	if v.LastStable > v.HighWatermark || v.LastStable < 0 {
		v.LastStable = v.HighWatermark
	}
	v.segs = make([]segView, 0, len(l.segments))
	for _, s := range l.segments {
		v.segs = append(v.segs, segView{
			base: s.base, file: s.log, size: s.visible,
			index: s.index, times: s.times, maxTimestamp: s.maxTimestamp, aborted: s.aborted,
		})
		v.Size += s.size
	}
	// The segment's recent batches change with its next append, while
	// fetches may still read this view: it gets a copy.
	if n := len(v.segs); n > 0 && l.segments[n-1].recent != nil {
		recent := *l.segments[n-1].recent
		v.segs[n-1].recent = &recent
	}
	if old := l.published.Swap(v); old != nil {
		old.superseded()
	}
}

// View returns the latest published read view. Safe from any goroutine.
func (l *Log) View() *View { return l.published.Load() }

// Published gives readers access to the views without access to the Log.
func (l *Log) Published() *Published { return (*Published)(&l.published) }

// Published is the reader's handle on a log's views.
type Published atomic.Pointer[View]

// View returns the latest view.
func (p *Published) View() *View { return (*atomic.Pointer[View])(p).Load() }

// ErrLogStartInDoubt answers a DeleteRecords whose new log start offset
// was made durable once the partition's ownership had fallen in doubt: a
// peer may have taken the partition over from the files as they were
// before it, so whether it holds is not known here, and no segment is
// removed for it.
var ErrLogStartInDoubt = errors.New("the log start offset was written once the partition's ownership had fallen in doubt")

// DeleteRecordsBefore moves the log start offset to offset (DeleteRecords)
// and drops segments that end at or before it. mayAct (nil: always) is
// the partition's lease gate, asked once the new log start is durable:
// a peer may own the partition's files once it says no, so the segments
// stay and ErrLogStartInDoubt says the outcome is unknown.
func (l *Log) DeleteRecordsBefore(offset int64, mayAct func() bool) error {
	if l.failed != nil {
		return ErrOffline
	}
	if offset < 0 || offset > l.hw {
		return ErrOffsetOutOfRange
	}
	if offset <= l.logStart {
		return nil
	}
	l.logStart = offset
	l.trimEpochs()
	if err := l.persistLogStart(); err != nil {
		return err
	}
	if mayAct != nil && !mayAct() {
		return ErrLogStartInDoubt
	}
	l.dropSegmentsBelow(offset)
	return nil
}

// EnforceRetention deletes whole segments past retention.ms or beyond
// retention.bytes, oldest first, and returns how many it deleted. As in
// Apache (UnifiedLog.deletableSegments), only segments wholly below the
// high watermark go, and an expired active segment goes too: a new empty
// one is rolled first, so the log start moves to the log end. A log whose
// cleanup.policy lacks delete (compact only) keeps every segment.
func (l *Log) EnforceRetention(now time.Time) (int, error) {
	if l.failed != nil || !l.cfg.Delete {
		return 0, nil
	}
	deleted := 0
	total := l.Size()
	for len(l.segments) > 0 {
		s := l.segments[0]
		last := len(l.segments) == 1
		if s.next > l.hw || (last && s.size == 0) {
			break
		}
		expired := l.cfg.RetentionMs >= 0 && now.UnixMilli()-s.largestTimestamp() > l.cfg.RetentionMs
		oversize := l.cfg.RetentionBytes >= 0 && total-s.size >= l.cfg.RetentionBytes
		if !expired && !oversize {
			break
		}
		if last {
			if err := l.roll(now); err != nil {
				return deleted, err
			}
		}
		total -= s.size
		l.segments = l.segments[1:]
		l.retire(s)
		deleted++
		if l.logStart < l.segments[0].base {
			l.logStart = l.segments[0].base
		}
	}
	if deleted > 0 {
		l.trimEpochs()
		l.env.Logger.Info("retention deleted segments", "dir", l.dir, "segments", deleted, "log_start_offset", l.logStart)
		return deleted, l.persistLogStart()
	}
	return 0, nil
}

// dropSegmentsBelow deletes non-active segments wholly below offset. The
// active segment stays even when offset passes its end, as in Apache.
func (l *Log) dropSegmentsBelow(offset int64) {
	for len(l.segments) > 1 && l.segments[0].next <= offset {
		s := l.segments[0]
		l.segments = l.segments[1:]
		l.retire(s)
	}
}

// retire unlinks a segment now and closes it after the delete delay, so
// fetches that still hold an older view can finish reading it.
func (l *Log) retire(s *segment) {
	unpin := s.pinFiles()
	s.removeFiles(l.env.FS)
	l.dirtyDir = true
	delete(l.dirty, s.log)
	if s.txn != nil {
		delete(l.dirty, s.txn)
	}
	time.AfterFunc(l.cfg.FileDeleteDelay, unpin)
}

func (l *Log) persistLogStart() error {
	path := filepath.Join(l.dir, logStartFile)
	if len(l.segments) > 0 && l.logStart == l.segments[0].base {
		if err := l.env.FS.Remove(path); err == nil {
			l.dirtyDir = true
		}
		return nil
	}
	if err := durable.WriteFile(l.env.FS, path, []byte(strconv.FormatInt(l.logStart, 10))); err != nil {
		l.Fail(err)
		return err
	}
	return nil
}

func readLogStart(fsys vfs.FS, dir string) (int64, bool) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, logStartFile))
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// ErrClosedInDoubt is what CloseUnder returns when its gate was closed:
// the partition's ownership is in doubt, so its files were closed without
// a write, and nothing written since the last fsync is known durable.
var ErrClosedInDoubt = errors.New("the partition's ownership is in doubt (its lease may be gone): closed without a write")

// Close writes the active segment's indexes, cuts its preallocated room,
// fsyncs, and closes all files. Only when all of that succeeded does it
// leave the clean-shutdown marker (and a recovery point at the log end);
// an offline log gets neither, and Close reports why, so the next start
// recovers it from disk.
func (l *Log) Close() error { return l.CloseUnder(nil) }

// CloseUnder is Close asking the partition's lease gate (nil: always
// open) before it writes, and again before the marker; closed, it only
// closes the files, as Abandon, and returns ErrClosedInDoubt. In a
// cluster a broker whose lease is gone may no longer own the directory,
// and a clean close's writes — cutting the preallocated room, the
// recovery point, the clean-shutdown marker — would land in the log of
// the peer that took it over (the chaos run found partitions no broker
// could open again: a marker vouching for a peer's active segment, its
// room and all).
func (l *Log) CloseUnder(mayAct func() bool) error {
	may := func() bool { return mayAct == nil || mayAct() }
	if !may() {
		l.Abandon()
		return fmt.Errorf("%s: %w", l.dir, ErrClosedInDoubt)
	}
	var errs []error
	if len(l.segments) > 0 && l.failed == nil {
		// Indexes first: the sync below then also covers their directory
		// entries, before the clean-shutdown marker vouches for them. The
		// preallocated room goes too: the marker makes every byte of the
		// active segment trusted.
		if err := l.active().writeIndexes(l.env.FS); err != nil {
			l.Fail(err)
		}
		if a := l.active(); a.alloc > a.size && l.failed == nil {
			if err := a.cutRoom(); err != nil {
				l.Fail(err)
			}
			l.markDirty(a.log)
		}
		l.dirtyDir = true
		if j := l.PrepareSync(); j != nil {
			if err := j.Run(); err != nil {
				l.Fail(err)
			} else {
				l.MarkSynced(j)
			}
		}
		if l.failed == nil {
			if err := l.writeRecoveryPoint(); err != nil {
				l.Fail(err)
			}
		}
		if l.failed == nil {
			_ = l.saveEpochsAtClose() // a failure takes the log offline
		}
		if l.failed == nil {
			if err := l.persistCleanerOffset(); err != nil {
				l.Fail(err)
			}
		}
	}
	if l.failed != nil {
		errs = append(errs, fmt.Errorf("%s: %w", l.dir, l.failed))
	}
	var marker cleanMarker
	if len(l.segments) > 0 {
		a := l.active()
		marker = cleanMarker{base: a.base, size: a.size}
	}
	for _, s := range l.segments {
		errs = append(errs, s.close())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Asked once more: the marker is the write that makes the active
	// segment trusted. (A pause between this and the write is why the
	// marker names the segment and its length: shutdown.go.)
	if !may() {
		return fmt.Errorf("%s: %w", l.dir, ErrClosedInDoubt)
	}
	return markCleanShutdown(l.env.FS, l.dir, marker)
}

// Abandon closes the log's files without writing anything: no indexes,
// no fsync, no clean-shutdown marker. A cluster broker whose lease is
// gone uses it: another broker may own the partition already, and every
// byte this one wrote would land in a log it no longer owns.
func (l *Log) Abandon() {
	l.closeAll()
	l.dirty = nil
}

// Remove closes the log and deletes its directory (DeleteTopics), durably:
// a topic created again under the same name must not find old segments
// after a crash.
func (l *Log) Remove() error {
	for _, s := range l.segments {
		_ = s.close()
	}
	if err := l.env.FS.RemoveAll(l.dir); err != nil {
		return err
	}
	return durable.SyncDir(l.env.FS, filepath.Dir(l.dir))
}
