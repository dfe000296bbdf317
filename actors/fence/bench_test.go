package fence

import (
	"fmt"
	"testing"
)

// BenchmarkFenceBump is one answered bump (fan-out to the floors, one
// appended record, its fsync) with many producers fenced already: issue 9
// row 18 was a cost in proportion to every producer ever fenced (the whole
// JSON file rewritten and fsynced per bump); an appended record costs the
// same whatever the file holds.
func BenchmarkFenceBump(b *testing.B) {
	for _, fenced := range []int{0, 10000} {
		b.Run(fmt.Sprintf("fenced=%d", fenced), func(b *testing.B) {
			r := startRig(b, b.TempDir(), 0, 0)
			for pid := int64(1); pid <= int64(fenced); pid++ {
				done := make(chan error, 1)
				r.h.Fence(pid, 1, func(err error) { done <- err })
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				done := make(chan error, 1)
				r.h.Fence(int64(fenced+1+i), 1, func(err error) { done <- err })
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
