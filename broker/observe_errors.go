package broker

import (
	"reflect"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Error codes of every API are counted by walking the response's
// ErrorCode fields. Produce and Fetch, the hot paths, have hand-written
// walks (eachErrorCode); every other response type gets a walk planned once
// by reflection and cached, so an API added later is counted without
// touching this file, and the per-answer cost is a few field reads.

// codeWalk visits the ErrorCode fields reachable from one struct value.
type codeWalk func(v reflect.Value, fn func(int16))

var codeWalks sync.Map // reflect.Type (struct) -> codeWalk (nil: no codes)

// eachErrorCodeReflect reports every non-zero ErrorCode in resp.
func eachErrorCodeReflect(resp kmsg.Response, fn func(int16)) {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	v = v.Elem()
	if w := walkFor(v.Type()); w != nil {
		w(v, fn)
	}
}

func walkFor(t reflect.Type) codeWalk {
	if w, ok := codeWalks.Load(t); ok {
		return w.(codeWalk)
	}
	w := planWalk(t, map[reflect.Type]bool{})
	codeWalks.Store(t, w)
	return w
}

// planWalk builds the walk for struct type t, or nil when no ErrorCode is
// reachable from it. seen guards against recursive types.
func planWalk(t reflect.Type, seen map[reflect.Type]bool) codeWalk {
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	var steps []codeWalk
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		idx := i
		switch {
		case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
			steps = append(steps, func(v reflect.Value, fn func(int16)) {
				if c := int16(v.Field(idx).Int()); c != 0 {
					fn(c)
				}
			})
		case f.Type.Kind() == reflect.Struct:
			if sub := planWalk(f.Type, seen); sub != nil {
				steps = append(steps, func(v reflect.Value, fn func(int16)) { sub(v.Field(idx), fn) })
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			if sub := planWalk(f.Type.Elem(), seen); sub != nil {
				steps = append(steps, func(v reflect.Value, fn func(int16)) {
					s := v.Field(idx)
					for j := 0; j < s.Len(); j++ {
						sub(s.Index(j), fn)
					}
				})
			}
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			if sub := planWalk(f.Type.Elem(), seen); sub != nil {
				steps = append(steps, func(v reflect.Value, fn func(int16)) {
					if p := v.Field(idx); !p.IsNil() {
						sub(p.Elem(), fn)
					}
				})
			}
		}
	}
	if len(steps) == 0 {
		return nil
	}
	return func(v reflect.Value, fn func(int16)) {
		for _, s := range steps {
			s(v, fn)
		}
	}
}
