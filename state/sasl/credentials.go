// Package sasl is the server side of SASL authentication — PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512 — as a pure conversation: tokens in,
// tokens out, a user name at the end. SCRAM runs on
// github.com/xdg-go/scram; PLAIN checks the password against the user's
// SCRAM credential (kaas keeps no other password database). Neither tells
// an unknown user from a wrong password: unknown users get a made-up
// credential derived from a server secret, so the exchange runs the same
// steps and fails at the same point.
package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"iter"
)

// Mechanism names, as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Iteration bounds Apache enforces for SCRAM credentials.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// SaltBytes is the salt length kaas generates (as kadm does).
const SaltBytes = 24

// ScramMechanisms maps the mechanism codes of DescribeUserScramCredentials
// and AlterUserScramCredentials (KIP-554) to names.
var ScramMechanisms = map[int8]string{1: ScramSHA256, 2: ScramSHA512}

// MechanismCode is the KIP-554 code of a SCRAM mechanism name, 0 if none.
func MechanismCode(name string) int8 {
	for c, n := range ScramMechanisms {
		if n == name {
			return c
		}
	}
	return 0
}

func hashFor(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, true
	case ScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// Keys derives RFC 5802's StoredKey and ServerKey from a salted password
// (what AlterUserScramCredentials carries: clients never send passwords).
func Keys(mechanism string, saltedPassword []byte) (storedKey, serverKey []byte, err error) {
	h, ok := hashFor(mechanism)
	if !ok {
		return nil, nil, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	mac := func(key []byte, s string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	clientKey := mac(saltedPassword, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return sum.Sum(nil), mac(saltedPassword, "Server Key"), nil
}

// SaltedPassword is RFC 5802's Hi(password, salt, i): PBKDF2 with the
// mechanism's HMAC. The password is used as its UTF-8 bytes, as Apache's
// ScramFormatter does.
func SaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h, ok := hashFor(mechanism)
	if !ok {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// Credential is a SCRAM credential (RFC 5802): what the server keeps of
// a password. storage/authstore persists it (its Credential has the same
// fields, so each converts to the other).
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// NewCredential hashes password with a fresh random salt (the offline
// `kaas users add`, and tests).
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("iterations must be between %d and %d", MinIterations, MaxIterations)
	}
	salt := make([]byte, SaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	salted, err := SaltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSalted(mechanism, salt, iterations, salted)
}

// CredentialFromSalted builds the stored credential from a salt and a
// salted password.
func CredentialFromSalted(mechanism string, salt []byte, iterations int, saltedPassword []byte) (Credential, error) {
	stored, server, err := Keys(mechanism, saltedPassword)
	if err != nil {
		return Credential{}, err
	}
	return Credential{Salt: salt, Iterations: iterations, StoredKey: stored, ServerKey: server}, nil
}

// Shape is what a credential shows before its password is checked: its
// iteration count and salt length are in SCRAM's server-first message,
// and PLAIN's check costs PBKDF2 at those iterations.
type Shape struct{ Iterations, SaltBytes int }

// DefaultShape is that of the credentials kaas makes itself (`kaas users
// add` with its default iterations).
var DefaultShape = Shape{Iterations: MinIterations, SaltBytes: SaltBytes}

// CommonShape is the shape most of the credentials (the users' of one
// mechanism) have (on a tie, the one with more iterations); DefaultShape when there
// are none. An unknown user's made-up credential takes it, so that a
// probe cannot tell it from a real user's by its iterations, its salt or
// the time PLAIN takes.
func CommonShape(creds iter.Seq[Credential]) Shape {
	counts := map[Shape]int{}
	best, bestN := DefaultShape, 0
	for c := range creds {
		sh := Shape{Iterations: c.Iterations, SaltBytes: len(c.Salt)}
		counts[sh]++
		if n := counts[sh]; n > bestN || (n == bestN && sh.Iterations > best.Iterations) {
			best, bestN = sh, n
		}
	}
	return best
}
