//go:build !linux

package server

// waitWatchingPeer is tt.wait: only Linux watches a waiting TLS
// connection for its peer closing (tlsgone_linux.go).
func (tt *tlsTransport) waitWatchingPeer() bool { return tt.wait() }
