package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"slices"

	"github.com/xdg-go/scram"
)

// Lookup finds a user's credential for a mechanism in the current user
// database (an in-memory snapshot: it must not block).
type Lookup func(user, mechanism string) (Credential, bool)

// Shapes tells the shape the made-up credential of an unknown user takes
// for a mechanism: that of the current users' credentials (CommonShape
// over an in-memory snapshot: it must not block).
type Shapes func(mechanism string) Shape

// Server starts conversations for the enabled mechanisms.
type Server struct {
	lookup  Lookup
	shapes  Shapes
	secret  []byte
	enabled []string
}

// NewServer serves the enabled mechanisms; secret keys the made-up
// credentials of unknown users (it must not change across restarts), and
// shapes (nil: DefaultShape) says what they look like.
func NewServer(lookup Lookup, shapes Shapes, secret []byte, enabled []string) (*Server, error) {
	for _, m := range enabled {
		if _, ok := hashFor(m); !ok && m != Plain {
			return nil, fmt.Errorf("unsupported SASL mechanism %q (kaas has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", m)
		}
	}
	if shapes == nil {
		shapes = func(string) Shape { return DefaultShape }
	}
	return &Server{lookup: lookup, shapes: shapes, secret: secret, enabled: slices.Clone(enabled)}, nil
}

// Enabled lists the mechanisms, as SaslHandshake answers them.
func (s *Server) Enabled() []string { return s.enabled }

// credential is a user's credential, or a made-up one for an unknown
// user: the salt length and iteration count most users have, a salt that
// is stable for the name, and keys no proof can match.
func (s *Server) credential(user, mechanism string) Credential {
	if c, ok := s.lookup(user, mechanism); ok {
		return c
	}
	return s.fake(user, mechanism)
}

func (s *Server) fake(user, mechanism string) Credential {
	derive := func(purpose string, n int) []byte {
		m := hmac.New(sha256.New, s.secret)
		m.Write([]byte(purpose + "\x00" + mechanism + "\x00" + user))
		out := m.Sum(nil)
		for len(out) < n {
			out = append(out, m.Sum(out)...)
		}
		return out[:n]
	}
	size := 32
	if mechanism == ScramSHA512 {
		size = 64
	}
	shape := s.shapes(mechanism)
	return Credential{
		Salt:       derive("salt", shape.SaltBytes),
		Iterations: shape.Iterations,
		StoredKey:  derive("stored", size),
		ServerKey:  derive("server", size),
	}
}

// ErrUnsupportedMechanism is a handshake for a mechanism not enabled.
var ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")

// Failure is a failed authentication. Msg is what the client is told
// (Apache's wording, never revealing whether the user exists).
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

// Start begins a conversation for mechanism.
func (s *Server) Start(mechanism string) (*Conversation, error) {
	if !slices.Contains(s.enabled, mechanism) {
		return nil, ErrUnsupportedMechanism
	}
	c := &Conversation{srv: s, mechanism: mechanism}
	if h, ok := hashFor(mechanism); ok {
		c.hash = h
		gen := scram.SHA256
		if mechanism == ScramSHA512 {
			gen = scram.SHA512
		}
		srv, err := gen.NewServer(func(user string) (scram.StoredCredentials, error) {
			c.cred = s.credential(user, mechanism)
			return scram.StoredCredentials{
				KeyFactors: scram.KeyFactors{Salt: string(c.cred.Salt), Iters: c.cred.Iterations},
				StoredKey:  c.cred.StoredKey,
				ServerKey:  c.cred.ServerKey,
			}, nil
		})
		if err != nil {
			return nil, err
		}
		c.scram = srv.NewConversation()
	}
	return c, nil
}

// Conversation is one client's authentication exchange.
type Conversation struct {
	srv       *Server
	mechanism string
	scram     *scram.ServerConversation
	hash      func() hash.Hash
	cred      Credential // what the first message looked up
	first     scramFirst
	user      string
	done      bool
	failed    bool
}

// Mechanism is the mechanism the client chose.
func (c *Conversation) Mechanism() string { return c.mechanism }

// User is the authenticated user name, once Step reported done.
func (c *Conversation) User() string { return c.user }

// Step consumes the client's next token. It returns the token to send
// back and whether authentication completed; an error is always a
// *Failure, after which the conversation is over.
func (c *Conversation) Step(token []byte) (reply []byte, done bool, err error) {
	if c.done || c.failed {
		c.failed = true
		return nil, false, &Failure{"Authentication failed: unexpected SASL token after the exchange ended"}
	}
	if c.scram == nil {
		reply, err = c.plain(token)
	} else {
		reply, err = c.scramStep(token)
	}
	if err != nil {
		c.failed = true
		return nil, false, err
	}
	return reply, c.done, nil
}

func (c *Conversation) generic() error {
	return &Failure{"Authentication failed during authentication due to invalid credentials with SASL mechanism " + c.mechanism}
}

func (c *Conversation) scramStep(token []byte) ([]byte, error) {
	if c.first.serverFirst == "" {
		out, err := c.scram.Step(string(token))
		if err != nil {
			return nil, c.generic()
		}
		c.first = parseFirst(string(token), out)
		return []byte(out), nil
	}
	if c.first.clientFinalNonceCompat(string(token)) {
		return c.finishCompat(string(token))
	}
	out, err := c.scram.Step(string(token))
	if err != nil || !c.scram.Valid() {
		return nil, c.generic()
	}
	return c.finish([]byte(out))
}

// finish completes a valid exchange: the user it proved to be, unless it
// asked for another authorization id (Apache refuses that).
func (c *Conversation) finish(serverFinal []byte) ([]byte, error) {
	if a := c.scram.AuthzID(); a != "" && a != c.scram.Username() {
		return nil, &Failure{"Authentication failed: Client requested an authorization id that is different from username"}
	}
	c.user, c.done = c.scram.Username(), true
	return serverFinal, nil
}

// plain is Apache's PlainSaslServer (RFC 4616: [authzid] NUL authcid NUL
// passwd), checking the password against the user's SCRAM credential:
// PBKDF2 with its salt and iterations, then StoredKey compared in constant
// time. An unknown user costs the same PBKDF2 on a made-up credential.
func (c *Conversation) plain(token []byte) ([]byte, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, &Failure{fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))}
	}
	authzID, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" {
		return nil, &Failure{"Authentication failed: username not specified"}
	}
	if password == "" {
		return nil, &Failure{"Authentication failed: password not specified"}
	}
	mechanism := ScramSHA256
	cred, ok := c.srv.lookup(user, ScramSHA256)
	if !ok {
		if cred, ok = c.srv.lookup(user, ScramSHA512); ok {
			mechanism = ScramSHA512
		}
	}
	if !ok {
		cred = c.srv.fake(user, ScramSHA256)
	}
	salted, err := SaltedPassword(mechanism, password, cred.Salt, cred.Iterations)
	if err != nil {
		return nil, &Failure{"Authentication failed: Invalid username or password"}
	}
	stored, _, err := Keys(mechanism, salted)
	if err != nil || !hmac.Equal(stored, cred.StoredKey) || !ok {
		return nil, &Failure{"Authentication failed: Invalid username or password"}
	}
	if authzID != "" && authzID != user {
		return nil, &Failure{"Authentication failed: Client requested an authorization id that is different from username"}
	}
	c.user, c.done = user, true
	return []byte{}, nil
}
