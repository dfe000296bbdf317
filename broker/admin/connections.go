package admin

import (
	"net/http"
	"sort"
	"time"
)

// Connection is one open client connection as the inspector shows it: who
// it authenticated as, and how.
type Connection struct {
	ID            uint64    `json:"id"`
	Listener      string    `json:"listener"`
	Protocol      string    `json:"protocol"` // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
	Remote        string    `json:"remote"`
	Principal     string    `json:"principal"` // User:alice, User:CN=..., User:ANONYMOUS
	Authenticated bool      `json:"authenticated"`
	Mechanism     string    `json:"sasl_mechanism,omitempty"`
	TLSVersion    string    `json:"tls_version,omitempty"`
	CipherSuite   string    `json:"tls_cipher_suite,omitempty"`
	ClientCert    string    `json:"tls_client_subject,omitempty"`
	Opened        time.Time `json:"opened"`
	// SessionExpires is when the SASL session ends unless the client
	// re-authenticates (KIP-368, --connections-max-reauth); nil: never.
	SessionExpires    *time.Time `json:"session_expires,omitempty"`
	Reauthentications int64      `json:"reauthentications,omitempty"`
}

func (s *Server) connections() []Connection {
	if s.cfg.Connections == nil {
		return nil
	}
	out := s.cfg.Connections()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) serveConnections(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"connections": s.connections()})
}
