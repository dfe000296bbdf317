package partlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	stdsync "sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kbin"
)

// Walking a batch's records. Produce validates every batch this way before
// it is stored (Apache's LogValidator), and the readers that need
// record-level answers (ListOffsets by timestamp) reuse it. A compressed
// batch is decompressed as a stream: only a small buffer and the codec's
// window are held, never the whole inflated batch, and the bytes inflated
// are bounded by a limit the caller derives from max.message.bytes.

// RecordErrorKind says how a batch failed and so which error the producer
// gets.
type RecordErrorKind int

const (
	// Malformed: the records contradict the batch header or cannot be
	// parsed (INVALID_RECORD, Apache's InvalidRecordException).
	Malformed RecordErrorKind = iota
	// TooLarge: the records inflate past the limit (MESSAGE_TOO_LARGE).
	TooLarge
	// Undecodable: the compressed stream is not valid for its codec, or
	// the codec is unknown (Apache fails these with a KafkaException:
	// UNKNOWN_SERVER_ERROR).
	Undecodable
	// Corrupt: an old-format message fails its CRC or its framing
	// (CORRUPT_MESSAGE, Apache's CorruptRecordException; legacy.go).
	Corrupt
)

// RecordError is why a batch's records were refused.
type RecordError struct {
	Kind RecordErrorKind
	Msg  string
}

func (e *RecordError) Error() string { return e.Msg }

func malformed(format string, a ...any) error {
	return &RecordError{Kind: Malformed, Msg: fmt.Sprintf(format, a...)}
}

// Record is what a walk reports of each record.
type Record struct {
	Index       int32
	OffsetDelta int32
	Timestamp   int64 // the batch's append time for LogAppendTime batches
	NullKey     bool  // the record has no key (refused by compacted topics)
}

// WalkRecords reads every record of the v2 batch as Apache's record
// iterator does and checks it against the header: exactly NumRecords
// records (none missing, no bytes left after them), each record's length
// matching its fields, offset deltas 0, 1, 2, … (Apache does not check
// these; kaas stores batches as produced, so it refuses instead of
// rewriting them), and at most limit bytes inflated (limit <= 0: no
// limit). fn, if not nil, sees each record and may stop the walk by
// returning false. Errors are *RecordError.
func WalkRecords(batch []byte, limit int64, fn func(Record) bool) error {
	h, err := ParseBatchHeader(batch)
	if err != nil || h.Magic != 2 || len(batch) < BatchHeaderSize {
		return malformed("record batch header truncated")
	}
	body := batch[BatchHeaderSize:]
	var src recordSource
	switch c := h.Compression(); c {
	case 0:
		if limit > 0 && int64(len(body)) > limit {
			return &RecordError{Kind: TooLarge, Msg: fmt.Sprintf("records of %d bytes exceed the limit of %d", len(body), limit)}
		}
		return walkPlain(body, h, fn)
	default:
		stream, release, err := decompressor(c, body)
		if err != nil {
			return err
		}
		defer release()
		br := readers.Get().(*bufio.Reader)
		br.Reset(stream)
		defer func() { br.Reset(nil); readers.Put(br) }()
		src = &streamSource{r: br, limit: limit}
	}
	w := walker{src: src, h: h}
	return w.walk(fn)
}

// readers pools the buffered readers compressed walks read through.
var readers = stdsync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// walkPlain is WalkRecords for an uncompressed batch, the one every
// produce takes: the same checks as the streaming walk below, parsed
// straight from the bytes.
func walkPlain(body []byte, h BatchHeader, fn func(Record) bool) error {
	if h.NumRecords < 0 {
		return malformed("found invalid record count %d in magic v2 batch", h.NumRecords)
	}
	logAppend := h.Attributes&AttrLogAppendTime != 0
	pos := 0
	for i := int32(0); i < h.NumRecords; i++ {
		size, n := kbin.Varint(body[pos:])
		if n == 0 {
			return malformed("incorrect declared batch size, premature EOF reached")
		}
		pos += n
		if size < 0 || int(size) > len(body)-pos {
			return malformed("invalid record size: expected %d bytes in record %d's payload, but only %d remain", size, i, len(body)-pos)
		}
		rec := body[pos : pos+int(size)]
		pos += int(size)
		tsDelta, offDelta, nullKey, ok := plainRecord(rec)
		if !ok {
			return malformed("invalid record size: record %d's fields do not take exactly its %d bytes", i, size)
		}
		if offDelta != i {
			return malformed("record %d has offset delta %d; a batch's records must have offset deltas 0 to %d in order", i, offDelta, h.NumRecords-1)
		}
		if fn != nil {
			ts := h.BaseTimestamp + tsDelta
			if logAppend {
				ts = h.MaxTimestamp
			}
			if !fn(Record{Index: i, OffsetDelta: offDelta, Timestamp: ts, NullKey: nullKey}) {
				return nil
			}
		}
	}
	if pos != len(body) {
		return malformed("incorrect declared batch size, records still remaining after the %d the batch declares", h.NumRecords)
	}
	return nil
}

// plainRecord parses one record's fields (attributes, timestamp delta,
// offset delta, key, value, headers) and reports whether they take exactly
// rec.
func plainRecord(rec []byte) (tsDelta int64, offDelta int32, nullKey, ok bool) {
	if len(rec) < 1 {
		return 0, 0, false, false
	}
	rec = rec[1:] // attributes
	tsDelta, n := kbin.Varlong(rec)
	if n == 0 {
		return 0, 0, false, false
	}
	rec = rec[n:]
	if offDelta, n = kbin.Varint(rec); n == 0 {
		return 0, 0, false, false
	}
	rec = rec[n:]
	blob := func(nullable bool) bool {
		l, n := kbin.Varint(rec)
		if n == 0 || l < -1 || (l == -1 && !nullable) || int(l) > len(rec)-n {
			return false
		}
		rec = rec[n+max(int(l), 0):]
		return true
	}
	if l, n := kbin.Varint(rec); n > 0 && l == -1 {
		nullKey = true
	}
	for range 2 { // key, value
		if !blob(true) {
			return 0, 0, false, false
		}
	}
	headers, n := kbin.Varint(rec)
	if n == 0 || headers < 0 {
		return 0, 0, false, false
	}
	rec = rec[n:]
	for range headers {
		if !blob(false) || !blob(true) {
			return 0, 0, false, false
		}
	}
	return tsDelta, offDelta, nullKey, len(rec) == 0
}

// recordSource is a compressed batch's records section as it inflates.
type recordSource interface {
	io.ByteReader
	// skip consumes n bytes.
	skip(n int64) error
	// done reports whether the section has no bytes left.
	done() (bool, error)
	// read is the bytes consumed so far.
	read() int64
}

type walker struct {
	src recordSource
	h   BatchHeader
}

func (w *walker) walk(fn func(Record) bool) error {
	h := w.h
	if h.NumRecords < 0 {
		return malformed("found invalid record count %d in magic v2 batch", h.NumRecords)
	}
	logAppend := h.Attributes&AttrLogAppendTime != 0
	for i := int32(0); i < h.NumRecords; i++ {
		rec, err := w.record(i)
		if err != nil {
			return err
		}
		if rec.OffsetDelta != i {
			return malformed("record %d has offset delta %d; a batch's records must have offset deltas 0 to %d in order", i, rec.OffsetDelta, h.NumRecords-1)
		}
		if logAppend {
			rec.Timestamp = h.MaxTimestamp
		}
		if fn != nil && !fn(rec) {
			return nil
		}
	}
	done, err := w.src.done()
	if err != nil {
		return w.streamErr(err)
	}
	if !done {
		return malformed("incorrect declared batch size, records still remaining after the %d the batch declares", h.NumRecords)
	}
	return nil
}

// record parses one record (DefaultRecord.readFrom): its length, then
// attributes, timestamp delta, offset delta, key, value and headers, which
// must take exactly that length.
func (w *walker) record(i int32) (Record, error) {
	src := w.src
	size, err := w.varint()
	if err != nil {
		return Record{}, err
	}
	if size < 0 {
		return Record{}, malformed("record %d has invalid size %d", i, size)
	}
	start := src.read()
	if _, err := src.ReadByte(); err != nil { // attributes
		return Record{}, w.eof(err)
	}
	tsDelta, err := w.varlong()
	if err != nil {
		return Record{}, err
	}
	offDelta, err := w.varint()
	if err != nil {
		return Record{}, err
	}
	nullKey := false
	for _, what := range []string{"key", "value"} {
		n, err := w.varint()
		if err != nil {
			return Record{}, err
		}
		if what == "key" && n == -1 {
			nullKey = true
		}
		if n < -1 {
			return Record{}, malformed("record %d has invalid %s length %d", i, what, n)
		}
		if err := w.skip(int64(max(n, 0))); err != nil {
			return Record{}, err
		}
	}
	headers, err := w.varint()
	if err != nil {
		return Record{}, err
	}
	if headers < 0 {
		return Record{}, malformed("found invalid number of record headers %d", headers)
	}
	for range headers {
		for _, what := range []string{"header key", "header value"} {
			n, err := w.varint()
			if err != nil {
				return Record{}, err
			}
			if n < 0 && (what == "header key" || n < -1) {
				return Record{}, malformed("record %d has invalid %s length %d", i, what, n)
			}
			if err := w.skip(int64(max(n, 0))); err != nil {
				return Record{}, err
			}
		}
		if src.read()-start > int64(size) {
			break // the checks below report it
		}
	}
	if got := src.read() - start; got != int64(size) {
		return Record{}, malformed("invalid record size: expected to read %d bytes in record %d's payload, but read %d", size, i, got)
	}
	return Record{Index: i, OffsetDelta: offDelta, Timestamp: w.h.BaseTimestamp + tsDelta, NullKey: nullKey}, nil
}

func (w *walker) varint() (int32, error) {
	v, err := binary.ReadVarint(w.src)
	if err != nil {
		return 0, w.eof(err)
	}
	if v < -1<<31 || v >= 1<<31 {
		return 0, malformed("varint %d overflows 32 bits", v)
	}
	return int32(v), nil
}

func (w *walker) varlong() (int64, error) {
	v, err := binary.ReadVarint(w.src)
	if err != nil {
		return 0, w.eof(err)
	}
	return v, nil
}

func (w *walker) skip(n int64) error {
	if err := w.src.skip(n); err != nil {
		return w.eof(err)
	}
	return nil
}

// eof turns a read error into the batch's fault: the records end early
// (Apache: "premature EOF"), the stream is undecodable, or the limit hit.
func (w *walker) eof(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errVarintOverflow) {
		return malformed("incorrect declared batch size, premature EOF reached")
	}
	return w.streamErr(err)
}

func (w *walker) streamErr(err error) error {
	var re *RecordError
	if errors.As(err, &re) {
		return re
	}
	return &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("failed to decompress record stream: %v", err)}
}

// errVarintOverflow is binary.ReadVarint's overflow error.
var errVarintOverflow = func() error {
	_, err := binary.ReadVarint(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}))
	return err
}()

// streamSource is an inflating records section, counted against limit.
type streamSource struct {
	r     *bufio.Reader
	n     int64
	limit int64
}

func (s *streamSource) over(n int64) error {
	if s.limit > 0 && s.n+n > s.limit {
		return &RecordError{Kind: TooLarge, Msg: fmt.Sprintf("records inflate past the limit of %d bytes", s.limit)}
	}
	return nil
}

func (s *streamSource) ReadByte() (byte, error) {
	if err := s.over(1); err != nil {
		return 0, err
	}
	c, err := s.r.ReadByte()
	if err == nil {
		s.n++
	}
	return c, err
}

func (s *streamSource) skip(n int64) error {
	if err := s.over(n); err != nil {
		return err
	}
	for n > 0 {
		step := int(min(n, 1<<30))
		d, err := s.r.Discard(step)
		s.n += int64(d)
		n -= int64(d)
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *streamSource) done() (bool, error) {
	_, err := s.r.ReadByte()
	if err == io.EOF {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, nil
}

func (s *streamSource) read() int64 { return s.n }

// Codec ids in a batch's attributes.
const (
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4
)

// zstdMaxWindow bounds the window a zstd frame may ask the decoder to
// hold: frames written by Kafka clients (batches of at most a few MB, at
// any level up to 19) need at most 8 MiB.
const zstdMaxWindow = 8 << 20

var zstdDecoders = stdsync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(zstdMaxWindow))
	if err != nil {
		panic(err)
	}
	return d
}}

// decompressor returns a stream of body's inflated bytes and a function to
// release what it holds.
// Decompress inflates body compressed with codec (a record batch's
// compression ids: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), refusing to
// produce more than limit bytes (a small payload may inflate hugely).
func Decompress(codec int8, body []byte, limit int) ([]byte, error) {
	if codec == 0 {
		return body, nil
	}
	r, done, err := decompressor(codec, body)
	if err != nil {
		return nil, err
	}
	defer done()
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, fmt.Errorf("decompresses to more than %d bytes", limit)
	}
	return out, nil
}

// decompressInto is Decompress appending to dst (reused by the caller
// across batches).
func decompressInto(dst []byte, codec int8, body []byte, limit int) ([]byte, error) {
	if codec == codecSnappy {
		return newSnappyReader(body).decodeAll(dst, limit)
	}
	r, done, err := decompressor(codec, body)
	if err != nil {
		return nil, err
	}
	defer done()
	if cap(dst) == 0 {
		dst = make([]byte, 0, 4*len(body)+512)
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return nil, fmt.Errorf("decompresses to more than %d bytes", limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func decompressor(codec int8, body []byte) (io.Reader, func(), error) {
	undecodable := func(err error) error {
		return &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("failed to decompress record stream: %v", err)}
	}
	switch codec {
	case codecGzip:
		r, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, nil, undecodable(err)
		}
		return r, func() {}, nil
	case codecSnappy:
		return newSnappyReader(body), func() {}, nil
	case codecLz4:
		return lz4.NewReader(bytes.NewReader(body)), func() {}, nil
	case codecZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		// Only a plain io.Reader: given a buffer (Bytes and Len), the
		// decoder would decode it whole in one piece.
		if err := d.Reset(struct{ io.Reader }{bytes.NewReader(body)}); err != nil {
			zstdDecoders.Put(d)
			return nil, nil, undecodable(err)
		}
		return d, func() { _ = d.Reset(nil); zstdDecoders.Put(d) }, nil
	}
	return nil, nil, &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("unknown compression type id: %d", codec)}
}

// snappyReader inflates Kafka's snappy: the xerial framing Java writes (a
// header, then blocks each prefixed by its big-endian length) or one raw
// block (librdkafka). Each block is decoded whole, so its decoded length
// is checked before anything is allocated.
type snappyReader struct {
	src    []byte
	xerial bool
	out    []byte // decoded and not yet read
	err    error
}

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyMaxBlock bounds one decoded snappy block: Java writes 32 KiB
// blocks; a raw block is a whole batch, bounded by the batch limits.
const snappyMaxBlock = 64 << 20

func newSnappyReader(body []byte) *snappyReader {
	if len(body) >= 16 && bytes.HasPrefix(body, xerialMagic) {
		return &snappyReader{src: body[16:], xerial: true}
	}
	return &snappyReader{src: body}
}

func (r *snappyReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.next()
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// next decodes the next block into out, or returns io.EOF.
func (r *snappyReader) next() error {
	block, n, err := r.nextBlock()
	if err != nil {
		return err
	}
	out, err := s2.Decode(make([]byte, n), block)
	if err != nil {
		return &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("failed to decompress record stream: %v", err)}
	}
	r.out = out
	return nil
}

// nextBlock is the next block and its decoded length, or io.EOF.
func (r *snappyReader) nextBlock() ([]byte, int, error) {
	if len(r.src) == 0 {
		return nil, 0, io.EOF
	}
	block := r.src
	if r.xerial {
		if len(r.src) < 4 {
			return nil, 0, io.ErrUnexpectedEOF
		}
		n := binary.BigEndian.Uint32(r.src)
		if int64(n) > int64(len(r.src)-4) {
			return nil, 0, io.ErrUnexpectedEOF
		}
		block, r.src = r.src[4:4+n], r.src[4+n:]
	} else {
		r.src = nil
	}
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, 0, &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("failed to decompress record stream: %v", err)}
	}
	if n > snappyMaxBlock {
		return nil, 0, &RecordError{Kind: TooLarge, Msg: fmt.Sprintf("a snappy block inflates to %d bytes", n)}
	}
	return block, n, nil
}

// decodeAll appends every block to dst, each decoded in place: no
// block-sized buffer of its own and no copy, which was most of a
// cleaning pass's decompression cost.
func (r *snappyReader) decodeAll(dst []byte, limit int) ([]byte, error) {
	for {
		block, n, err := r.nextBlock()
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
		if len(dst)+n > limit {
			return nil, fmt.Errorf("decompresses to more than %d bytes", limit)
		}
		dst = slices.Grow(dst, n)
		if _, err := s2.Decode(dst[len(dst):len(dst)+n], block); err != nil {
			return nil, &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("failed to decompress record stream: %v", err)}
		}
		dst = dst[:len(dst)+n]
	}
}

// InflateLimit is how many bytes a batch's records may take once
// inflated, for a topic whose max.message.bytes (the most a batch may take
// on the wire, compressed) is maxMessageBytes: 128 times that, between 16
// MiB and 1 GiB. Apache has no such bound; a batch that compresses better
// than 128:1 is refused with MESSAGE_TOO_LARGE, and Java producers then
// split it.
func InflateLimit(maxMessageBytes int32) int64 {
	return min(max(int64(maxMessageBytes)*128, 16<<20), 1<<30)
}

// ErrCorruptBatch wraps every error decoding a stored batch's records.
var ErrCorruptBatch = errors.New("stored record batch does not decode")

// forEachRecord calls fn with the offset and timestamp of each record in a
// v2 batch until fn returns false, inflating at most readLimit bytes: the
// few readers that need record-level answers (timestamp lookups) pay for
// this; produce validated the batch on the way in and fetch never looks
// inside. Decoding errors wrap ErrCorruptBatch.
func forEachRecord(batch []byte, fn func(offset, timestamp int64) bool) error {
	if err := eachRecord(batch, fn); err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptBatch, err)
	}
	return nil
}

func eachRecord(batch []byte, fn func(offset, timestamp int64) bool) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return err
	}
	if h.Attributes&AttrLogAppendTime != 0 {
		// Every record carries the batch's append time.
		for d := int32(0); d <= h.LastOffsetDelta; d++ {
			if !fn(h.BaseOffset+int64(d), h.MaxTimestamp) {
				return nil
			}
		}
		return nil
	}
	return WalkRecords(batch, readLimit, func(r Record) bool {
		return fn(h.BaseOffset+int64(r.OffsetDelta), r.Timestamp)
	})
}

// readLimit bounds what a reader inflates of one stored batch: produce
// refused anything larger.
const readLimit = 1 << 30
