package wire

import (
	"reflect"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding limits. kmsg checks every array count against the bytes left
// (one byte per element), but an element of one to three bytes on the
// wire decodes into a struct of 32 to 80 bytes, and the broker answers it
// with another: a 50 MB Produce of 8.3 million empty topics took 2.1 GB
// and 4 s (issue 9 row 10). So before kmsg allocates anything, the memory
// a frame can make decoding (and its answer) take is estimated, and a
// frame over the limit is refused with its connection closed:
//
//   - Produce, the one request that is legitimately large, is walked
//     without allocating to count its topics and partitions: each is
//     charged entryCost bytes (its request and answer structs), and one
//     carrying unknown tagged fields tagMapCost more, on top of the frame
//     itself (record batches alias the frame).
//   - Any other request is charged its size times one plus the largest
//     ratio, for its API and version, of an element's decoded cost to
//     that element's smallest encoding (measured from kmsg itself by
//     encoding zero-valued elements; 16 to 27 for the APIs kaas serves,
//     up to 80 for flexible versions where each element may carry a
//     tagged field). With socket.request.max.bytes at 100 MiB and the
//     limit at four times that, such requests may be 5 MB (a Fetch of
//     about 100,000 partitions) to 20 MB (Metadata v4 for 600,000 topic
//     names).

// entryCost is what one Produce topic or partition entry costs decoded
// and answered (request struct, answer struct, the actor message).
const entryCost = 256

// DecodedSize estimates the memory decoding frame (a whole request frame,
// without its size prefix) and answering it takes. h is the frame's
// header (ParseHeader).
func DecodedSize(h Header, frame []byte) int64 {
	if h.Key == 0 {
		if entries, tagged, ok := produceShape(h.Version, frame); ok {
			return int64(len(frame)) + entryCost*entries + tagMapCost*tagged
		}
	}
	return int64(len(frame)) * (1 + amplification(h.Key, h.Version))
}

// produceShape counts a Produce frame's topic and partition entries, and
// the entries carrying unknown tagged fields, without allocating; ok is
// false if the frame does not parse (kmsg then reports why) or the
// version is not one it knows.
func produceShape(version int16, frame []byte) (entries, tagged int64, ok bool) {
	if version < 3 || version > 12 || len(frame) < 8 {
		return 0, 0, false
	}
	flexible := version >= 9
	r := kbin.Reader{Src: frame[8:]}
	if n := r.Int16(); n > 0 { // client id, always a nullable int16 string
		r.Span(int(n))
	}
	tags := func() {
		if flexible && skipTags(&r) > 0 {
			tagged++
		}
	}
	tags()
	skipString(&r, flexible) // transactional id
	r.Int16()                // acks
	r.Int32()                // timeout
	nt := arrayLen(&r, flexible)
	for i := int32(0); i < nt && r.Ok(); i++ {
		entries++
		skipString(&r, flexible)
		np := arrayLen(&r, flexible)
		for j := int32(0); j < np && r.Ok(); j++ {
			entries++
			r.Int32() // index
			if flexible {
				r.CompactNullableBytes()
			} else {
				r.NullableBytes()
			}
			tags()
		}
		tags()
	}
	tags()
	return entries, tagged, r.Ok()
}

// skipTags skips a tagged-field section and returns how many it held.
func skipTags(r *kbin.Reader) int {
	n := int(r.Uvarint())
	for i := 0; i < n && r.Ok(); i++ {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
	return n
}

func skipString(r *kbin.Reader, flexible bool) {
	if flexible {
		if n := int(r.Uvarint()) - 1; n > 0 {
			r.Span(n)
		}
		return
	}
	if n := r.Int16(); n > 0 {
		r.Span(int(n))
	}
}

func arrayLen(r *kbin.Reader, flexible bool) int32 {
	if flexible {
		return r.CompactArrayLen()
	}
	return r.ArrayLen()
}

// amplifications caches amplification by key<<16 | version.
var amplifications sync.Map

// amplification is the largest ratio, over every array in the request
// type at this version, of what an element costs decoded to the bytes a
// zero-valued element takes on the wire (its smallest encoding). It is
// measured from kmsg by encoding requests with one and with two such
// elements, so it follows kmsg's types and versions without a table. An
// element costs its struct, a 16-byte allocation per pointer field (kmsg
// allocates each string pointer), and in flexible versions the map that
// one unknown tagged field (two more bytes on the wire) makes kmsg keep.
func amplification(key, version int16) int64 {
	id := int32(key)<<16 | int32(uint16(version))
	if v, ok := amplifications.Load(id); ok {
		return v.(int64)
	}
	req := kmsg.RequestForKey(key)
	if req == nil || version < 0 || version > req.MaxVersion() {
		return 1 // kmsg will refuse it: nothing to cache
	}
	req.SetVersion(version)
	flexible := req.IsFlexible()
	worst := int64(1)
	typ := reflect.TypeOf(req).Elem()
	eachArray(typ, nil, func(path []int, elem reflect.Type) {
		wire := int64(encodedWith(typ, version, path, 2) - encodedWith(typ, version, path, 1))
		if wire <= 0 {
			return // not in this version
		}
		cost := int64(elem.Size()) + 16*pointerFields(elem)
		worst = max(worst, ceilDiv(cost, wire))
		if flexible && elem.Kind() == reflect.Struct {
			worst = max(worst, ceilDiv(cost+tagMapCost, wire+2))
		}
	})
	amplifications.Store(id, worst)
	return worst
}

// tagMapCost is what kmsg's map of unknown tagged fields costs once one
// is present (a small Go map).
const tagMapCost = 384

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// pointerFields counts the pointer fields of a struct type.
func pointerFields(t reflect.Type) int64 {
	if t.Kind() != reflect.Struct {
		return 0
	}
	n := int64(0)
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() == reflect.Pointer {
			n++
		}
	}
	return n
}

// eachArray calls fn with the field path of every slice (but []byte) in
// struct type t, nested ones included.
func eachArray(t reflect.Type, prefix []int, fn func(path []int, elem reflect.Type)) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() == reflect.Uint8 {
			continue
		}
		path := append(append([]int{}, prefix...), i)
		fn(path, f.Type.Elem())
		if f.Type.Elem().Kind() == reflect.Struct {
			eachArray(f.Type.Elem(), path, fn)
		}
	}
}

// encodedWith is the encoded size at version of a request of type typ
// holding, along path, single elements and n zero-valued (defaulted)
// elements in the last array.
func encodedWith(typ reflect.Type, version int16, path []int, n int) (size int) {
	root := reflect.New(typ)
	v := root.Elem()
	for d, i := range path {
		f := v.Field(i)
		count := 1
		if d == len(path)-1 {
			count = n
		}
		s := reflect.MakeSlice(f.Type(), count, count)
		for j := range count {
			if def := s.Index(j).Addr().MethodByName("Default"); def.IsValid() {
				def.Call(nil)
			}
		}
		f.Set(s)
		v = s.Index(0)
	}
	req := root.Interface().(kmsg.Request)
	req.SetVersion(version)
	defer func() {
		if recover() != nil {
			size = 0 // kmsg cannot encode it at this version: absent
		}
	}()
	return len(req.AppendTo(nil))
}
