// Package wire turns Kafka request frames into kmsg requests and kmsg
// responses into frames. It holds no connection state, so it is the one place
// the fuzzer needs to reach to cover everything a client's bytes can touch
// before a handler runs.
package wire

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersionsKey is special-cased by the protocol: its response header never
// carries tagged fields and an unsupported version is still answered.
const ApiVersionsKey int16 = 18

// Header is the parsed request header (v1, or v2 for flexible versions).
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

var (
	// ErrTruncated is returned when the frame ends inside the header.
	ErrTruncated = errors.New("request header truncated")
	// ErrUnknownKey is returned for an API key kmsg does not know.
	ErrUnknownKey = errors.New("unknown api key")
)

// ParseHeader reads the fixed part of the header: enough to route the frame
// and to answer it even when the body cannot be decoded.
func ParseHeader(frame []byte) (Header, error) {
	if len(frame) < 8 {
		return Header{}, ErrTruncated
	}
	r := kbin.Reader{Src: frame}
	h := Header{Key: r.Int16(), Version: r.Int16(), CorrelationID: r.Int32()}
	return h, nil
}

// ParseRequest decodes a whole frame (without its 4-byte size prefix). The
// returned request aliases frame: the caller must own frame outright.
// version must already have been checked against the supported range; kmsg
// decodes any version up to its own maximum.
func ParseRequest(frame []byte) (Header, kmsg.Request, error) {
	h, err := ParseHeader(frame)
	if err != nil {
		return h, nil, err
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, fmt.Errorf("%w %d", ErrUnknownKey, h.Key)
	}
	if h.Version < 0 || h.Version > req.MaxVersion() {
		return h, nil, fmt.Errorf("api key %d: version %d is beyond what kmsg decodes", h.Key, h.Version)
	}
	req.SetVersion(h.Version)
	r := kbin.Reader{Src: frame[8:]}
	clientID := r.NullableString()
	// ApiVersions v3+ uses header v2 like every flexible request; the
	// asymmetry is only on the response side.
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return h, nil, fmt.Errorf("api key %d v%d: %w", h.Key, h.Version, ErrTruncated)
	}
	if clientID != nil {
		h.ClientID = *clientID
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return h, nil, fmt.Errorf("api key %d v%d: decoding body: %w", h.Key, h.Version, err)
	}
	return h, req, nil
}
