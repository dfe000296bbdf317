package sasl

import (
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// users is a user database as the broker keeps one: user → mechanism →
// credential.
type users map[string]map[string]Credential

// of is the credentials of mechanism, for CommonShape.
func (u users) of(mechanism string) iter.Seq[Credential] {
	return func(yield func(Credential) bool) {
		for _, creds := range u {
			if c, ok := creds[mechanism]; ok && !yield(c) {
				return
			}
		}
	}
}

func testServer(t *testing.T, db users) *Server {
	t.Helper()
	lookup := func(user, mech string) (Credential, bool) {
		c, ok := db[user][mech]
		return c, ok
	}
	shapes := func(mech string) Shape { return CommonShape(db.of(mech)) }
	s, err := NewServer(lookup, shapes, []byte("0123456789abcdef0123456789abcdef"), []string{Plain, ScramSHA256, ScramSHA512})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCred(t *testing.T, mech, password string) Credential {
	t.Helper()
	c, err := NewCredential(mech, password, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runScram drives a whole exchange with xdg-go/scram's client; it returns
// the server-first message and the server's verdict.
func runScram(t *testing.T, s *Server, mech, user, password string) (serverFirst string, conv *Conversation, err error) {
	t.Helper()
	gen := scram.SHA256
	if mech == ScramSHA512 {
		gen = scram.SHA512
	}
	client, cerr := gen.NewClient(user, password, "")
	if cerr != nil {
		t.Fatal(cerr)
	}
	cc := client.NewConversation()
	conv, err = s.Start(mech)
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := cc.Step("")
	s1, done, err := conv.Step([]byte(c1))
	if err != nil || done {
		return "", conv, err
	}
	c2, cerr := cc.Step(string(s1))
	if cerr != nil {
		t.Fatalf("client rejected the server-first message %q: %v", s1, cerr)
	}
	s2, done, err := conv.Step([]byte(c2))
	if err != nil {
		return string(s1), conv, err
	}
	if !done {
		t.Fatal("exchange not done after the client-final message")
	}
	if _, cerr := cc.Step(string(s2)); cerr != nil {
		t.Fatalf("client rejected the server signature: %v", cerr)
	}
	return string(s1), conv, nil
}

func TestScram(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			s := testServer(t, users{"alice": {mech: mustCred(t, mech, "secret")}})
			_, conv, err := runScram(t, s, mech, "alice", "secret")
			if err != nil || conv.User() != "alice" {
				t.Fatalf("good password: user %q, %v", conv.User(), err)
			}
			_, _, wrong := runScram(t, s, mech, "alice", "nope")
			first1, _, unknown := runScram(t, s, mech, "mallory", "nope")
			first2, _, _ := runScram(t, s, mech, "mallory", "other")
			var f1, f2 *Failure
			if !errors.As(wrong, &f1) || !errors.As(unknown, &f2) {
				t.Fatalf("want failures, got %v and %v", wrong, unknown)
			}
			if f1.Msg != f2.Msg || !strings.Contains(f1.Msg, "invalid credentials with SASL mechanism "+mech) {
				t.Errorf("wrong password says %q, unknown user says %q: want the same generic message", f1.Msg, f2.Msg)
			}
			// An unknown user gets a salt that is stable and shaped like a
			// real one: only the nonce differs between two attempts.
			salt := func(first string) string { return first[strings.Index(first, ",s="):] }
			if first1 == "" || salt(first1) != salt(first2) {
				t.Errorf("unknown user's salt changes between attempts: %q vs %q", first1, first2)
			}
			if !strings.HasSuffix(first1, ",i=4096") {
				t.Errorf("unknown user's iterations: %q", first1)
			}
		})
	}
}

func TestScramAuthzID(t *testing.T) {
	s := testServer(t, users{"alice": {ScramSHA256: mustCred(t, ScramSHA256, "secret")}})
	client, _ := scram.SHA256.NewClient("alice", "secret", "bob")
	cc := client.NewConversation()
	conv, _ := s.Start(ScramSHA256)
	c1, _ := cc.Step("")
	s1, _, err := conv.Step([]byte(c1))
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := cc.Step(string(s1))
	if _, _, err := conv.Step([]byte(c2)); err == nil || !strings.Contains(err.Error(), "authorization id") {
		t.Errorf("authzid bob for alice: got %v", err)
	}
}

func TestPlain(t *testing.T) {
	users := users{
		"alice": {ScramSHA256: mustCred(t, ScramSHA256, "secret")},
		"bob":   {ScramSHA512: mustCred(t, ScramSHA512, "hunter2")},
	}
	s := testServer(t, users)
	for _, tc := range []struct {
		token string
		user  string // "" when it must fail
		msg   string
	}{
		{"\x00alice\x00secret", "alice", ""},
		{"alice\x00alice\x00secret", "alice", ""},
		{"\x00bob\x00hunter2", "bob", ""}, // only a SHA-512 credential
		{"\x00alice\x00wrong", "", "Authentication failed: Invalid username or password"},
		{"\x00mallory\x00secret", "", "Authentication failed: Invalid username or password"},
		{"bob\x00alice\x00secret", "", "Authentication failed: Client requested an authorization id that is different from username"},
		{"\x00\x00secret", "", "Authentication failed: username not specified"},
		{"\x00alice\x00", "", "Authentication failed: password not specified"},
		{"alice secret", "", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
	} {
		conv, err := s.Start(Plain)
		if err != nil {
			t.Fatal(err)
		}
		reply, done, err := conv.Step([]byte(tc.token))
		if tc.user != "" {
			if err != nil || !done || conv.User() != tc.user || len(reply) != 0 {
				t.Errorf("%q: user %q done %v err %v", tc.token, conv.User(), done, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.msg {
			t.Errorf("%q: got %v, want %q", tc.token, err, tc.msg)
		}
		if _, _, again := conv.Step([]byte(tc.token)); again == nil {
			t.Errorf("%q: a failed conversation accepted another token", tc.token)
		}
	}
}

func TestMechanisms(t *testing.T) {
	s, err := NewServer(nil, nil, nil, []string{ScramSHA512})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(ScramSHA256); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Errorf("disabled mechanism: got %v", err)
	}
	if _, err := NewServer(nil, nil, nil, []string{"GSSAPI"}); err == nil {
		t.Error("GSSAPI: want an error")
	}
	if MechanismCode(ScramSHA512) != 2 || MechanismCode(Plain) != 0 {
		t.Error("mechanism codes")
	}
	if _, err := NewCredential(ScramSHA256, "x", 1000); err == nil {
		t.Error("1000 iterations: want an error")
	}
}

// A credential built from a salted password (what kadm sends) matches one
// built from the password.
func TestCredentialFromSalted(t *testing.T) {
	c := mustCred(t, ScramSHA512, "pw")
	salted, err := SaltedPassword(ScramSHA512, "pw", c.Salt, c.Iterations)
	if err != nil {
		t.Fatal(err)
	}
	d, err := CredentialFromSalted(ScramSHA512, c.Salt, c.Iterations, salted)
	if err != nil || string(d.StoredKey) != string(c.StoredKey) || string(d.ServerKey) != string(c.ServerKey) {
		t.Errorf("mismatch: %v", err)
	}
}

// An unknown user's made-up credential looks like most real ones: when
// users were created with 8192 iterations and 32-byte salts (as a client
// of AlterUserScramCredentials may choose), so is it.
func TestUnknownUserLooksTypical(t *testing.T) {
	cred := func(iters, saltLen int) Credential {
		salt := make([]byte, saltLen)
		salted, err := SaltedPassword(ScramSHA512, "pw", salt, iters)
		if err != nil {
			t.Fatal(err)
		}
		c, err := CredentialFromSalted(ScramSHA512, salt, iters, salted)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	users := users{
		"alice": {ScramSHA512: cred(8192, 32)},
		"bob":   {ScramSHA512: cred(8192, 32)},
		"carol": {ScramSHA512: cred(4096, 24)},
	}
	if got := CommonShape(users.of(ScramSHA512)); got != (Shape{8192, 32}) {
		t.Errorf("common shape %+v", got)
	}
	if got := CommonShape(users.of(ScramSHA256)); got != DefaultShape {
		t.Errorf("shape with no users of the mechanism: %+v", got)
	}
	delete(users, "bob") // a tie: the one with more iterations
	if got := CommonShape(users.of(ScramSHA512)); got != (Shape{8192, 32}) {
		t.Errorf("common shape on a tie %+v", got)
	}
	s := testServer(t, users)
	real, _, _ := runScram(t, s, ScramSHA512, "alice", "nope")
	fake, _, _ := runScram(t, s, ScramSHA512, "mallory", "nope")
	shape := func(first string) string {
		i := strings.Index(first, ",s=")
		salt, iters, _ := strings.Cut(first[i+3:], ",i=")
		return fmt.Sprint(len(salt), iters)
	}
	if shape(real) != shape(fake) {
		t.Errorf("unknown user's server-first %q looks unlike a real user's %q", fake, real)
	}
}
