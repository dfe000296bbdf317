package share

import (
	"testing"

	"kaas/state/sharepartition"
)

// The read cache serves a fetch only from batches that hold its offset
// and enough records past it, never a batch at or past the bound.
func TestCachedReadFrom(t *testing.T) {
	c := &cachedRead{
		data:    make([]byte, 300),
		batches: []sharepartition.Batch{{First: 0, Last: 99}, {First: 100, Last: 199}, {First: 200, Last: 299}},
		spans:   []span{{start: 0, end: 100}, {start: 100, end: 200}, {start: 200, end: 300}},
	}
	for _, tc := range []struct {
		from, upTo, want int64
		ok               bool
		first, last      int64
		bytes            int
	}{
		{from: 0, upTo: 300, want: 50, ok: true, first: 0, last: 299, bytes: 300},
		{from: 150, upTo: 300, want: 100, ok: true, first: 100, last: 299, bytes: 200},
		{from: 150, upTo: 200, want: 500, ok: true, first: 100, last: 199, bytes: 100}, // stops at the bound: nothing more to read
		{from: 250, upTo: 1000, want: 100, ok: false},                                  // too few records past from
		{from: 300, upTo: 1000, want: 1, ok: false},                                    // past the cache
	} {
		data, bs, ss, ok := c.from(tc.from, tc.upTo, tc.want)
		if ok != tc.ok {
			t.Fatalf("%+v: ok %v", tc, ok)
		}
		if !ok {
			continue
		}
		if bs[0].First != tc.first || bs[len(bs)-1].Last != tc.last || len(data) != tc.bytes || ss[0].start != 0 || ss[len(ss)-1].end != len(data) {
			t.Fatalf("%+v: batches %v spans %v, %d bytes", tc, bs, ss, len(data))
		}
	}
}
