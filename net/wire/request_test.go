package wire

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf encodes a request the way a client does, without the size prefix.
func frameOf(t testing.TB, req kmsg.Request, corr int32, clientID string) []byte {
	t.Helper()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	b := f.AppendRequest(nil, req, corr)
	return b[4:]
}

func TestParseRequestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"metadata v1 (header v1)", func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.SetVersion(1)
			r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
			return r
		}()},
		{"metadata v12 (header v2, flexible)", func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.SetVersion(12)
			r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
			return r
		}()},
		{"api versions v3", func() kmsg.Request {
			r := kmsg.NewPtrApiVersionsRequest()
			r.SetVersion(3)
			r.ClientSoftwareName = "kaas-test"
			r.ClientSoftwareVersion = "1"
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := frameOf(t, tc.req, 77, "client-a")
			h, got, err := ParseRequest(frame)
			if err != nil {
				t.Fatal(err)
			}
			if h.Key != tc.req.Key() || h.Version != tc.req.GetVersion() || h.CorrelationID != 77 || h.ClientID != "client-a" {
				t.Fatalf("header = %+v", h)
			}
			if string(got.AppendTo(nil)) != string(tc.req.AppendTo(nil)) {
				t.Fatal("body did not round trip")
			}
		})
	}
}

func TestParseRequestRejects(t *testing.T) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	whole := frameOf(t, meta, 1, "c")

	unknown := append([]byte(nil), whole...)
	binary.BigEndian.PutUint16(unknown, 9999)

	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", whole[:5], ErrTruncated},
		{"unknown key", unknown, ErrUnknownKey},
		{"truncated body", whole[:len(whole)-3], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseRequest(tc.frame)
			if err == nil {
				t.Fatal("expected an error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAppendResponseHeaders(t *testing.T) {
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3)
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	for _, tc := range []struct {
		resp     kmsg.Response
		tagBytes int
	}{{av, 0}, {md, 1}} {
		frame := AppendResponse(nil, 5, tc.resp)
		if got := int(binary.BigEndian.Uint32(frame)); got != len(frame)-4 {
			t.Fatalf("size prefix %d, frame %d", got, len(frame)-4)
		}
		body := tc.resp.AppendTo(nil)
		if len(frame) != 8+tc.tagBytes+len(body) {
			t.Fatalf("key %d: header tagged fields: got frame %d for body %d", tc.resp.Key(), len(frame), len(body))
		}
	}
}

// FuzzParseRequest feeds arbitrary frames to the decoder: it may reject
// them, but it must never panic, since these are a client's raw bytes.
func FuzzParseRequest(f *testing.F) {
	for key := int16(0); key <= 60; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for _, v := range []int16{0, req.MaxVersion() / 2, req.MaxVersion()} {
			req.SetVersion(v)
			f.Add(frameOf(f, req, 1, "fuzz"))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if h, err := ParseHeader(frame); err == nil && DecodedSize(h, frame) < int64(len(frame)) {
			t.Fatal("estimate below the frame size")
		}
		_, req, err := ParseRequest(frame)
		if err == nil && req == nil {
			t.Fatal("nil request without error")
		}
	})
}

// A pre-sized fetch answer encodes to the same bytes as a grown one.
func TestEncodeResponseMatchesAppendResponse(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	tp := kmsg.NewFetchResponseTopic()
	tp.Topic = "t"
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = make([]byte, 100000)
	tp.Partitions = append(tp.Partitions, p)
	resp.Topics = append(resp.Topics, tp)
	got := EncodeResponse(9, resp)
	if string(got) != string(AppendResponse(nil, 9, resp)) {
		t.Fatal("pre-sized encoding differs")
	}
	if cap(got) < len(got) || cap(got) > len(got)+1024 {
		t.Fatalf("size hint %d for a %d-byte frame", cap(got), len(got))
	}
}
