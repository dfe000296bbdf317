package bench

import (
	"fmt"
	"math/rand/v2"
)

// Payloads of the produced records. Random bytes are the default: real
// records carry entropy, and an all-zero value compresses about 100:1 under
// the client's default snappy, which turns a "100-byte record" benchmark
// into one of request overhead alone. --payload zeros measures that
// regime on purpose.
const (
	PayloadRandom = "random"
	PayloadZeros  = "zeros"
)

// payloadPool is large enough that a producer batch (up to 1 MB) never
// repeats a value, so compression finds nothing to share between records.
const payloadPool = 1 << 14

// payloads returns a function giving the i-th record's value.
func payloads(kind string, size int) (func(i int) []byte, error) {
	switch kind {
	case PayloadZeros:
		v := make([]byte, size)
		return func(int) []byte { return v }, nil
	case PayloadRandom, "":
		r := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, payloadPool*size)
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		return func(i int) []byte {
			off := (i % payloadPool) * size
			return buf[off : off+size : off+size]
		}, nil
	}
	return nil, fmt.Errorf("unknown payload %q (random or zeros)", kind)
}
