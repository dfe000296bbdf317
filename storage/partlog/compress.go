package partlog

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	stdsync "sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compressing a batch's records: the cleaner writes a batch it rebuilt
// with the codec the batch had, as Apache's MemoryRecords.filterTo builds
// the retained records with the original batch's compression type, at
// each codec's default level. A compacted topic whose producers compress
// (a table of JSON or Avro values shrinks 3–10×) would otherwise grow on
// disk with every pass that rewrites its batches.

var (
	gzipWriters = stdsync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression) // the level is valid
		return w
	}}
	lz4Writers   = stdsync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	zstdEncoders = stdsync.Pool{New: func() any {
		// The window stays within what every reader here accepts
		// (zstdMaxWindow); one goroutine, as the pass is one.
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zstdMaxWindow),
			zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(err)
		}
		return e
	}}
)

// streamWriter is a pooled gzip or lz4 writer.
type streamWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// compressInto appends raw compressed with codec (a batch's compression
// id, not 0) to dst. Snappy is written as one raw block, as franz-go and
// librdkafka write it; every Kafka reader takes that or Java's framing.
func compressInto(dst []byte, codec int8, raw []byte) ([]byte, error) {
	switch codec {
	case codecSnappy:
		n := s2.MaxEncodedLen(len(raw))
		if n < 0 {
			return nil, s2.ErrTooLarge
		}
		dst = slices.Grow(dst, n)
		enc := s2.EncodeSnappy(dst[len(dst):cap(dst)], raw) // written in place
		return dst[:len(dst)+len(enc)], nil
	case codecZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(raw, dst), nil
	}
	var pool *stdsync.Pool
	switch codec {
	case codecGzip:
		pool = &gzipWriters
	case codecLz4:
		pool = &lz4Writers
	default:
		return nil, fmt.Errorf("unknown compression type id: %d", codec)
	}
	w := pool.Get().(streamWriter)
	defer pool.Put(w)
	buf := bytes.NewBuffer(dst)
	w.Reset(buf)
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
